"""deploy/kubernetes/base, rendered as kustomize renders it and checked without a cluster.

Every manifest passes `kubernetes-validate` (strict: an unknown field fails) for each Kubernetes
release it knows; the ConfigMap's gateway.yaml passes `gateway check-config` with only the
environment the Deployment gives the container; a real gateway serving that config on a real
redis-server answers each probe's path and keeps memory and breakers in that Redis; and the
manifests agree with each other, with the config and with the Dockerfile: grace period,
selectors, the HPA's target and the CPU it measures against, user, config path, ports.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path, PurePosixPath
from typing import Any

import openai
import pytest
import redis
import yaml
from kubernetes_validate import utils as kubernetes_validate

from gateway.config.loader import load_config
from gateway.core.settings import Config
from tests.support.dockerfile import DOCKERFILE, exec_form, in_force, parse_dockerfile
from tests.support.kustomize import render_base
from tests.support.processes import free_port
from tests.support.servers import redis_server, wait_for_port

ROOT = Path(__file__).resolve().parent.parent
BASE = ROOT / "deploy" / "kubernetes" / "base"
SECRET_EXAMPLE = BASE / "secret.example.yaml"
# Values the container's environment gets from the Secret, as a cluster's operator would set them.
PLACEHOLDERS = {"GATEWAY_KEY": "gw-kubernetes-test", "REDIS_URL": "redis://redis.example:6379/0"}
ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}")


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    return render_base(BASE)


def one(documents: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [doc for doc in documents if doc["kind"] == kind]
    return found


def pod_spec(documents: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = one(documents, "Deployment")["spec"]["template"]["spec"]
    return spec


def container(documents: list[dict[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any]
    (found,) = pod_spec(documents)["containers"]
    return found


def config_text(documents: list[dict[str, Any]]) -> str:
    """The gateway.yaml the pods mount: the ConfigMap the Deployment's config volume names."""
    (volume,) = [v for v in pod_spec(documents)["volumes"] if "configMap" in v]
    (config_map,) = [
        doc for doc in documents
        if doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == volume["configMap"]["name"]
    ]  # fmt: skip
    text: str = config_map["data"]["gateway.yaml"]
    return text


def container_env(documents: list[dict[str, Any]]) -> dict[str, str]:
    """The container's environment, with a placeholder for every value a Secret gives it."""
    env: dict[str, str] = {}
    for variable in container(documents)["env"]:
        name = variable["name"]
        if "value" in variable:
            env[name] = variable["value"]
        elif "secretKeyRef" in variable["valueFrom"]:
            env[name] = PLACEHOLDERS.get(name, f"placeholder-{name.lower()}")
    return env


def loaded_config(documents: list[dict[str, Any]], tmp_path: Path, env: dict[str, str]) -> Config:
    path = tmp_path / "gateway.yaml"
    path.write_text(config_text(documents))
    return load_config(path, env=env)


def probe_port(documents: list[dict[str, Any]], probe: dict[str, Any]) -> int:
    """A probe's port, a named one resolved through the container's ports."""
    port = probe["httpGet"]["port"]
    if isinstance(port, int):
        return port
    (number,) = [p["containerPort"] for p in container(documents)["ports"] if p["name"] == port]
    return int(number)


