"""The DynamicScorer CRD, the hub's field map and the agent's wire models must describe the same fields."""

from __future__ import annotations

import re
import typing
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from dynamic_scoring.addon.registry import models
from dynamic_scoring.addon.registry.effective import resolve
from dynamic_scoring.addon.registry.fieldmap import HUB_ONLY, SUMMARY_SOURCES
from dynamic_scoring.addon.registry.models import parse_scorer
from dynamic_scoring.addon.registry.spellings import canonical
from dynamic_scoring.contract.wire import (
    MAX_HORIZON_SECONDS,
    EndpointAuth,
    OtelSpec,
    ScoreNormalization,
    ScorerConfig,
    ScorerSummary,
    SecretKeyRef,
    SourceSpec,
)
from tests.unit.addon.registry.crdutil import REPO, apply_defaults, crd_schema, leaf_paths

SPEC = crd_schema("dynamicscorers")["properties"]["spec"]
SPEC_PATHS = dict(leaf_paths(SPEC))


def summary_keys() -> set[str]:
    return {f.alias or name for name, f in ScorerSummary.model_fields.items()}


def test_every_summary_field_has_a_crd_source_and_every_source_exists() -> None:
    assert set(SUMMARY_SOURCES) == summary_keys()
    for key, paths in SUMMARY_SOURCES.items():
        for path in paths:
            assert path in SPEC_PATHS, f"{key}: {path} is not in the CRD"


def _covered(path: str) -> bool:
    mapped = [p for paths in SUMMARY_SOURCES.values() for p in paths]
    for p in mapped:
        if path == p or path.startswith(p + ".") or p.startswith(path + "."):
            return True
    return any(path == h or path.startswith(h + ".") for h in HUB_ONLY)


def test_every_crd_spec_field_reaches_the_summary_or_is_documented_hub_only() -> None:
    uncovered = [p for p in SPEC_PATHS if not _covered(p)]
    assert uncovered == []


def test_hub_only_fields_exist_in_the_crd_and_are_documented() -> None:
    doc = (REPO / "docs" / "scorer-registry.md").read_text()
    for path in HUB_ONLY:
        assert path in SPEC_PATHS, path
        assert f"`{path.split('.')[-1]}`" in doc, f"docs/scorer-registry.md does not mention {path}"


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in schema:
        resolved: dict[str, Any] = defs[schema["$ref"].split("/")[-1]]
        return resolved
    if "anyOf" in schema:  # Optional[X]
        (inner,) = [s for s in schema["anyOf"] if s.get("type") != "null"]
        return _resolve(inner, defs)
    return schema


def _same_shape(crd: dict[str, Any], wire: dict[str, Any], defs: dict[str, Any], where: str) -> None:
    wire = _resolve(wire, defs)
    kind = wire.get("type")
    if kind == "integer":
        assert crd["type"] in ("integer", "number"), where
        return
    assert crd["type"] == kind, f"{where}: CRD {crd['type']} vs wire {kind}"
    if kind == "object":
        crd_props = set(crd.get("properties", {})) - {"tokenSecretRef"}
        if crd.get("x-kubernetes-preserve-unknown-fields"):
            # the apiserver keeps keys it does not list here (scoring.params' formats and the
            # scorer's own keys): the CRD's listed ones must still be the wire's
            assert crd_props <= set(wire["properties"]), where
        else:
            assert crd_props == set(wire["properties"]), where
        assert set(crd.get("required", [])) == set(wire.get("required", [])), f"{where}: required"
        for name in crd_props:
            _same_shape(crd["properties"][name], wire["properties"][name], defs, f"{where}.{name}")
    elif kind == "array":
        _same_shape(crd["items"], wire["items"], defs, f"{where}[]")


@pytest.mark.parametrize(
    ("model", "path"),
    [
        (EndpointAuth, "source.auth"),
        (EndpointAuth, "scoring.auth"),
        (EndpointAuth, "sources.auth"),
        (OtelSpec, "sources.otel"),
        (ScoreNormalization, "scoreNormalization"),
    ],
)
def test_extension_objects_have_the_wire_models_shape(model: type[BaseModel], path: str) -> None:
    schema = model.model_json_schema(by_alias=True)
    _same_shape(SPEC_PATHS[path], schema, schema.get("$defs", {}), path)


