"""The pure parts of the real-controller segment: window choice, objects, the model's expected decisions."""

from __future__ import annotations

import re

import numpy as np

from bench.placement_quality import controller as qc
from bench.placement_quality.ranking import placement, rank

DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
NAMES = ("alibaba-utc", "google-w0", "azure-w0")


def test_the_busiest_window_is_the_one_with_the_most_changes() -> None:
    # changes between steps 3-4, 4-5 and 5-6; a 3-step window holds 2 transitions
    decisions = [(0,), (0,), (0,), (0,), (1,), (0,), (1,), (1,)]
    assert qc.busiest_window(decisions, 3) == 3  # steps 3..5: both transitions change
    assert qc.busiest_window(decisions, 8) == 0
    assert qc.busiest_window([(0,)] * 10, 4) == 0  # no change anywhere: the earliest


def test_exact_placements_share_clusters_and_each_additive_one_has_its_own() -> None:
    groups = {c: c.group for c in qc.CASES}
    assert {g for c, g in groups.items() if c.form != "additive"} == {"qm"}
    additive = [g for c, g in groups.items() if c.form == "additive"]
    assert len(additive) == len(set(additive)) == len(qc.SERIES) * len(qc.KS)


CLUSTERS = [f"{family}-b{b}" for family in ("alibaba", "google", "azure") for b in range(30)]


def test_every_name_is_a_valid_object_name() -> None:
    for case in qc.CASES:
        for name in (case.name, case.resource(qc.SEGMENT_STEPS - 1), f"quality-{case.group}"):
            assert DNS1123.match(name) and len(name) <= 63, name
        for n in CLUSTERS:  # every block name the real fleet can have
            name = qc.cluster_name(case.group, n)
            assert DNS1123.match(name) and len(name) <= 63, name


def test_a_steps_placement_points_at_its_scores_and_names_its_group() -> None:
    case = qc.Case("seasonal-1h", "stabilized", "margin", 3)
    obj = qc.placement_object(case, 17)
    spec = obj["spec"]
    addon = spec["prioritizerPolicy"]["configurations"][0]["scoreCoordinate"]["addOn"]
    assert addon == {"resourceName": "q-seasonal-1h-stabilized-017", "scoreName": qc.SCORE}
    groups = spec["decisionStrategy"]["groupStrategy"]["decisionGroups"]
    assert [g["groupName"] for g in groups] == ["step-17"]
    assert spec["clusterSets"] == ["quality-qm"]
    assert obj["metadata"] == {"namespace": qc.NAMESPACE, "name": case.name}
    assert (obj["apiVersion"], obj["kind"]) == (qc.CLUSTER_V1B1, "Placement")


def test_what_the_segment_adds_does_not_change_the_models_ranking() -> None:
    """Cluster sets, tolerations and decision groups only filter and label; the ranking is the model's."""
    rng = np.random.default_rng(3)
    for case in qc.CASES:
        scores = {n: int(v) for n, v in zip(NAMES, rng.integers(0, 100, len(NAMES)), strict=True)}
        ours = qc.placement_object(case, 0)
        plain = placement(case.k, case.form, case.resource(0), qc.SCORE)
        for previous in ((), (NAMES[2],)):
            assert rank(ours, NAMES, scores, previous) == rank(plain, NAMES, scores, previous)


def test_the_model_starts_the_segment_from_no_decision_and_names_group_clusters() -> None:
    # reactive/raw: NAMES[1] leads at the first step, then NAMES[0] by 5 points (below the margin's 10)
    raw = np.array([[0, 50, 60], [0, 55, 10], [0, 20, 0]], dtype=np.int64)
    published = {"reactive/raw": raw, "seasonal-1h/stabilized": raw}
    model = qc.model_decisions(published, NAMES, start=1, length=2)
    exact = qc.Case("reactive", "raw", "exact", 1)
    margin = qc.Case("reactive", "raw", "margin", 1)
    additive = qc.Case("reactive", "raw", "additive", 1)
    assert model[exact] == [("qm-google-w0",), ("qm-alibaba-utc",)]
    assert model[margin] == [("qm-google-w0",), ("qm-alibaba-utc",)]  # 60 vs 10: a 50-point lead
    assert model[additive] == [(f"{additive.group}-google-w0",)] * 2  # Steady's 100 holds the first pick
    three = qc.Case("reactive", "raw", "exact", 3)
    assert model[three] == [tuple(sorted(f"qm-{n}" for n in NAMES))] * 2  # sorted, no order


def test_compare_reports_only_the_differences() -> None:
    a, b = qc.CASES[:2]
    want = {a: ("qm-x",), b: ("qm-y",)}
    assert qc.compare(4, want, {a.name: ("qm-x",), b.name: ("qm-y",)}) == []
    lines = qc.compare(4, want, {a.name: ("qm-x",)})
    assert lines == [f"step 4 {b.name}: model ['qm-y'], controller []"]


def test_the_probe_reads_the_ready_scores_and_has_no_decision_group() -> None:
    obj = qc.probe_object()
    assert obj["metadata"]["name"] == qc.PROBE
    coordinate = obj["spec"]["prioritizerPolicy"]["configurations"][0]["scoreCoordinate"]
    assert coordinate["addOn"]["resourceName"] == qc.READY_SCORES
    assert "decisionStrategy" not in obj["spec"]
    assert obj["spec"]["numberOfClusters"] == 1


def test_hub_objects_bind_every_group_to_the_namespace() -> None:
    objs = qc.hub_objects(NAMES)
    clusters = [o for o in objs if o["kind"] == "ManagedCluster"]
    assert len(clusters) == len(NAMES) * len(qc.GROUPS)
    assert all(o["spec"] == {"hubAcceptsClient": False} for o in clusters)
    bindings = {o["spec"]["clusterSet"] for o in objs if o["kind"] == "ManagedClusterSetBinding"}
    assert bindings == {f"quality-{g}" for g in qc.GROUPS}
    namespaces = {o["metadata"]["name"] for o in objs if o["kind"] == "Namespace"}
    assert {o["metadata"]["name"] for o in clusters} | {qc.NAMESPACE} == namespaces
