"""The config work's size budget: an oversized scorer is left out alone, the rest still fit.

Where a cluster's summaries do not fit together, the newest scorers are left out, so that a
newcomer cannot evict an established scorer.
"""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dynamic_scoring.addon.distribution.budget import (
    CONFIG_WORK_LIMIT,
    SUMMARY_LIMIT,
    configmap_size,
    embedded_size,
    fit,
    go_size,
    piece,
    seniority,
)
from dynamic_scoring.addon.distribution.configmap import payloads, summaries_configmap
from dynamic_scoring.addon.distribution.plan import ClusterInput, Plan, ScorerInput, plan
from dynamic_scoring.addon.registry.effective import Resolution
from dynamic_scoring.addon.registry.models import LabelSelector, Mask
from dynamic_scoring.addon.registry.status import valid_condition
from dynamic_scoring.contract.wire import ScorerSummary, dump_summaries

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


def scorer(name: str, *, created: str = "2026-01-01T00:00:00Z", **kw: object) -> ScorerInput:
    selector = kw.pop("selector", None)
    return ScorerInput(name, created, summary(name, **kw), True, selector)  # type: ignore[arg-type]


def day(n: int) -> str:
    """A creationTimestamp as the apiserver writes it, ``n`` days into 2026 (seniority order)."""
    return f"2026-01-{n:02d}T00:00:00Z"


def cost(s: ScorerInput) -> int:
    assert s.summary is not None
    return embedded_size(piece(s.summary))


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


def test_too_many_large_scorers_lose_the_newest_and_only_where_they_do_not_fit() -> None:
    # five scorers of ~100 KB (each under the per-scorer limit) cannot share one work; the oldest are
    # the largest, so "largest first" would have dropped exactly the ones seniority keeps
    sizes = {"b1": 104_000, "b2": 103_000, "b3": 102_000, "b4": 101_000, "b5": 100_000}
    big = LabelSelector.model_validate({"matchLabels": {"big": "yes"}})
    scorers = [
        scorer(n, created=day(i), queries=1, query_bytes=b) for i, (n, b) in enumerate(sizes.items(), 1)
    ]
    scorers.append(scorer("small", created=day(9)))
    only_big = "2026-01-02T12:00:00Z"  # between b2 and b3
    scorers.append(scorer("only-big", created=only_big, queries=1, query_bytes=100_000, selector=big))
    result = fit(plan(scorers, [], CLUSTERS), CLUSTERS)
    # three large summaries fit in one work: c1 keeps its three oldest, b1, b2 and only-big; c2 keeps
    # b1, b2 and b3; the newest, small, still fits in the room left on both
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
    assert result.scorers["b1"].reason == "Distributed"
    for cluster in ("c1", "c2"):
        encoded = payloads(result)[cluster]
        assert work_bytes(summaries_configmap(NS, (), payload=encoded)) <= CONFIG_WORK_LIMIT


@pytest.mark.parametrize(
    ("established_bytes", "newcomer_bytes"),
    [(60_000, 30_000), (30_000, 60_000), (45_000, 45_000)],
    ids=["established-larger", "newcomer-larger", "equal"],
)
def test_a_newer_scorer_is_left_out_rather_than_an_established_one(
    established_bytes: int, newcomer_bytes: int
) -> None:
    """The finding: a newcomer that overflows a cluster loses, whichever summary is larger.

    The newcomer's name sorts first, so neither size nor name can explain the outcome.
    """
    established = scorer("zz-established", created=day(1), queries=1, query_bytes=established_bytes)
    newcomer = scorer("aa-newcomer", created=day(2), queries=1, query_bytes=newcomer_bytes)
    cluster = [ClusterInput("c1", {}, NS), ClusterInput("c2", {}, NS)]
    limit = configmap_size(NS, [cost(established), cost(newcomer)]) - 1  # together, one byte over
    result = fit(plan([newcomer, established], [], cluster), cluster, work_limit=limit)
    assert {c: names(result, c) for c in result.clusters} == {
        "c1": ["zz-established"],
        "c2": ["zz-established"],
    }
    assert result.scorers["zz-established"].reason == "Distributed"
    outcome = result.scorers["aa-newcomer"]
    assert (outcome.reason, outcome.clusters) == ("WorkTooLarge", ())
    assert "left out on 2 of the 2 cluster(s) it is meant for (c1, c2)" in outcome.message
    assert f"{cost(newcomer):,} bytes" in outcome.message and f"{limit:,} bytes" in outcome.message
    assert "newest to arrive" in outcome.message