@pytest.mark.parametrize(
    ("path", "literal"),
    [
        ("configSyncMode", models.SyncMode),
        ("location", models.Location),
        ("scoreDestination", models.Destination),
        ("source.type", models.SourceType),
    ],
)
def test_crd_enums_are_the_models_values_plus_accepted_spellings(path: str, literal: Any) -> None:
    allowed = set(typing.get_args(literal))
    crd_enum = set(SPEC_PATHS[path]["enum"])
    assert allowed <= crd_enum
    for spelling in crd_enum:
        assert canonical(path, spelling) in allowed, spelling


def test_crd_defaults_equal_the_models_defaults() -> None:
    spec = models.DynamicScorerSpec.model_validate({"source": {}})
    assert spec.source is not None
    for path, value in [
        ("configSyncMode", spec.config_sync_mode),
        ("location", spec.location),
        ("scoreDestination", spec.score_destination),
        ("scoreDimensionFormat", spec.score_dimension_format),
        ("source.type", spec.source.type),
    ]:
        assert SPEC_PATHS[path]["default"] == value, path


FULL_SPEC: dict[str, Any] = {
    "configSyncMode": "None",
    "location": "External",
    "scoreDestination": "None",
    "scoreDimensionFormat": "${node}",
    "source": {
        "type": "Prometheus",
        "host": "http://prom:9090",
        "path": "/api/v1/query_range",
        "params": {"queries": ["up", "down"], "range": 600, "step": 30},
        "auth": {
            "tokenSecretRef": {"name": "prom", "key": "token"},
            "headers": [{"name": "X-Scope-OrgID", "value": "team-a"}],
        },
    },
    "scoring": {
        "host": "https://scorer:8443",
        "path": "/v2/score",
        "params": {"name": "my_score", "interval": 45, "model": "linear", "horizon": 600},
        "auth": {
            "tokenSecretRef": {"name": "scorer", "key": "token"},
            "caSecretRef": {"name": "ca", "key": "ca.crt"},
        },
    },
    "scoreNormalization": {"min": 0, "max": 10},
    "validForSeconds": 300,
    "timeoutSeconds": 2.5,
    "maxScoreBytes": 2_000_000,
    "missingData": {"score": -100},
    "scoreDimensionFormats": ["${scoreName}", "${node}"],
    "stabilization": {"tolerance": 3, "riseWindowSeconds": 300, "fallWindowSeconds": 30},
    "scoreDimensionLabels": {"node": "instance"},
}


def test_a_spec_with_every_field_set_fills_every_summary_field() -> None:
    obj = {
        "metadata": {"name": "full", "namespace": "hub", "generation": 1},
        "spec": apply_defaults(SPEC, FULL_SPEC),
    }
    scorer = parse_scorer(obj)
    assert isinstance(scorer, models.DynamicScorer)
    summary = resolve(scorer).summary
    assert summary is not None
    # sourceQuery and sourceQueries exclude each other (CEL rule), so check the query on its own below.
    empty = [
        key
        for key, value in summary.model_dump(mode="json").items()
        if value in ("", 0, None) and key != "sourceQuery"
    ]
    assert empty == []
    # spec.source and spec.sources exclude each other (CEL rule): sources are checked on their own below.
    # masked comes from the DynamicScoringConfig (maskPolicy: Score), never from a DynamicScorer.
    assert set(summary.model_dump(mode="json")) == summary_keys() - {"sources", "onSourceError", "masked"}
    single = dict(
        FULL_SPEC, source=dict(FULL_SPEC["source"], params={"query": "up", "range": 600, "step": 30})
    )
    scorer = parse_scorer({"metadata": {"name": "q", "namespace": "hub"}, "spec": single})
    assert isinstance(scorer, models.DynamicScorer)
    summary = resolve(scorer).summary
    assert summary is not None and summary.source_query == "up"
    several = {k: v for k, v in FULL_SPEC.items() if k != "source"}
    several["onSourceError"] = "ScoreWithAvailable"
    several["sources"] = [
        {
            "name": "a",
            "host": "http://prom:9090",
            "queries": ["up"],
            "auth": FULL_SPEC["source"]["auth"],
            "otel": {"selectors": [{"metric": "m"}]},  # read only for type OpenTelemetry, but carried
        }
    ]
    scorer = parse_scorer(
        {"metadata": {"name": "s", "namespace": "hub"}, "spec": apply_defaults(SPEC, several)}
    )
    assert isinstance(scorer, models.DynamicScorer)
    summary = resolve(scorer).summary
    assert summary is not None and summary.sources and summary.on_source_error == "ScoreWithAvailable"
    (entry,) = summary.model_dump(mode="json")["sources"]
    assert [k for k, v in entry.items() if v in ("", 0, None)] == []
    assert set(entry) == {f.alias or n for n, f in SourceSpec.model_fields.items()}


