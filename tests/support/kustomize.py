"""A kustomize base rendered as `kubectl kustomize` renders it, for what deploy/kubernetes uses.

`resources` (files of the base) and `configMapGenerator` (files and literals: the ConfigMap is
named with kustomize's hash of its data, and the pod templates' references to it follow). Any
other key in kustomization.yaml is refused, so the helper never renders a base differently from
kustomize without saying so; tests/test_deploy_kubernetes.py compares the two where a kustomize
binary is installed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

RENDERED_KEYS = frozenset({"apiVersion", "kind", "resources", "configMapGenerator"})
# Where a pod spec names a ConfigMap: volumes, projected volumes, env and envFrom.
CONFIG_MAP_REFERENCES = frozenset({"configMap", "configMapRef", "configMapKeyRef"})
# kustomize's hash suffix: the sha256's first ten hex digits, these five swapped for letters
# (kubectl's own hash encoding, which avoids suffixes that read as words or numbers).
SUFFIX_LETTERS = str.maketrans("013ae", "ghkmt")


def render_base(base: Path) -> list[dict[str, Any]]:
    """The documents `kubectl kustomize base` prints, in the order the kustomization lists them."""
    kustomization = yaml.safe_load((base / "kustomization.yaml").read_text())
    unknown = set(kustomization) - RENDERED_KEYS
    if unknown:
        raise ValueError(f"{base}/kustomization.yaml: the test renderer does not do {sorted(unknown)}")
    documents = [doc for name in kustomization.get("resources", []) for doc in load_documents(base / name)]
    renamed: dict[str, str] = {}
    for generator in kustomization.get("configMapGenerator", []):
        config_map = generate_config_map(base, generator)
        renamed[generator["name"]] = config_map["metadata"]["name"]
        documents.append(config_map)
    for document in documents:
        template = document.get("spec", {}).get("template", {})
        rename_config_maps(template.get("spec", {}), renamed)
    return documents


def load_documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def generate_config_map(base: Path, generator: dict[str, Any]) -> dict[str, Any]:
    """A configMapGenerator entry's ConfigMap: a key per file (its name) and per literal (KEY=value)."""
    data: dict[str, str] = {}
    for file in generator.get("files", []):
        key, _, source = file.rpartition("=")  # `key=path` or just `path`
        data[key or Path(source).name] = (base / source).read_text()
    for literal in generator.get("literals", []):
        key, _, value = literal.partition("=")
        data[key] = value
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{generator['name']}-{config_map_hash(data)}"},
        "data": data,
    }


def config_map_hash(data: dict[str, str]) -> str:
    """kustomize's suffix for a ConfigMap of `data` (api/hasher: the name it hashes is empty)."""
    encoded = json.dumps({"data": data, "kind": "ConfigMap", "name": ""}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # Go's json.Marshal escapes these three for HTML, and kustomize hashes its bytes.
    encoded = encoded.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return hashlib.sha256(encoded.encode()).hexdigest()[:10].translate(SUFFIX_LETTERS)


def rename_config_maps(node: Any, renamed: dict[str, str]) -> None:
    """Point every ConfigMap reference under `node` at the generated name, in place."""
    for key, value in walk_mappings(node):
        if key in CONFIG_MAP_REFERENCES and value.get("name") in renamed:
            value["name"] = renamed[value["name"]]


def walk_mappings(node: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """(key, mapping) for every mapping held under a key, at any depth below `node`."""
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, dict):
                yield key, value
            yield from walk_mappings(value)
    elif isinstance(node, list):
        for item in node:
            yield from walk_mappings(item)
