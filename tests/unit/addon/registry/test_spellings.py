"""Upstream's alternate spellings are read as the canonical ones, and said so."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.addon.registry.models import DynamicScoringConfig, parse_config
from dynamic_scoring.addon.registry.spellings import canonical, normalise_config_spec, normalise_scorer_spec


def test_enum_spellings_are_canonicalised_with_notes() -> None:
    spec = {
        "configSyncMode": "full",
        "location": "external",
        "scoreDestination": "addonPlacementScore",
        "source": {"type": "prometheus"},
    }
    out, notes = normalise_scorer_spec(spec)
    assert out["configSyncMode"] == "Full"
    assert out["location"] == "External"
    assert out["scoreDestination"] == "AddOnPlacementScore"
    assert out["source"]["type"] == "Prometheus"
    assert len(notes) == 4 and "spec.source.type: 'prometheus' is read as 'Prometheus'" in notes
    assert spec["source"] == {"type": "prometheus"}  # input untouched


def test_canonical_spellings_produce_no_notes() -> None:
    _, notes = normalise_scorer_spec({"configSyncMode": "None", "source": {"type": "None"}})
    assert notes == []


@given(st.sampled_from(["Full", "None"]), st.lists(st.booleans(), min_size=4, max_size=4))
def test_any_casing_of_a_sync_mode_is_understood(word: str, upper: list[bool]) -> None:
    cased = "".join(c.upper() if u else c.lower() for c, u in zip(word, upper, strict=False))
    assert canonical("configSyncMode", cased) == word


def test_unknown_values_are_left_for_validation_to_name() -> None:
    out, notes = normalise_scorer_spec({"configSyncMode": "sometimes"})
    assert out["configSyncMode"] == "sometimes" and notes == []


def test_blog_nested_objects_are_lifted() -> None:
    out, notes = normalise_scorer_spec(
        {
            "source": {
                "endpoint": {"host": "http://p:9090", "path": "/q"},
                "query": {"query": "up", "step": 5},
            },
            "scoring": {"endpoint": {"host": "http://s:1"}},
        }
    )
    assert out["source"] == {"host": "http://p:9090", "path": "/q", "params": {"query": "up", "step": 5}}
    assert out["scoring"] == {"host": "http://s:1"}
    assert len(notes) == 3


def test_singular_mask_is_merged_into_masks_once() -> None:
    a = {"clusterName": "c1", "scoreName": "s"}
    b = {"clusterName": "c2", "scoreName": "s"}
    out, notes = normalise_config_spec({"masks": [a], "mask": [a, b]})
    assert out == {"masks": [a, b]} and notes == ["spec.mask: read as spec.masks"]
    parsed = parse_config(
        {"metadata": {"name": "dynamic-scoring-config", "namespace": "n"}, "spec": {"mask": [b]}}
    )
    assert isinstance(parsed, DynamicScoringConfig)
    assert [(m.cluster_name, m.score_name) for m in parsed.spec.masks] == [("c2", "s")]
