"""Read the CRD files and apply their structural defaults the way the apiserver does on create."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[4]
CRDS = REPO / "manifests" / "crds"
SAMPLES = REPO / "samples" / "upstream"


def crd_schema(plural: str) -> dict[str, Any]:
    doc = yaml.safe_load((CRDS / f"{plural}.yaml").read_text())
    (version,) = doc["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def crd(plural: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((CRDS / f"{plural}.yaml").read_text())
    return doc


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    """Structural defaulting: a missing property with a ``default`` gets it, recursively."""
    value = copy.deepcopy(value)
    if isinstance(value, dict) and "properties" in schema:
        for name, sub in schema["properties"].items():
            if name not in value and "default" in sub:
                value[name] = copy.deepcopy(sub["default"])
            if name in value:
                value[name] = apply_defaults(sub, value[name])
    elif isinstance(value, list) and "items" in schema:
        value = [apply_defaults(schema["items"], v) for v in value]
    return value


def leaf_paths(schema: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every property path under ``schema`` (objects recurse; arrays of objects recurse into items)."""
    for name, sub in schema.get("properties", {}).items():
        path = f"{prefix}.{name}" if prefix else name
        yield path, sub
        if sub.get("type") == "object":
            yield from leaf_paths(sub, path)
        elif sub.get("type") == "array" and sub.get("items", {}).get("type") == "object":
            yield from leaf_paths(sub["items"], path)


def sample(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((SAMPLES / name).read_text())
    return doc


def stored(name: str, namespace: str = "hub") -> dict[str, Any]:
    """A sample as the apiserver would store it: defaults applied, metadata filled in."""
    obj = sample(name)
    plural = "dynamicscorers" if obj["kind"] == "DynamicScorer" else "dynamicscoringconfigs"
    obj = dict(apply_defaults(crd_schema(plural), obj))
    obj["metadata"].setdefault("namespace", namespace)
    obj["metadata"].setdefault("generation", 1)
    obj["metadata"].setdefault("creationTimestamp", "2026-01-01T00:00:00Z")
    return obj
