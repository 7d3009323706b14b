"""The one-pass plan against the general planner, through real Turns and stores.

Two stores are fed the same scripted conversations: one with `plan_common_turn` as it is, one
with it refusing every request (so `plan_turn` plans them all). After each turn the plans, the
x-memory-* headers, how the write went and the stored conversations (with their counts) must be
equal: SQLite with restarts (caches emptied, a narrow window's tail cached before a wide one)
and small caps, and the in-process store.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from gateway.core.memory.settings import MemorySettings
from gateway.memory import turns
from gateway.memory.sqlite import SQLiteStore
from gateway.memory.store import InProcessStore, MemoryStore
from gateway.memory.turns import Memory, Turn
from gateway.observe.trace import Trace

_ONE_PASS = turns.plan_common_turn
SYSTEMS = [
    {"role": "system", "content": "be brief"},
    {"role": "developer", "content": "be brief"},
    {"role": "system", "content": "new rules " * 5},
    {"role": "system", "content": "z" * 5000},
]
TEXTS = ["hi", "a longer sentence " * 3, "x" * 90, "ok", "", "héllo 🌍", "y" * 5000, "w " * 9000]


def _request(rng: random.Random, history_last: str | None) -> list[dict[str, Any]]:
    question = {"role": "user", "content": rng.choice(TEXTS + ([history_last] if history_last else []))}
    shape = rng.random()
    if shape < 0.7:
        return [rng.choice(SYSTEMS), question]
    if shape < 0.8:
        return [question]
    if shape < 0.85:
        return [rng.choice(SYSTEMS), {**question, "name": "ann"}]
    if shape < 0.9:
        return [rng.choice(SYSTEMS), {"role": "tool", "tool_call_id": "c1", "content": "42"}]
    return [rng.choice(SYSTEMS), {"role": "assistant", "content": "said"}, question]


def _reply(rng: random.Random) -> dict[str, Any]:
    r, text = rng.random(), rng.choice(TEXTS)
    if r < 0.8:
        return {"role": "assistant", "content": text}
    if r < 0.85:
        return {"role": "assistant", "content": text, "name": "bot"}
    if r < 0.9:
        call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    if r < 0.95:
        return {"role": "user", "content": text}
    return {"content": text, "refusal": None}


def _window(rng: random.Random) -> MemorySettings:
    r = rng.random()
    if r < 0.85:
        tokens = rng.choice([1, 5, 20, 40, 60, 100, 300, 3000, 100000]) + rng.randint(-3, 3)
        return MemorySettings("token_window", max_tokens=tokens)
    if r < 0.93:
        return MemorySettings("message_window", max_messages=rng.randint(1, 10))
    return MemorySettings("round_window", max_rounds=rng.randint(1, 4), max_chars=rng.choice([50, 1000, 100000]))


def _never_common(*args: object, **kwargs: object) -> None:
    return None


@pytest.mark.parametrize("kind", ["sqlite", "in-process"])
@pytest.mark.parametrize("seed", range(8))
async def test_turns_planned_in_one_pass_forward_and_store_what_the_general_planner_does(
    seed: int, kind: str, tmp_path: Path
) -> None:
    rng = random.Random(seed)
    plain = seed % 2 == 0  # half the seeds: one encoding and plain replies, the common turn's conversations
    cap = 1000 if plain else rng.choice([4, 9, 1000])

    def open_store(name: str) -> MemoryStore:
        if kind == "sqlite":
            return SQLiteStore(str(tmp_path / f"{name}.db"), ttl_seconds=3600, max_messages=cap, lock_timeout=5)
        return InProcessStore(ttl_seconds=3600, max_messages=cap, lock_timeout=5)

    one_pass, general = Memory(open_store("one-pass")), Memory(open_store("general"))
    key, last = ("t", "m"), None
    forced: list[MemorySettings] = []
    taken = 0  # turns the one-pass plan took: the test is void if it took none
    try:
        for step in range(rng.randint(20, 60)):
            if kind == "sqlite" and rng.random() < 0.15:  # a restart: the caches start empty
                await one_pass.close()
                await general.close()
                one_pass, general = Memory(open_store("one-pass")), Memory(open_store("general"))
                if rng.random() < 0.5:  # a narrow window caches a tail; a wide one next is served it
                    forced = [MemorySettings("token_window", max_tokens=20), MemorySettings("token_window", max_tokens=100000)]
            messages, settings, model, answer = _request(rng, last), _window(rng), rng.choice(["gpt-4o", "gpt-4o", "gpt-4"]), _reply(rng)
            if forced:
                settings = forced.pop(0)
            if plain:
                model, answer = "gpt-4o", {"role": "assistant", "content": rng.choice(TEXTS[:6])}
            outcomes = []
            for memory, plan_common in ((one_pass, _ONE_PASS), (general, _never_common)):
                planned: list[object] = []

                def watched(*args: Any, _plan: Any = plan_common, _planned: list[object] = planned, **kwargs: Any) -> Any:
                    _planned.append(plan := _plan(*args, **kwargs))
                    return plan

                turns.plan_common_turn = watched
                try:
                    async with Turn(memory, key, settings=settings, messages=[dict(m) for m in messages], model=model, trace=Trace()) as turn:
                        plan, headers = turn.plan, dict(turn.headers)
                        try:
                            await turn.commit_answer({"choices": [{"message": dict(answer)}]})
                            stored = "ok"
                        except Exception as exc:
                            stored = type(exc).__name__
                finally:
                    turns.plan_common_turn = _ONE_PASS
                if memory is one_pass:
                    taken += any(p is not None for p in planned)
                conversation = await memory.store.load(key)
                state = None if conversation is None else (
                    conversation.system, [(e.message, dict(e.tokens)) for e in conversation.entries]
                )  # fmt: skip
                outcomes.append((plan, headers, stored, state))
            assert outcomes[0] == outcomes[1], f"seed {seed}, step {step}: {messages} under {settings}"
            last = answer.get("content") if isinstance(answer.get("content"), str) else None
    finally:
        await one_pass.close()
        await general.close()
    if plain:
        assert taken, "the one-pass plan took no turn: the comparison proves nothing"
