"""The config work's size budget: an oversized scorer is left out alone, the rest still fit."""

from __future__ import annotations

import json
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from addon.distribution.budget import (
    CONFIG_WORK_LIMIT,
    SUMMARY_LIMIT,
    configmap_size,
    embedded_size,
    fit,
    go_size,
    piece,
)
from addon.distribution.configmap import payloads, summaries_configmap
from addon.distribution.plan import ClusterInput, ScorerInput, plan
from addon.registry.effective import Resolution
from addon.registry.models import LabelSelector, Mask
from addon.registry.status import valid_condition
from dynamic_scoring.wire import ScorerSummary, dump_summaries

NS = "open-cluster-management-agent-addon"
CLUSTERS = [ClusterInput("c1", {"big": "yes"}, NS), ClusterInput("c2", {}, NS), ClusterInput("c3", {}, "")]
QUERY = 'sum by (pod) (rate(container_cpu_usage_seconds_total{namespace="x"}[5m]))'


def summary(name: str, *, queries: int = 0, query_bytes: int = 0, **kw: object) -> ScorerSummary:
    """A Prometheus summary with `queries` queries of about `query_bytes` bytes each."""
    extra: dict[str, object] = {}
    if queries:
        extra["source_queries"] = [(QUERY + " ") * (query_bytes // (len(QUERY) + 1)) for _ in range(queries)]
    fields: dict[str, object] = {
        "name": name,
        "score_name": f"{name}-score",
        "source_type": "Prometheus",
        "source_endpoint": "http://prometheus:9090/api/v1/query_range",
        "source_query": QUERY,
        "source_range": 300,
        "source_step": 30,
        "scoring_endpoint": "http://s:1/scoring",
        "scoring_interval": 30,
    }
    return ScorerSummary(**{**fields, **extra, **kw})  # type: ignore[arg-type]


def scorer(name: str, **kw: object) -> ScorerInput:
    selector = kw.pop("selector", None)
    return ScorerInput(name, "2026-01-01T00:00:00Z", summary(name, **kw), True, selector)  # type: ignore[arg-type]


def names(result: object, cluster: str) -> list[str]:
    return [s.name for s in result.clusters[cluster]]  # type: ignore[attr-defined]


def work_bytes(configmap: dict[str, object]) -> int:
    """The ConfigMap manifest as the apiserver (Go's encoder) writes it into the work."""
    return go_size(json.dumps(configmap, separators=(",", ":"), ensure_ascii=False))


def test_go_writes_html_characters_and_line_separators_as_six_bytes() -> None:
    assert go_size(json.dumps("a>b", ensure_ascii=False)) == len('"a\\u003eb"')
    assert go_size(json.dumps("<&>", ensure_ascii=False)) == 2 + 18
    assert go_size(json.dumps("x\u2028", ensure_ascii=False)) == 2 + 1 + 6
    assert go_size(json.dumps("é", ensure_ascii=False)) == 2 + 2  # other UTF-8 stays as it is


def test_a_comparison_in_promql_costs_what_go_makes_of_it() -> None:
    plain, compared = summary("a", source_query="up"), summary("a", source_query="u>")
    assert embedded_size(piece(compared)) - embedded_size(piece(plain)) == 5


def test_the_size_is_measured_as_the_work_measures_it() -> None:
    items = [summary("a"), summary("b", queries=2, query_bytes=3000)]
    payload = dump_summaries(items)
    configmap = summaries_configmap(NS, items, payload=payload)
    assert configmap_size(NS, [embedded_size(piece(s)) for s in items]) == work_bytes(configmap)
    assert configmap_size(NS, []) == work_bytes(summaries_configmap(NS, (), payload="[]"))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.text(max_size=200), max_size=5))
def test_escaping_is_counted_exactly_for_any_query_text(queries: list[str]) -> None:
    items = [summary(f"s{i}", source_query=q) for i, q in enumerate(queries)]
    configmap = summaries_configmap(NS, items, payload=dump_summaries(items))
    assert configmap_size(NS, [embedded_size(piece(s)) for s in items]) == work_bytes(configmap)


def test_nothing_changes_under_the_limits() -> None:
    result = plan([scorer("a"), scorer("b")], [], CLUSTERS)
    assert fit(result, CLUSTERS) is result


def test_a_scorer_too_large_on_its_own_goes_nowhere_and_the_others_everywhere() -> None:
    """The issue's case: 20 queries of 60 KB resolve into a 1.2 MB summary."""
    huge = scorer("huge", queries=20, query_bytes=60_000)
    result = fit(plan([scorer("a"), huge, scorer("z")], [], CLUSTERS), CLUSTERS)
    assert {c: names(result, c) for c in result.clusters} == {c.name: ["a", "z"] for c in CLUSTERS}
    outcome = result.scorers["huge"]
    assert (outcome.reason, outcome.clusters) == ("SummaryTooLarge", ())
    size = embedded_size(piece(huge.summary))  # type: ignore[arg-type]
    assert size > 1_200_000
    assert f"{size:,} bytes" in outcome.message and f"{SUMMARY_LIMIT:,}" in outcome.message
    assert result.scorers["a"].reason == "Distributed" and result.scorers["a"].clusters == ("c1", "c2", "c3")
    assert any(p.field == "DynamicScorer huge" for p in result.problems)
    for cluster in ("c1", "c2"):
        encoded = payloads(result)[cluster]
        assert work_bytes(summaries_configmap(NS, (), payload=encoded)) <= CONFIG_WORK_LIMIT