def probes(documents: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {kind: probe for kind, probe in container(documents).items() if kind.endswith("Probe")}


def prestop_seconds(documents: list[dict[str, Any]]) -> float:
    """How long preStop keeps the pod serving before SIGTERM: an exec of `sleep N`, or the sleep action."""
    pre_stop = container(documents).get("lifecycle", {}).get("preStop")
    if pre_stop is None:
        return 0
    if "sleep" in pre_stop:
        return float(pre_stop["sleep"]["seconds"])
    command = pre_stop["exec"]["command"]
    assert command[0] == "sleep" and len(command) == 2, command
    return float(command[1])


# ---------------------------------------------------------------- rendering and the schema


def kind_and_name(document: dict[str, Any]) -> tuple[str, str]:
    return document["kind"], document["metadata"]["name"]


def kustomize_command() -> list[str] | None:
    if shutil.which("kustomize"):
        return ["kustomize", "build"]
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize"]
    return None


def test_the_test_renderer_renders_what_kustomize_renders(rendered: list[dict[str, Any]]) -> None:
    """Where a kustomize is installed (kubectl has one), its output is the helper's; skipped elsewhere.

    No registry this project installs from ships kustomize, so no machine is made to have one.
    """
    command = kustomize_command()
    if command is None:
        pytest.skip("neither kustomize nor kubectl is installed")
    output = subprocess.run([*command, str(BASE)], capture_output=True, text=True, timeout=60, check=True).stdout
    assert sorted(yaml.safe_load_all(output), key=kind_and_name) == sorted(rendered, key=kind_and_name)


@pytest.mark.parametrize("version", sorted(set(kubernetes_validate.all_versions())))
def test_every_manifest_is_valid_kubernetes(rendered: list[dict[str, Any]], version: str) -> None:
    """The base and the Secret's example, strictly (an unknown or misplaced field fails), per release."""
    for document in [*rendered, *yaml.safe_load_all(SECRET_EXAMPLE.read_text())]:
        try:
            kubernetes_validate.validate(document, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{document['kind']}/{document['metadata']['name']} on {version}: {error.message} at {list(error.path)}")


def test_the_base_has_the_pieces_of_a_replicated_service(rendered: list[dict[str, Any]]) -> None:
    kinds = sorted(doc["kind"] for doc in rendered)
    assert kinds == ["ConfigMap", "Deployment", "HorizontalPodAutoscaler", "PodDisruptionBudget", "Service"]
    assert one(rendered, "HorizontalPodAutoscaler")["spec"]["minReplicas"] >= 2


def test_the_autoscaler_alone_sets_the_replica_count(rendered: list[dict[str, Any]]) -> None:
    """With `replicas` in the Deployment, each apply would undo the HPA's count (it scales below min up itself)."""
    assert "replicas" not in one(rendered, "Deployment")["spec"]


# ---------------------------------------------------------------- the config the pods mount


def test_the_config_map_passes_check_config_with_the_containers_environment(
    rendered: list[dict[str, Any]], tmp_path: Path
) -> None:
    """Every ${VAR} the config needs comes from the Deployment: none from the shell running the test."""
    path = tmp_path / "gateway.yaml"
    path.write_text(config_text(rendered))
    referenced = {match[1] for match in ENV_REFERENCE.finditer(path.read_text())}
    shell = {name: value for name, value in os.environ.items() if name not in referenced}
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "check-config", str(path)],
        env={**shell, **container_env(rendered)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_memory_and_breakers_live_in_the_redis_of_the_secret(rendered: list[dict[str, Any]], tmp_path: Path) -> None:
    config = loaded_config(rendered, tmp_path, container_env(rendered))
    assert (config.memory.store, config.memory.url) == ("redis", PLACEHOLDERS["REDIS_URL"])
    assert (config.breakers.store, config.breakers.url) == ("redis", PLACEHOLDERS["REDIS_URL"])


def test_every_secret_the_pods_read_is_in_the_secrets_example(rendered: list[dict[str, Any]]) -> None:
    """Values come from the Secret (none written in a manifest); its example names each key, as ${VAR}."""
    (example,) = yaml.safe_load_all(SECRET_EXAMPLE.read_text())
    for variable in container(rendered)["env"]:
        assert "value" not in variable, f"{variable['name']} is written in the manifest"
        reference = variable["valueFrom"]["secretKeyRef"]
        assert reference["name"] == example["metadata"]["name"]
        assert example["stringData"][reference["key"]] == f"${{{reference['key']}}}"


# ---------------------------------------------------------------- probes, run


def test_each_probe_path_answers_on_a_gateway_serving_the_config_map(rendered: list[dict[str, Any]], tmp_path: Path) -> None:
    """With a real redis-server as the Secret's REDIS_URL: 200 on every probe, a memory turn and breakers
    in Redis, and still ready once Redis is gone."""
    with redis_server(tmp_path) as server:
        env = {**os.environ, **container_env(rendered), "REDIS_URL": server.url}
        config = loaded_config(rendered, tmp_path, env)
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "gateway", "serve", "--config", str(tmp_path / "gateway.yaml"),
             "--host", "127.0.0.1", "--port", str(port)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            wait_for_port(port, process, timeout=60)
            for kind, probe in probes(rendered).items():
                assert probe_port(rendered, probe) == config.server.port, kind
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{probe['httpGet']['path']}", timeout=10) as reply:
                    assert reply.status == 200, kind
            with openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=env["GATEWAY_KEY"]) as client:
                client.chat.completions.create(
                    model="mock-1", messages=[{"role": "user", "content": "hi"}], extra_headers={"memoryId": "k8s"}
                )
                health = client.get("/gateway/health", cast_to=object)
            assert isinstance(health, dict) and health["breakers"] == "redis"
            assert redis.Redis.from_url(server.url).dbsize() > 0, "the memory turn left nothing in Redis"
            # Every pod shares the Redis: its outage must not take them all out of the Service
            server.kill()
            readiness = probes(rendered)["readinessProbe"]["httpGet"]["path"]
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{readiness}", timeout=10) as reply:
                assert reply.status == 200
        finally:
            process.terminate()
            process.wait(30)


# ---------------------------------------------------------------- manifests that must agree


def test_termination_grace_outlasts_prestop_and_the_drain(rendered: list[dict[str, Any]], tmp_path: Path) -> None:
    """Kubernetes kills the pod at terminationGracePeriodSeconds, counted from before preStop."""
    drain = loaded_config(rendered, tmp_path, container_env(rendered)).server.drain_seconds
    grace = pod_spec(rendered)["terminationGracePeriodSeconds"]
    assert grace > prestop_seconds(rendered) + drain


def test_prestop_keeps_serving_while_endpoints_catch_up(rendered: list[dict[str, Any]]) -> None:
    assert prestop_seconds(rendered) >= 5


def test_probes_ask_readyz_for_traffic_and_healthz_for_life(rendered: list[dict[str, Any]]) -> None:
    paths = {kind: probe["httpGet"]["path"] for kind, probe in probes(rendered).items()}
    assert paths["readinessProbe"] == "/readyz"
    assert paths["livenessProbe"] == "/healthz"
    assert paths.get("startupProbe", "/healthz") == "/healthz"


def test_the_disruption_budget_and_the_service_select_the_deployments_pods(rendered: list[dict[str, Any]]) -> None:
    deployment = one(rendered, "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    budget = one(rendered, "PodDisruptionBudget")["spec"]
    assert budget["selector"]["matchLabels"].items() <= labels.items()
    assert set(budget["selector"]) == {"matchLabels"}
    # one pod at a time may go: never all, never none (a node drain would wait forever)
    assert budget.get("maxUnavailable", 1) >= 1
    assert budget.get("minAvailable", 0) < one(rendered, "HorizontalPodAutoscaler")["spec"]["minReplicas"]
    service = one(rendered, "Service")["spec"]
    assert service["selector"].items() <= labels.items()
    (port,) = service["ports"]
    assert port["targetPort"] in {p["name"] for p in container(rendered)["ports"]}


def test_the_autoscaler_scales_the_deployment_on_the_cpu_it_requests(rendered: list[dict[str, Any]]) -> None:
    deployment = one(rendered, "Deployment")
    hpa = one(rendered, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["apiVersion"], target["kind"], target["name"]) == ("apps/v1", "Deployment", deployment["metadata"]["name"])
    assert [m["resource"]["name"] for m in hpa["spec"]["metrics"] if m["type"] == "Resource"] == ["cpu"]
    assert 2 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]
    # utilization is a percentage of the request: without one the HPA cannot scale
    assert all("cpu" in c.get("resources", {}).get("requests", {}) for c in pod_spec(rendered)["containers"])


def test_pods_run_as_the_images_user_with_a_read_only_root(rendered: list[dict[str, Any]], tmp_path: Path) -> None:
    """The Dockerfile's numeric USER, nothing writable but /tmp, and a config that writes nowhere else."""
    user, _, group = in_force(parse_dockerfile(DOCKERFILE.read_text()), "USER").args.partition(":")
    pod = pod_spec(rendered)["securityContext"]
    assert pod["runAsNonRoot"] is True
    assert (pod["runAsUser"], pod["runAsGroup"]) == (int(user), int(group or user))
    security = container(rendered)["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    writable = {m["mountPath"] for m in container(rendered)["volumeMounts"] if not m.get("readOnly")}
    assert writable == {"/tmp"}
    assert loaded_config(rendered, tmp_path, container_env(rendered)).memory.store == "redis", "SQLite needs a writable path"


def test_the_config_is_mounted_where_the_images_command_reads_it(rendered: list[dict[str, Any]]) -> None:
    """The image's CMD is kept (no command or args), and its --config path is the ConfigMap's file."""
    assert not {"command", "args"} & set(container(rendered))
    cmd = exec_form(in_force(parse_dockerfile(DOCKERFILE.read_text()), "CMD").args)
    config_path = PurePosixPath(cmd[cmd.index("--config") + 1])
    (volume,) = [v for v in pod_spec(rendered)["volumes"] if "configMap" in v]
    (mount,) = [m for m in container(rendered)["volumeMounts"] if m["name"] == volume["name"]]
    assert PurePosixPath(mount["mountPath"]) / "gateway.yaml" == config_path


def test_the_image_is_the_one_compose_builds(rendered: list[dict[str, Any]]) -> None:
    compose = yaml.safe_load((ROOT / "deploy" / "docker-compose.yml").read_text())
    built = {service["image"] for service in compose["services"].values() if "build" in service}
    assert built == {container(rendered)["image"]}


def test_the_container_port_is_the_configs_and_each_pod_is_scraped(rendered: list[dict[str, Any]], tmp_path: Path) -> None:
    config = loaded_config(rendered, tmp_path, container_env(rendered))
    (port,) = container(rendered)["ports"]
    assert port["containerPort"] == config.server.port
    annotations = one(rendered, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == str(config.server.port)
    assert annotations["prometheus.io/path"] == config.metrics.path


@pytest.mark.parametrize("documented_in", [BASE / "kustomization.yaml", SECRET_EXAMPLE])
def test_the_documented_kubectl_create_secret_gives_every_key_the_pods_need(
    rendered: list[dict[str, Any]], documented_in: Path
) -> None:
    """The command in the comments names the Secret the pods read and each key not marked optional."""
    comments = [line.lstrip("#").strip() for line in documented_in.read_text().splitlines() if line.startswith("#")]
    start = next(i for i, line in enumerate(comments) if line.startswith("kubectl create secret generic "))
    lines = [comments[start]]
    while lines[-1].endswith("\\"):
        lines.append(comments[start + len(lines)])
    command = shlex.split(" ".join(line.removesuffix("\\") for line in lines))
    assert command[4] == pod_secret_name(rendered)
    given = {arg.removeprefix("--from-literal=").partition("=")[0] for arg in command[5:]}
    references = [variable["valueFrom"]["secretKeyRef"] for variable in container(rendered)["env"]]
    assert given == {reference["key"] for reference in references if not reference.get("optional")}


def pod_secret_name(documents: list[dict[str, Any]]) -> str:
    (name,) = {variable["valueFrom"]["secretKeyRef"]["name"] for variable in container(documents)["env"]}
    return str(name)