def test_several_newcomers_cannot_evict_an_established_scorer() -> None:
    """The attack at the real limits: three scorers under SUMMARY_LIMIT, each smaller than the victim.

    The newcomers together push the cluster over; dropping the largest would have evicted the victim
    everywhere.  Now only the newest newcomer is left out, and the victim stays.
    """
    victim = scorer("team-a", created=day(1), queries=1, query_bytes=115_000)
    newcomers = [scorer(f"team-b-{i}", created=day(10 + i), queries=1, query_bytes=95_000) for i in range(3)]
    assert all(cost(n) < cost(victim) <= SUMMARY_LIMIT for n in newcomers)
    result = fit(plan([*newcomers, victim], [], CLUSTERS), CLUSTERS)
    for cluster in ("c1", "c2"):
        assert names(result, cluster) == ["team-a", "team-b-0", "team-b-1"]
        encoded = payloads(result)[cluster]
        assert work_bytes(summaries_configmap(NS, (), payload=encoded)) <= CONFIG_WORK_LIMIT
    assert result.scorers["team-a"].reason == "Distributed"
    assert result.scorers["team-a"].clusters == ("c1", "c2", "c3")
    assert result.scorers["team-b-2"].reason == "WorkTooLarge"
    assert result.scorers["team-b-2"].clusters == ("c3",)


def test_a_smaller_scorer_after_a_newcomer_that_does_not_fit_is_still_kept() -> None:
    """First fit: a large newcomer left out does not take every later, smaller scorer with it."""
    old = [scorer(f"old-{i}", created=day(1), queries=1, query_bytes=100_000) for i in range(3)]
    large = scorer("large", created=day(2), queries=1, query_bytes=110_000)
    small = scorer("small", created=day(3))
    result = fit(plan([small, large, *old], [], CLUSTERS[:1]), CLUSTERS[:1])
    assert names(result, "c1") == ["old-0", "old-1", "old-2", "small"]
    assert result.scorers["large"].reason == "WorkTooLarge"
    assert result.scorers["small"].reason == "Distributed"


def test_a_scorer_without_a_creation_time_ranks_as_the_newest() -> None:
    """An unknown age must not outrank a known one (the apiserver always sets the time)."""
    timed = scorer("b-timed", created=day(5), queries=1, query_bytes=45_000)
    untimed = scorer("a-untimed", created="", queries=1, query_bytes=45_000)
    cluster = CLUSTERS[:1]
    limit = configmap_size(NS, [cost(timed), cost(untimed)]) - 1
    result = fit(plan([timed, untimed], [], cluster), cluster, work_limit=limit)
    assert names(result, "c1") == ["b-timed"]
    assert result.scorers["a-untimed"].reason == "WorkTooLarge"


def test_the_same_registry_always_trims_the_same_way() -> None:
    """Input order (of scorers and of clusters) changes nothing, equal creation times included."""
    scorers = [scorer(f"s{i}", created=day(1 + i % 3), queries=1, query_bytes=90_000) for i in range(6)]
    scorers.append(scorer("small", created=day(2)))
    first = fit(plan(scorers, [], CLUSTERS), CLUSTERS)
    # four of ~97 KB fit: days 1 (s0, s3) and 2 (s1, s4, and small, which fits beside them) stay
    assert set(names(first, "c1")) == {"s0", "s1", "s3", "s4", "small"}
    for seed in range(5):
        shuffled = scorers[:]
        random.Random(seed).shuffle(shuffled)
        again = fit(plan(shuffled, [], list(reversed(CLUSTERS))), list(reversed(CLUSTERS)))
        assert again == first
        assert payloads(again) == payloads(first)
        assert fit(plan(shuffled, [], CLUSTERS), CLUSTERS) == again  # and again: nothing flaps