def test_too_many_large_scorers_lose_the_largest_first_and_only_where_they_do_not_fit() -> None:
    # five scorers of ~100 KB (each under the per-scorer limit) cannot share one work
    sizes = {"b1": 100_000, "b2": 101_000, "b3": 102_000, "b4": 103_000, "b5": 104_000}
    big = LabelSelector.model_validate({"matchLabels": {"big": "yes"}})
    scorers = [scorer(n, queries=1, query_bytes=b) for n, b in sizes.items()]
    scorers.append(scorer("small"))
    scorers.append(scorer("only-big", queries=1, query_bytes=100_000, selector=big))
    result = fit(plan(scorers, [], CLUSTERS), CLUSTERS)
    # c1 has six large summaries: the three largest go; c2 has five: the two largest go
    assert set(names(result, "c1")) == {"b1", "b2", "only-big", "small"}
    assert set(names(result, "c2")) == {"b1", "b2", "b3", "small"}
    # c3 has no install namespace, so no work: nothing is measured or dropped there
    assert set(names(result, "c3")) == {*sizes, "small"}
    assert result.scorers["b5"].reason == "WorkTooLarge"
    assert result.scorers["b5"].clusters == ("c3",)
    assert result.scorers["b3"].clusters == ("c2", "c3")
    assert "left out on 1 of the 3 cluster(s)" in result.scorers["b3"].message
    assert f"{CONFIG_WORK_LIMIT:,} bytes" in result.scorers["b3"].message
    assert result.scorers["small"].reason == "Distributed"
    for cluster in ("c1", "c2"):
        encoded = payloads(result)[cluster]
        assert work_bytes(summaries_configmap(NS, (), payload=encoded)) <= CONFIG_WORK_LIMIT


def test_the_same_registry_always_trims_the_same_way() -> None:
    scorers = [scorer(f"s{i}", queries=1, query_bytes=90_000) for i in range(6)] + [scorer("small")]
    first = fit(plan(scorers, [], CLUSTERS), CLUSTERS)
    for seed in range(5):
        shuffled = scorers[:]
        random.Random(seed).shuffle(shuffled)
        again = fit(plan(shuffled, [], list(reversed(CLUSTERS))), CLUSTERS)
        assert again == first
        assert payloads(again) == payloads(first)


def test_equal_sizes_are_broken_by_name() -> None:
    scorers = [scorer(n, queries=1, query_bytes=150_000 // 2) for n in ("x", "y", "w", "v", "u", "t")]
    result = fit(plan(scorers, [], CLUSTERS[:1]), CLUSTERS[:1])
    kept = names(result, "c1")
    dropped = sorted({"x", "y", "w", "v", "u", "t"} - set(kept))
    assert dropped and dropped == ["t", "u", "v", "w", "x", "y"][: len(dropped)]


def test_a_masked_copy_is_encoded_as_itself() -> None:
    """`payloads` keyed its pieces by scorer name, so a masked copy leaked to unmasked clusters."""
    s = ScorerInput("a", "t", summary("a", missing_data_score=5), True)
    mask = Mask.model_validate({"clusterName": "c1", "scoreName": "a-score"})
    result = plan([s], [mask], CLUSTERS[:2], mask_policy="Score")
    encoded = payloads(result)
    assert encoded == {c: dump_summaries(items) for c, items in result.clusters.items()}
    assert '"masked":true' in encoded["c1"] and '"masked"' not in encoded["c2"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=4000), min_size=0, max_size=12))
def test_what_is_kept_always_fits_and_only_the_largest_are_left_out(sizes: list[int]) -> None:
    scorers = [
        ScorerInput(f"s{i:02d}", "t", summary(f"s{i:02d}", source_query="q" * n), True)
        for i, n in enumerate(sizes)
    ]
    cluster = [ClusterInput("c1", {}, NS)]
    result = fit(plan(scorers, [], cluster), cluster, summary_limit=3_000, work_limit=6_000)
    encoded = payloads(result)["c1"]
    assert work_bytes(summaries_configmap(NS, (), payload=encoded)) <= 6_000
    cost = {s.name: embedded_size(piece(s.summary)) for s in scorers}  # type: ignore[arg-type]
    kept = set(names(result, "c1"))
    fitting = {n for n, c in cost.items() if c <= 3_000}
    left_out = fitting - kept
    assert all(cost[a] >= cost[b] for a in left_out for b in kept)
    for name in cost.keys() - fitting:
        assert result.scorers[name].reason == "SummaryTooLarge"
    for name in left_out:
        assert result.scorers[name].reason == "WorkTooLarge"


def test_the_scorer_controller_marks_the_same_summary_invalid() -> None:
    """`Valid` and the distribution measure alike: one says invalid exactly where the other leaves out."""
    huge = summary("huge", queries=20, query_bytes=60_000)
    valid = valid_condition(Resolution(huge))
    assert (valid.status, valid.reason) == ("False", "SummaryTooLarge")
    assert f"{embedded_size(piece(huge)):,} bytes" in valid.message and f"{SUMMARY_LIMIT:,}" in valid.message
    assert valid_condition(Resolution(summary("small"))).reason == "Resolved"
