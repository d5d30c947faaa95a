"""``provenance`` names, for every field, the origin whose value ``resolve`` really used."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.addon.registry.effective import resolve
from dynamic_scoring.addon.registry.provenance import provenance
from tests.unit.addon.registry.test_effective import ok, scorer

# Every origin gets a value of its own, so the resolved value tells where it came from.
VALUES: dict[str, dict[str, Any]] = {
    "scoreName": {"spec": "spec_name", "/config": "synced_name", "metadata.name": "s"},
    "scoringInterval": {"spec": 45, "/config": 15, "default": 30},
    "sourceEndpoint": {
        "spec": "http://spec-prom:9090/api/v1/query_range",
        "/config": "http://synced-prom:9090/p",
    },
    "sourceQuery": {"spec": "spec_q", "/config": "synced_q"},
    "sourceRange": {"spec": 7200, "/config": 1800, "default": 3600},
    "sourceStep": {"spec": 20, "/config": 30, "default": 60},
    "scoringEndpoint": {
        "spec": "http://spec-scorer:1/scoring",
        "/config": "http://synced-scorer:1/scoring",
        "spec.configURL": "http://cfg-scorer:2/scoring",
    },
}

FIELDS = ("name", "interval", "host", "query", "range", "step", "scoring_host")


@given(
    full=st.booleans(),
    in_spec=st.fixed_dictionaries({f: st.booleans() for f in FIELDS}),
    in_synced=st.fixed_dictionaries({f: st.booleans() for f in FIELDS}),
    config_url=st.booleans(),
)
def test_each_field_has_the_value_of_the_origin_it_is_attributed_to(
    full: bool, in_spec: dict[str, bool], in_synced: dict[str, bool], config_url: bool
) -> None:
    # A Prometheus source needs a host and a query, and scoring needs a host, from somewhere.
    in_spec["host"] = in_spec["host"] or not (full and in_synced["host"])
    in_spec["query"] = in_spec["query"] or not (full and in_synced["query"])
    if not config_url:
        in_spec["scoring_host"] = in_spec["scoring_host"] or not (full and in_synced["scoring_host"])
    params: dict[str, Any] = {}
    if in_spec["query"]:
        params["query"] = "spec_q"
    if in_spec["range"]:
        params["range"] = 7200
    if in_spec["step"]:
        params["step"] = 20
    source: dict[str, Any] = {"type": "Prometheus", "params": params}
    if in_spec["host"]:
        source["host"] = "http://spec-prom:9090"
    scoring: dict[str, Any] = {"params": {}}
    if in_spec["name"]:
        scoring["params"]["name"] = "spec_name"
    if in_spec["interval"]:
        scoring["params"]["interval"] = 45
    if in_spec["scoring_host"]:
        scoring["host"] = "http://spec-scorer:1"
    spec: dict[str, Any] = {
        "configSyncMode": "Full" if full else "None",
        "source": source,
        "scoring": scoring,
    }
    if config_url:
        spec["configURL"] = "http://cfg-scorer:2/config"
    synced = {
        "source": {
            "type": "Prometheus",
            "host": "http://synced-prom:9090" if in_synced["host"] else "",
            "path": "/p" if in_synced["host"] else "",
            "params": {
                "query": "synced_q" if in_synced["query"] else "",
                "range": 1800 if in_synced["range"] else 0,
                "step": 30 if in_synced["step"] else 0,
            },
        },
        "scoring": {
            "host": "http://synced-scorer:1" if in_synced["scoring_host"] else "",
            "params": {
                "name": "synced_name" if in_synced["name"] else "",
                "interval": 15 if in_synced["interval"] else 0,
            },
        },
    }
    obj = scorer(spec, synced)
    summary = ok(resolve(obj)).model_dump(by_alias=True)
    origins = provenance(obj)
    for field, by_origin in VALUES.items():
        assert summary[field] == by_origin[origins[field]], (field, origins[field])


def test_the_sources_extension_owns_every_source_field() -> None:
    obj = scorer(
        {
            "sources": [
                {
                    "name": "a",
                    "type": "Prometheus",
                    "host": "http://p:9090",
                    "queries": ["up"],
                }
            ],
            "scoring": {"host": "http://s:1"},
        }
    )
    assert ok(resolve(obj)).sources[0].name == "a"
    origins = provenance(obj)
    assert {origins[f] for f in ("sourceType", "sourceEndpoint", "sourceQuery")} == {"spec.sources"}