@pytest.mark.parametrize("plural", ["dynamicscorers", "dynamicscoringconfigs"])
def test_crd_files_use_no_yaml_anchors(plural: str) -> None:
    # kustomize's kyaml and some CRD tooling mishandle anchors; the files must be plain YAML.
    events = yaml.parse((REPO / "manifests" / "crds" / f"{plural}.yaml").read_text())
    assert not [e for e in events if getattr(e, "anchor", None)]


def test_status_last_synced_config_has_the_config_documents_shape() -> None:
    # the hub stores ScorerConfig.model_dump() there; a key missing from the CRD would be pruned silently
    status = crd_schema("dynamicscorers")["properties"]["status"]["properties"]
    schema = ScorerConfig.model_json_schema(by_alias=True)
    _same_shape(status["lastSyncedConfig"], schema, schema.get("$defs", {}), "status.lastSyncedConfig")


def _wire_maximum(key: str) -> float | None:
    prop = ScorerSummary.model_json_schema(by_alias=True)["properties"][key]
    for option in [prop, *prop.get("anyOf", [])]:
        if "maximum" in option:
            return float(option["maximum"])
    return None


@pytest.mark.parametrize(
    "key",
    ["sourceRange", "sourceStep", "scoringInterval", "validForSeconds", "timeoutSeconds", "maxScoreBytes"],
)
def test_crd_maximums_equal_the_wire_boundary(key: str) -> None:
    # a value the CRD admits but the summary refuses would be accepted by kubectl and then fail
    # silently on the hub; every numeric source path must carry the wire model's maximum exactly
    limit = _wire_maximum(key)
    assert limit is not None, f"{key} has no maximum on the wire"
    for path in SUMMARY_SOURCES[key]:
        assert float(SPEC_PATHS[path].get("maximum", "inf")) == limit, path


def _secret_ref_paths() -> list[str]:
    paths = []
    for path in SPEC_PATHS:
        parts = path.split(".")
        ref = len(parts) >= 2 and (parts[-2].endswith("SecretRef") or parts[-2] == "secretKeyRef")
        if ref and parts[-1] in ("name", "key"):
            paths.append(path)
    assert len(paths) >= 20, paths
    return paths


@pytest.mark.parametrize("path", _secret_ref_paths())
def test_crd_secret_refs_refuse_what_the_wire_refuses(path: str) -> None:
    schema = SPEC_PATHS[path]
    pattern = re.compile(schema["pattern"])
    field = path.rsplit(".", 1)[-1]
    for value in ["ok-name", "a.b", "Upper", "under_score", "-lead", "trail-", "sp ace", "a..b", "x" * 253]:
        admitted = bool(pattern.search(value)) and len(value) <= schema["maxLength"]
        ref = {"name": "s", "key": "k", field: value}
        try:
            SecretKeyRef.model_validate(ref)
            wire_ok = True
        except ValueError:
            wire_ok = False
        assert admitted == wire_ok, f"{path}={value!r}: CRD admits {admitted}, wire admits {wire_ok}"


def test_params_horizon_is_bounded_alike_in_the_crd_and_the_hub_model() -> None:
    """A horizon multiplies a forecast's work, and the scorer library refuses more than 30 days."""
    horizon = SPEC_PATHS["scoring.params.horizon"]
    assert (horizon.get("minimum"), horizon.get("maximum")) == (0, MAX_HORIZON_SECONDS)

    def with_horizon(value: int) -> object:
        spec = dict(FULL_SPEC, scoring=dict(FULL_SPEC["scoring"], params={"name": "s", "horizon": value}))
        return parse_scorer({"metadata": {"name": "h", "namespace": "hub"}, "spec": spec})

    assert isinstance(with_horizon(MAX_HORIZON_SECONDS), models.DynamicScorer)
    for bad in (MAX_HORIZON_SECONDS + 1, 10**10, -1):
        problem = with_horizon(bad)
        assert isinstance(problem, models.SpecProblem) and "horizon" in str(problem), bad
