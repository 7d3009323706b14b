"""check-config never prints a value that came from the environment: it shows the `${VAR}` as written.

Also what the loader keeps for the rest of the gateway: `Target.env_values`, every value of a
target's settings that came from `${VAR}` (the substituted pieces, not whole strings); and a
running gateway's logs and answers never carry the memory URL's password or a gateway key.
"""

from __future__ import annotations

import logging
import re
import textwrap
from pathlib import Path

import aiohttp
import pytest

from gateway.cli.main import main
from gateway.config.loader import ConfigError, parse_config
from gateway.core.tree import iter_targets
from tests.support.gateway import GATEWAY_KEY, Gateway
from tests.support.servers import free_port

SECRETS = {
    "OPENAI_KEY": "sk-env-key-0001",
    "TENANT_TOKEN": "tenant-token-0002",
    "USER_TAG": "user-tag-0003",
    "TEAM_HEADER": "team-header-0004",
    "REDIS_PASSWORD": "redis-pass-0005",
    "GATEWAY_KEY": "gw-key-0006",
    "WHOLE_URL": "https://whole.example/v1/path-token-0007/",
    "BACKUP_KEY": "sk-backup-0008",
}

CONFIG = """
memory: {store: redis, url: "redis://:${REDIS_PASSWORD}@127.0.0.1:6379/0"}
auth: {keys: [{name: ops, key: "${GATEWAY_KEY}"}]}
routes:
  smart:
    strategy: {mode: fallback}
    overrideParams: {user: "${USER_TAG}", metadata: {tags: ["${USER_TAG}", plain]}}
    headers: {x-team: "${TEAM_HEADER}"}
    targets:
      - name: primary
        provider: openai
        apiKey: ${OPENAI_KEY}
        baseUrl: https://api.example/v1/${TENANT_TOKEN}/x
      - name: backup
        provider: openai
        apiKey: "${BACKUP_KEY:-unused}"
        baseUrl: ${WHOLE_URL}
        overrideParams: {model: "gpt-${MISSING:-4o}"}
"""


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("MISSING", raising=False)


def check(tmp_path: Path, text: str) -> int | str | None:
    """check-config's exit code on `text`."""
    path = tmp_path / "g.yaml"
    path.write_text(textwrap.dedent(text))
    try:
        return main(["check-config", str(path)])
    except SystemExit as exit_:
        return exit_.code