def test_equal_creation_times_are_broken_by_name() -> None:
    scorers = [scorer(n, queries=1, query_bytes=150_000 // 2) for n in ("x", "y", "w", "v", "u", "t")]
    result = fit(plan(scorers, [], CLUSTERS[:1]), CLUSTERS[:1])
    kept = names(result, "c1")
    dropped = sorted({"x", "y", "w", "v", "u", "t"} - set(kept))
    # the same time and size: the names that sort last are left out
    assert dropped and dropped == ["t", "u", "v", "w", "x", "y"][-len(dropped) :]


def test_a_masked_copy_is_encoded_as_itself() -> None:
    """`payloads` keyed its pieces by scorer name, so a masked copy leaked to unmasked clusters."""
    s = ScorerInput("a", "t", summary("a", missing_data_score=5), True)
    mask = Mask.model_validate({"clusterName": "c1", "scoreName": "a-score"})
    result = plan([s], [mask], CLUSTERS[:2], mask_policy="Score")
    encoded = payloads(result)
    assert encoded == {c: dump_summaries(items) for c, items in result.clusters.items()}
    assert '"masked":true' in encoded["c1"] and '"masked"' not in encoded["c2"]


registries = st.lists(
    st.tuples(st.integers(min_value=0, max_value=4000), st.integers(min_value=0, max_value=4)),
    max_size=12,
)
"""Scorers as (query bytes, creation day; 0 for none), so that sizes, equal times and no time mix."""


def small_registry(entries: list[tuple[int, int]]) -> list[ScorerInput]:
    return [
        ScorerInput(f"s{i:02d}", day(d) if d else "", summary(f"s{i:02d}", source_query="q" * n), True)
        for i, (n, d) in enumerate(entries)
    ]


def small_fit(scorers: list[ScorerInput]) -> Plan:
    cluster = [ClusterInput("c1", {}, NS)]
    return fit(plan(scorers, [], cluster), cluster, summary_limit=3_000, work_limit=6_000)


@settings(max_examples=60, deadline=None)
@given(registries)
def test_what_is_kept_always_fits_and_a_scorer_is_left_out_only_beside_older_ones(
    entries: list[tuple[int, int]],
) -> None:
    scorers = small_registry(entries)
    result = small_fit(scorers)
    encoded = payloads(result)["c1"]
    assert work_bytes(summaries_configmap(NS, (), payload=encoded)) <= 6_000
    costs = {s.name: cost(s) for s in scorers}
    rank = {s.name: seniority(s.created, s.name) for s in scorers}
    kept = set(names(result, "c1"))
    fitting = {n for n, c in costs.items() if c <= 3_000}
    left_out = fitting - kept
    for name in left_out:
        # it would not have fitted beside the kept scorers that rank before it
        before = [costs[k] for k in kept if rank[k] < rank[name]]
        assert configmap_size(NS, [*before, costs[name]]) > 6_000
        assert result.scorers[name].reason == "WorkTooLarge"
    for name in costs.keys() - fitting:
        assert result.scorers[name].reason == "SummaryTooLarge"


@settings(max_examples=60, deadline=None)
@given(registries, registries)
def test_newer_scorers_never_change_what_an_older_scorer_gets(
    entries: list[tuple[int, int]], newcomers: list[tuple[int, int]]
) -> None:
    """The security property: adding scorers younger than every existing one evicts none of them."""
    existing = small_registry([(n, 1 + d % 4) for n, d in entries])  # days 1 to 4
    added = [
        ScorerInput(f"new{i:02d}", day(10 + d), summary(f"new{i:02d}", source_query="q" * n), True)
        for i, (n, d) in enumerate(newcomers)
    ]
    before = small_fit(existing)
    after = small_fit([*added, *existing])
    for s in existing:
        assert after.scorers[s.name] == before.scorers[s.name]
    assert [n for n in names(after, "c1") if not n.startswith("new")] == names(before, "c1")


def test_the_scorer_controller_marks_the_same_summary_invalid() -> None:
    """`Valid` and the distribution measure alike: one says invalid exactly where the other leaves out."""
    huge = summary("huge", queries=20, query_bytes=60_000)
    valid = valid_condition(Resolution(huge))
    assert (valid.status, valid.reason) == ("False", "SummaryTooLarge")
    assert f"{embedded_size(piece(huge)):,} bytes" in valid.message and f"{SUMMARY_LIMIT:,}" in valid.message
    assert valid_condition(Resolution(summary("small"))).reason == "Resolved"
