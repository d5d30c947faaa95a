"""Hub side of scorer parameters, the missing-data score and several dimension formats."""

from __future__ import annotations

from typing import Any

from dynamic_scoring.addon.registry.effective import resolve
from dynamic_scoring.addon.registry.models import DynamicScorer, parse_scorer
from dynamic_scoring.contract.wire import MAX_SCORING_PARAMS_BYTES
from tests.unit.addon.registry.crdutil import apply_defaults, crd_schema

SCHEMA = crd_schema("dynamicscorers")["properties"]["spec"]
PROM = {"type": "Prometheus", "host": "http://prom:9090", "params": {"query": "up", "range": 600, "step": 60}}
# The blog's cpu-predictor example.
BLOG_SCORING = {
    "host": "http://predictor:8000",
    "params": {"name": "cpu_predict", "interval": 60, "model": "linear_regression", "horizon": 3600},
}


def scorer(spec: dict[str, Any], synced: dict[str, Any] | None = None) -> DynamicScorer:
    obj: dict[str, Any] = {
        "metadata": {"name": "s", "namespace": "hub", "generation": 1},
        "spec": apply_defaults(SCHEMA, spec),
    }
    if synced is not None:
        obj["status"] = {"healthStatus": "Active", "lastSyncedConfig": synced}
    parsed = parse_scorer(obj)
    assert isinstance(parsed, DynamicScorer), parsed
    return parsed


def test_the_blogs_model_and_horizon_become_scoring_params_and_name_interval_do_not() -> None:
    res = resolve(scorer({"source": PROM, "scoring": BLOG_SCORING}))
    assert res.summary is not None, res.message
    assert res.summary.scoring_params == {"model": "linear_regression", "horizon": 3600}
    assert (res.summary.score_name, res.summary.scoring_interval) == ("cpu_predict", 60)
    assert not any("not sent" in n for n in res.notes)


def test_any_other_scoring_param_is_kept_as_written() -> None:
    params = {"name": "x", "quantile": 0.9, "weights": {"cpu": 2, "mem": 1}, "tags": ["a", "b"]}
    res = resolve(scorer({"source": PROM, "scoring": {"host": "http://s:1", "params": params}}))
    assert res.summary is not None and res.summary.scoring_params == {
        "quantile": 0.9,
        "weights": {"cpu": 2, "mem": 1},
        "tags": ["a", "b"],
    }


def test_without_params_the_summary_carries_none() -> None:
    res = resolve(scorer({"source": PROM, "scoring": {"host": "http://s:1", "params": {"name": "x"}}}))
    assert res.summary is not None
    assert "scoringParams" not in res.summary.to_wire()


def test_full_mode_the_synced_config_wins_key_by_key() -> None:
    synced = {
        "scoring": {"host": "http://s:1", "params": {"name": "cpu", "interval": 30, "horizon": 600}},
        "source": PROM,
    }
    spec = {"configURL": "http://s:1/config", "configSyncMode": "Full", "scoring": BLOG_SCORING}
    res = resolve(scorer(spec, synced))
    assert res.summary is not None, res.message
    # horizon from /config, model only in the spec: kept.
    assert res.summary.scoring_params == {"model": "linear_regression", "horizon": 600}


def test_none_mode_ignores_a_stale_synced_document() -> None:
    synced = {"scoring": {"params": {"horizon": 600, "secret_sauce": 1}}}
    res = resolve(scorer({"source": PROM, "scoring": BLOG_SCORING}, synced))
    assert res.summary is not None
    assert res.summary.scoring_params == {"model": "linear_regression", "horizon": 3600}


def test_oversized_params_are_a_field_problem_not_a_summary() -> None:
    params = {"name": "x", "blob": "y" * MAX_SCORING_PARAMS_BYTES}
    res = resolve(scorer({"source": PROM, "scoring": {"host": "http://s:1", "params": params}}))
    assert res.summary is None
    assert [p.field for p in res.problems] == ["spec.scoring.params"]
    assert str(MAX_SCORING_PARAMS_BYTES) in res.message


def test_missing_data_score_travels_in_the_summary() -> None:
    res = resolve(scorer({"source": PROM, "scoring": {"host": "http://s:1"}, "missingData": {"score": -100}}))
    assert res.summary is not None and res.summary.missing_data_score == -100
    assert res.summary.masked is None  # only the distribution marks a pair masked


def test_a_format_list_travels_whole_and_upstream_gets_its_first_entry() -> None:
    spec = {
        "source": PROM,
        "scoring": {"host": "http://s:1"},
        "scoreDimensionFormats": ["${cluster}", "${node};${pod}", "${nope}"],
    }
    res = resolve(scorer(spec))
    assert res.summary is not None
    assert res.summary.score_dimension_formats == ["${cluster}", "${node};${pod}", "${nope}"]
    assert res.summary.score_dimension_format == "${cluster}"
    assert any(n.startswith("spec.scoreDimensionFormats[2]: ${nope}") for n in res.notes), res.notes