def test_check_config_shows_references_not_values(
    secret_env: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = check(tmp_path, CONFIG)
    out, err = capsys.readouterr()
    assert code == 0, err
    for value in SECRETS.values():
        assert value not in out + err
        assert value.rstrip("/") not in out + err
    assert "baseUrl=https://api.example/v1/${TENANT_TOKEN}/x" in out
    assert "baseUrl=${WHOLE_URL}" in out
    assert "'user': '${USER_TAG}'" in out
    assert "'tags': ['${USER_TAG}', 'plain']" in out
    assert "'model': 'gpt-4o'" in out  # a default written in the file is no secret


def test_check_config_errors_show_references_and_mask_userinfo(
    secret_env: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = """
    memory: {store: redis, url: "redis://:${REDIS_PASSWORD}@127.0.0.1:6379/0?cluster=${USER_TAG}"}
    routes:
      a: {provider: openai, apiKey: "${OPENAI_KEY}", baseUrl: "https://user:${TENANT_TOKEN}@api.example/v1"}
      b: {provider: openai, baseUrl: "ftp://user:${TEAM_HEADER}@api.example/v1"}
      c: {provider: openai, apiKey: k, weight: "${GATEWAY_KEY}"}
      d: {provider: openai, apiKey: k, baseUrl: "https://api.example/v1/${TENANT_TOKEN}?x=1"}
    """
    code = check(tmp_path, text)
    out, err = capsys.readouterr()
    assert code == 2
    for value in SECRETS.values():
        assert value not in out + err
    assert "routes.a.baseUrl: must not carry credentials" in err
    assert "routes.b.baseUrl: must be an http(s) URL, got 'ftp://***@api.example/v1'" in err
    assert "routes.c.weight: must be a number, got '${GATEWAY_KEY}'" in err
    assert "https://api.example/v1/${TENANT_TOKEN}?x=1" in err
    assert "memory.url: query option 'cluster'" in err


def test_env_values_are_each_targets_substituted_pieces() -> None:
    config = parse_config(textwrap.dedent(CONFIG), env=SECRETS)
    targets = {target.name: target for target in iter_targets(config.routes["smart"].root)}
    primary, backup = targets["primary"], targets["backup"]
    assert set(primary.env_values) == {"sk-env-key-0001", "tenant-token-0002", "user-tag-0003", "team-header-0004"}
    assert set(backup.env_values) == {
        "sk-backup-0008", "https://whole.example/v1/path-token-0007/", "https://whole.example/v1/path-token-0007",
        "user-tag-0003", "team-header-0004",
    }  # fmt: skip
    assert backup.env_refs["sk-backup-0008"] == "${BACKUP_KEY:-unused}"
    assert primary.env_refs["tenant-token-0002"] == "${TENANT_TOKEN}"
    # a node that sets a setting again replaces what it inherited, values from the environment included
    plain = parse_config(
        textwrap.dedent("""
        routes:
          r:
            strategy: {mode: single}
            apiKey: ${OPENAI_KEY}
            targets: [{provider: openai, apiKey: written-key}]
        """),
        env=SECRETS,
    )
    assert plain.routes["r"].first_target.env_values == ()


@pytest.mark.parametrize("reachable", [True, False], ids=["redis", "closed-port"])
async def test_the_memory_urls_password_and_the_auth_keys_never_reach_logs_or_answers(
    reachable: bool, redis_url: str, gateway: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    host = redis_url.split("://", 1)[1].split("/", 1)[0] if reachable else f"127.0.0.1:{free_port()}"
    env = {"REDIS_PASSWORD": "redis-pass-0005", "GATEWAY_KEY": GATEWAY_KEY}
    config = parse_config(
        textwrap.dedent(f"""
        memory: {{store: redis, url: "redis://:${{REDIS_PASSWORD}}@{host}/0"}}
        auth: {{keys: [{{name: ops, key: "${{GATEWAY_KEY}}"}}]}}
        routes: {{m: {{provider: mock}}}}
        """),
        env=env,
    )
    client = await gateway(config)
    body = {"model": "m", "messages": [{"role": "user", "content": "q"}]}
    headers = {"Authorization": f"Bearer {GATEWAY_KEY}", "memoryId": "c1"}
    async with aiohttp.ClientSession() as session, session.post(
        f"{client.base_url}chat/completions", json=body, headers=headers
    ) as response:
        answer = await response.text()
    assert response.status == (200 if reachable else 503), answer
    for secret in ("redis-pass-0005", GATEWAY_KEY):
        assert secret not in answer and secret not in caplog.text


def test_numbers_and_booleans_from_the_environment_are_settings_not_secrets() -> None:
    # shown in errors as they are: masking '1' or 'true' everywhere would garble every message
    with pytest.raises(ConfigError) as caught:
        parse_config("routes: {m: {provider: mock, timeout: '${T}', weight: '${W}'}}", env={"T": "-5", "W": "true"})
    assert "routes.m.timeout: must be > 0, got -5" in caught.value.errors
    assert "routes.m.weight: must be a number, got a boolean" in caught.value.errors


def test_the_configs_repr_carries_no_secret() -> None:
    config = parse_config(
        "memory: {store: redis, url: 'redis://:pw-0009@h:6379/0'}\n"
        "breakers: {store: redis, url: 'redis://:pw-0010@h:6379/1'}\n"
        "routes: {m: {provider: openai, apiKey: sk-0011, baseUrl: 'https://h/v1/${TOKEN}', headers: {x-key: '${TOKEN}'}}}",
        env={"TOKEN": "tok-0012"},
    )
    shown = repr(config)
    assert not {"pw-0009", "pw-0010", "sk-0011", "tok-0012"} & set(re.findall(r"[\w-]+", shown))
    assert "base_url='https://h/v1/${TOKEN}'" in shown


async def test_a_memory_path_from_the_environment_is_shown_as_its_reference_in_logs_and_answers(
    gateway: Gateway, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The SQLite store's errors and log lines name `${MEMORY_DIR}/m.db`, never the directory it stands for."""
    import os

    import openai

    secret_dir = tmp_path / "dir-token-0009"
    config = parse_config(
        "memory: {store: sqlite, path: '${MEMORY_DIR}/m.db'}\nroutes:\n  m: {provider: mock}\n",
        env={"MEMORY_DIR": str(secret_dir)},
    )
    assert config.memory.path == f"{secret_dir}/m.db" and config.memory.shown_path == "${MEMORY_DIR}/m.db"
    client = await gateway(config)
    turn: dict = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "extra_headers": {"x-memory-id": "c"}}
    await client.chat.completions.create(**turn)
    os.remove(secret_dir / "m.db")  # found out by the next write: logged, and that turn refused
    with caplog.at_level(logging.DEBUG), pytest.raises(openai.APIStatusError) as caught:
        await client.chat.completions.create(**turn)
    assert caught.value.status_code == 503
    told = str(caught.value.body) + "\n".join(record.getMessage() for record in caplog.records)
    assert "dir-token-0009" not in told
    assert "${MEMORY_DIR}/m.db" in "\n".join(record.getMessage() for record in caplog.records)


@pytest.mark.parametrize("token", ["tenantsecret42\n", "tenant\tsecret42", "tenantsecret42\x00", "tenant'secret\"42\r\n"])
def test_a_value_with_control_characters_is_shown_as_its_reference_in_errors(token: str) -> None:
    """A token read from a file keeps its newline: the error quotes the URL with repr, escapes and all."""
    with pytest.raises(ConfigError) as caught:
        parse_config("routes:\n  a: {provider: openai, baseUrl: 'http://h/v1/${TOK}/x'}\n", env={"TOK": token})
    told = "\n".join(caught.value.errors)
    assert "secret" not in told and "${TOK}" in told, told


def test_a_node_name_from_the_environment_is_refused() -> None:
    """Names are shown in answer headers, metrics labels, logs and the health page."""
    text = "routes:\n  r:\n    strategy: {mode: fallback}\n    targets:\n      - {name: '${TEAM}', provider: mock}\n"
    with pytest.raises(ConfigError) as caught:
        parse_config(text, env={"TEAM": "team-secret-0010"})
    assert caught.value.errors == (
        "routes.r.targets[0].name: must be written out, not taken from the environment (it is shown in headers and metrics)",
    )
