"""The spellings that upstream's documents and samples use but upstream's own CRD rejected or pruned.

Our CRD admits them so that every upstream example applies unchanged; the hub rewrites them to the one
canonical spelling before anything else reads the spec.  Each rewrite is reported as a note so that
``kubectl describe`` can tell the user which spelling was understood how.

| written | understood as | where it comes from |
|---|---|---|
| ``configSyncMode: full`` / ``none`` | ``Full`` / ``None`` | enhancement proposal |
| ``source.type: prometheus`` / ``none`` | ``Prometheus`` / ``None`` | simple-prediction sample |
| ``location: internal`` / ``external`` | ``Internal`` / ``External`` | (same casing rule) |
| ``scoreDestination: addonPlacementScore`` | ``AddOnPlacementScore`` | enhancement proposal |
| ``source.endpoint.{host,path}`` | ``source.{host,path}`` | the blog's cpu-predictor |
| ``source.query.{query,range,step}`` | ``source.params.{…}`` | the blog's cpu-predictor |
| ``scoring.endpoint.{host,path}`` | ``scoring.{host,path}`` | the blog's cpu-predictor |
| DynamicScoringConfig ``mask:`` | merged into ``masks:`` | enhancement proposal |
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

_CANONICAL: dict[str, dict[str, str]] = {
    "configSyncMode": {"full": "Full", "none": "None"},
    "location": {"internal": "Internal", "external": "External"},
    "scoreDestination": {"addonplacementscore": "AddOnPlacementScore", "none": "None"},
    "source.type": {"prometheus": "Prometheus", "none": "None"},
}


def canonical(field: str, value: str) -> str | None:
    """The canonical spelling of an enum value of ``field`` (case-insensitive), or None if unknown."""
    return _CANONICAL[field].get(value.lower())


def _enum(obj: dict[str, Any], key: str, field: str, path: str, notes: list[str]) -> None:
    value = obj.get(key)
    if not isinstance(value, str):
        return
    fixed = canonical(field, value)
    if fixed is not None and fixed != value:
        obj[key] = fixed
        notes.append(f"{path}: {value!r} is read as {fixed!r}")


def _lift(obj: dict[str, Any], alias: str, target: str | None, path: str, notes: list[str]) -> None:
    """Move the blog's nested object ``alias`` into ``target`` (or into ``obj`` itself when None)."""
    nested = obj.pop(alias, None)
    if not isinstance(nested, Mapping):
        return
    into: dict[str, Any]
    if target is None:
        into = obj
    else:
        existing = obj.get(target)
        into = dict(existing) if isinstance(existing, Mapping) else {}
        obj[target] = into
    for key, value in nested.items():
        into.setdefault(key, value)
    where = f"{path}.{target}" if target else path
    notes.append(f"{path}.{alias}: read as {where}")


def normalise_scorer_spec(spec: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Rewrite a DynamicScorer ``spec`` to canonical spellings; return it with notes on each rewrite.

    The input is not modified.  Values that are not an accepted spelling are left as they are, so
    that model validation names them.
    """
    out = copy.deepcopy(dict(spec))
    notes: list[str] = []
    _enum(out, "configSyncMode", "configSyncMode", "spec.configSyncMode", notes)
    _enum(out, "location", "location", "spec.location", notes)
    _enum(out, "scoreDestination", "scoreDestination", "spec.scoreDestination", notes)
    source = out.get("source")
    if isinstance(source, Mapping):
        source = out["source"] = dict(source)
        _enum(source, "type", "source.type", "spec.source.type", notes)
        _lift(source, "endpoint", None, "spec.source", notes)
        _lift(source, "query", "params", "spec.source", notes)
    scoring = out.get("scoring")
    if isinstance(scoring, Mapping):
        scoring = out["scoring"] = dict(scoring)
        _lift(scoring, "endpoint", None, "spec.scoring", notes)
    return out, notes


def normalise_config_spec(spec: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Merge the design document's ``mask:`` into ``masks:`` (duplicates kept once, first spelling first)."""
    out = copy.deepcopy(dict(spec))
    notes: list[str] = []
    singular = out.pop("mask", None)
    if isinstance(singular, list) and singular:
        merged = list(out.get("masks") or [])
        for item in singular:
            if item not in merged:
                merged.append(item)
        out["masks"] = merged
        notes.append("spec.mask: read as spec.masks")
    return out, notes


__all__ = ["canonical", "normalise_config_spec", "normalise_scorer_spec"]
