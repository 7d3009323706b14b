"""deploy/nginx.conf, the compose stack's load balancer, run with the real nginx in front of two real gateways.

The compose file cannot run here (no Docker daemon), so its parts run as processes on loopback:
a redis-server, the replicas (`gateway serve` of deploy/gateway.yaml with the environment compose
gives them) and nginx with deploy/nginx.conf as written but for addresses: the replicas' names
resolve only on the stack's network, and port 8080 is the machine's, so each becomes a free
loopback port.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml

from gateway.config.loader import load_config
from tests.support.processes import free_port
from tests.support.scrape import samples
from tests.support.servers import redis_server, require_binary, wait_for_port

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
NGINX_CONF = DEPLOY / "nginx.conf"
KEY = "gw-balancer-test"
UPSTREAM = re.compile(r"upstream\s+gateway\s*\{(?P<body>[^}]*)\}")
SERVER = re.compile(r"^\s*server\s+(?P<address>[^\s;]+)[^;]*;", re.MULTILINE)
LISTEN = re.compile(r"^\s*listen\s+(?P<port>\d+)\s*;", re.MULTILINE)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    return document


def replica_names(compose: dict[str, Any]) -> list[str]:
    """The compose services built from the repository's Dockerfile."""
    return [name for name, service in compose["services"].items() if "build" in service]


def upstream_servers(text: str) -> list[str]:
    match = UPSTREAM.search(text)
    assert match, "nginx.conf has no `upstream gateway` block"
    return SERVER.findall(match["body"])


def on_loopback(text: str, replicas: dict[str, int], listen: int) -> str:
    """nginx.conf with each replica's address and the listening port replaced by loopback ones."""
    config = load_config(DEPLOY / "gateway.yaml", env={"GATEWAY_KEY": KEY})
    for name, port in replicas.items():
        text, found = re.subn(rf"\bserver\s+{re.escape(name)}:{config.server.port}\b", f"server 127.0.0.1:{port}", text)
        assert found == 1, f"{name}:{config.server.port} is not one upstream server"
    text, found = LISTEN.subn(f"    listen 127.0.0.1:{listen};", text)
    assert found == 1
    return text


def test_the_upstream_lists_every_replica_at_its_port(compose: dict[str, Any]) -> None:
    port = load_config(DEPLOY / "gateway.yaml", env={"GATEWAY_KEY": KEY}).server.port
    servers = upstream_servers(NGINX_CONF.read_text())
    assert sorted(servers) == sorted(f"{name}:{port}" for name in replica_names(compose))
    assert len(servers) >= 2


def test_the_balancer_takes_the_published_port_and_the_replicas_none(compose: dict[str, Any]) -> None:
    """Clients reach the replicas only through the balancer, on the port docs/deploying.md names."""
    services = compose["services"]
    assert services["lb"]["volumes"] == ["./nginx.conf:/etc/nginx/nginx.conf:ro"]
    (listen,) = LISTEN.findall(NGINX_CONF.read_text())
    assert services["lb"]["ports"] == [f"8080:{listen}"]
    for name in replica_names(compose):
        assert "ports" not in services[name], f"{name} is published past the balancer"
        assert set(services["lb"]["depends_on"][name].values()) == {"service_healthy"}


def nginx_argv(workdir: Path, replicas: dict[str, int], listen: int, *, test: bool = False) -> list[str]:
    """nginx in the foreground on deploy/nginx.conf moved to loopback; its pid file and error log in `workdir`."""
    conf = workdir / "nginx.conf"
    conf.write_text(on_loopback(NGINX_CONF.read_text(), replicas, listen))
    mode = ["-t"] if test else []
    where = ["-p", str(workdir), "-c", str(conf), "-e", str(workdir / "error.log")]
    return [require_binary("nginx"), *mode, *where, "-g", f"daemon off; pid {workdir}/nginx.pid;"]


def gateway_argv(port: int) -> list[str]:
    """A replica as compose runs it (deploy/gateway.yaml), on 127.0.0.1:`port`."""
    config = str(DEPLOY / "gateway.yaml")
    return [sys.executable, "-m", "gateway", "serve", "--config", config, "--host", "127.0.0.1", "--port", str(port)]


def test_nginx_accepts_the_config(tmp_path: Path, compose: dict[str, Any]) -> None:
    replicas = {name: free_port() for name in replica_names(compose)}
    result = subprocess.run(nginx_argv(tmp_path, replicas, free_port(), test=True), capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr


@contextmanager
def started(argv: list[str], port: int, *, env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """A server process once `port` takes connections; SIGTERM and a wait on the way out."""
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, process, timeout=60)
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(30)


def stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0


def requests_answered(port: int) -> float:
    """What the replica on `port` counted in gateway_requests_total, all series summed."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as scrape:
        text = scrape.read().decode()
    return sum(value for (name, _), value in samples(text).items() if name == "gateway_requests_total")


def error_code(error: openai.APIStatusError) -> object:
    return error.body.get("code") if isinstance(error.body, dict) else error.body


def test_two_replicas_behind_nginx_share_memory_and_outlive_each_other(tmp_path: Path, compose: dict[str, Any]) -> None:
    """Turns of one conversation alternate replicas; one stopped, the other answers (its own errors unchanged);
    none: a 503 in the API's shape."""
    with ExitStack() as stack:
        redis = stack.enter_context(redis_server(tmp_path))
        env = {**os.environ, "GATEWAY_KEY": KEY, "REDIS_URL": redis.url, "OPENAI_API_KEY": ""}
        ports = {name: free_port() for name in replica_names(compose)}
        replicas = {name: stack.enter_context(started(gateway_argv(port), port, env=env)) for name, port in ports.items()}
        listen = free_port()
        stack.enter_context(started(nginx_argv(tmp_path, ports, listen), listen))
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{listen}/v1", api_key=KEY, max_retries=0)

        def turn(words: str) -> str:
            reply = client.chat.completions.create(
                model="mock-1", messages=[{"role": "user", "content": words}], extra_headers={"memoryId": "balanced"}
            )
            return reply.choices[0].message.content or ""

        for number in range(1, 5):
            # the history of every earlier turn, whichever replica answered it, comes with this one
            assert turn(f"turn {number}") == f'Mock reply: received {2 * number - 1} messages; last user message: "turn {number}"'
        assert all(requests_answered(port) > 0 for port in ports.values()), "a replica got no request"
        with pytest.raises(urllib.error.HTTPError) as mixed:  # one replica's counters, or the other's
            urllib.request.urlopen(f"http://127.0.0.1:{listen}/metrics", timeout=10)
        assert mixed.value.code == 404

        first, *others = replicas
        stop(replicas[first])
        for number in range(5, 9):
            assert turn(f"turn {number}").startswith(f"Mock reply: received {2 * number - 1} messages")

        # A replica's own 503 reaches the client as the replica wrote it, not as the balancer's
        redis.kill()
        with pytest.raises(openai.InternalServerError) as unstored:
            turn("with Redis gone")
        assert (unstored.value.status_code, error_code(unstored.value)) == (503, "memory_unavailable")

        for name in others:
            stop(replicas[name])
        with pytest.raises(openai.InternalServerError) as refused:
            turn("anyone?")
        assert refused.value.status_code == 503
        assert refused.value.body == {
            "message": "no gateway replica answered", "type": "server_error", "param": None, "code": "gateway_unavailable"
        }
        client.close()
