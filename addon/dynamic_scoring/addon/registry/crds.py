"""The project's CustomResourceDefinitions as files: where they are, and their OpenAPI schemas.

Why.  Offline tools (``dynamic-scoring scorer lint``) check a manifest against the schema the apiserver
will apply, so that what ``kubectl apply`` would refuse is caught before a cluster is involved.  The
schema is read from the same files the chart and kustomize install, not from a copy.  A wheel carries
``manifests/crds/`` as ``dynamic_scoring/addon/crds`` (``addon/pyproject.toml``'s force-include); a source
checkout reads the repository's directory, so an edit shows without a rebuild.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml


def crds_dir() -> Path:
    """Where the CRD files are: inside the package in a wheel, ``manifests/crds`` in a checkout."""
    packaged = Path(__file__).resolve().parents[1] / "crds"
    return packaged if packaged.is_dir() else Path(__file__).resolve().parents[4] / "manifests" / "crds"


@cache
def open_api_schema(plural: str) -> dict[str, Any]:
    """The ``openAPIV3Schema`` of the served version of the CRD ``<plural>.yaml`` (one version each)."""
    path = crds_dir() / f"{plural}.yaml"
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    (version,) = doc["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


__all__ = ["crds_dir", "open_api_schema"]
