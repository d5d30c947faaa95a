"""``Resolution.origins``: the origin ``resolve`` notes for each field is the one whose value it used.

``dynamic-scoring explain`` prints these origins next to the values, so a wrong origin would send a
person debugging a score to the wrong place (the spec instead of the scorer's ``/config``).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.addon.registry.effective import resolve
from tests.unit.addon.registry.test_effective import PROM, ok, scorer

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
    res = resolve(scorer(spec, synced))
    summary = ok(res).model_dump(by_alias=True)
    for field, by_origin in VALUES.items():
        assert summary[field] == by_origin[res.origins[field]], (field, res.origins[field])


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
    res = resolve(obj)
    assert ok(res).sources[0].name == "a"
    assert {res.origins[f] for f in ("sourceType", "sourceEndpoint", "sourceQuery")} == {"spec.sources"}


def test_the_fallbacks_are_named_by_what_supplied_them() -> None:
    res = resolve(scorer({"name": "blog", "configURL": "http://cfg:2/config"}))
    assert ok(res).score_name == "blog" and ok(res).scoring_endpoint == "http://cfg:2/scoring"
    assert res.origins["scoreName"] == "spec.name"
    assert res.origins["scoringEndpoint"] == "spec.configURL"
    assert res.origins["name"] == "metadata.name"
    # No query anywhere: the type defaults to None, and each source field says so.
    assert ok(res).source_type == "None"
    assert {res.origins[f] for f in ("sourceType", "sourceQuery", "sourceRange", "sourceStep")} == {"default"}


def test_only_fields_config_or_a_default_may_supply_have_an_origin() -> None:
    res = resolve(scorer({"source": PROM, "scoring": {"host": "http://s:1", "params": {"model": "m"}}}))
    assert ok(res).scoring_params == {"model": "m"}
    assert set(res.origins) == {
        "name",
        "scoreName",
        "scoringInterval",
        "sourceType",
        "sourceEndpoint",
        "sourceQuery",
        "sourceRange",
        "sourceStep",
        "scoringEndpoint",
        "scoreDimensionFormat",
    }


def test_a_spec_queries_list_is_the_query_origin_unless_config_publishes_a_query() -> None:
    spec = {
        "configSyncMode": "Full",
        "source": {"host": "http://prom:9090", "params": {"queries": ["a", "b"]}},
        "scoring": {"host": "http://s:1"},
    }
    res = resolve(scorer(spec, {"source": {"params": {"query": ""}}}))
    assert ok(res).source_queries == ["a", "b"] and res.origins["sourceQuery"] == "spec"
    res = resolve(scorer(spec, {"source": {"params": {"query": "synced"}}}))
    assert ok(res).source_queries is None and ok(res).source_query == "synced"
    assert res.origins["sourceQuery"] == "/config"


def test_no_summary_has_no_origins_and_origins_do_not_change_the_outcome() -> None:
    assert resolve(scorer({"source": {"type": "Prometheus"}})).origins == {}
    spec = {"configSyncMode": "Full", "scoring": {"host": "http://s:1", "params": {"interval": 15}}}
    from_spec = resolve(scorer(spec, {}))
    from_config = resolve(scorer(spec, {"scoring": {"params": {"interval": 15}}}))
    assert from_spec.origins["scoringInterval"] == "spec"
    assert from_config.origins["scoringInterval"] == "/config"
    assert from_spec == from_config  # the controller sees the same outcome
