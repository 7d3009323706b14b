"""The captured CLI bodies in tests/clients/fixtures/ hold the clients' structure, not their prose or our paths."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.support.agent_clis import FIXTURES, LEFT_OUT, check_against_fixture, cleaned, fixture, shape

NAMES = sorted(path.name for path in FIXTURES.glob("*.json"))


@pytest.mark.parametrize("name", NAMES)
def test_a_fixture_is_as_the_refresh_writes_it(name: str) -> None:
    body = fixture(name)
    assert cleaned(body) == body
    assert b"pytest-of" not in (FIXTURES / name).read_bytes()


def test_prose_and_paths_are_left_out_and_the_shape_kept() -> None:
    run = Path("/tmp/pytest-of-root/pytest-19/test_a_tool0")
    prompt = "You are an agent.\n" + "Be careful. " * 40 + f"Memory is at /home/.claude/projects/{str(run).replace('/', '-').replace('_', '-')}/x"
    ids = orjson.dumps({"device_id": "d" * 64, "session_id": "s"}).decode()
    body = {
        "system": [{"type": "text", "text": prompt}, {"type": "text", "text": "x-anthropic-billing-header: cc_version=1;"}],
        "tools": [{"name": "Read", "description": "Reads a file.", "input_schema": {"type": "object", "properties": {
            "mode": {"type": "string", "enum": ["a", "b"], "description": "How."}}}},
            {"type": "custom", "name": "exec", "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"}}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": f"Read {run}/work/note.txt"},
                                                  {"type": "image", "source": {"data": "data:image/png;base64," + "A" * 100}}]}],
        "metadata": {"user_id": ids},
    }
    kept = cleaned(body, run)
    assert kept["system"] == [{"type": "text", "text": f"You are an agent.… {LEFT_OUT}"},
                              {"type": "text", "text": "x-anthropic-billing-header: cc_version=1;"}]
    assert kept["tools"][0]["description"] == kept["tools"][1]["format"]["definition"] == LEFT_OUT
    assert kept["tools"][0]["input_schema"]["properties"]["mode"] == {"type": "string", "enum": ["a", "b"], "description": LEFT_OUT}
    assert kept["messages"][0]["content"][0]["text"] == "Read /run/work/note.txt"
    assert kept["messages"][0]["content"][1] == body["messages"][0]["content"][1] and kept["metadata"] == body["metadata"]
    assert "pytest" not in orjson.dumps(cleaned({"text": prompt[-100:]}, run)).decode()
    assert shape(kept) == shape(body) and cleaned(kept) == kept


def test_a_field_new_or_gone_from_what_a_client_sends_fails_the_comparison(tmp_path: Path) -> None:
    body = fixture("claude_code_question.json")
    check_against_fixture("claude_code_question.json", body, tmp_path)
    with pytest.raises(AssertionError, match="lacks: \\['speed'\\]"):
        check_against_fixture("claude_code_question.json", {**body, "speed": "fast"}, tmp_path)
    with pytest.raises(AssertionError, match="no longer sends \\['thinking', "):
        check_against_fixture("claude_code_question.json", {k: v for k, v in body.items() if k != "thinking"}, tmp_path)
