"""The multikueue-order reconcile past Kueue's 20 clusters: a listed cluster keeps its place.

Kueue evicts what a worker admitted once that worker leaves the MultiKueueConfig, so a score change
must never push a still-decided cluster off the list: the limit only picks who enters.  These drive
the reconcile on in-memory caches, with the apiserver's live copy of the config answered by
`Live`, since the reconcile reads it before it changes the list (the cache may lag its own last
write).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from dynamic_scoring.addon.controllers.multikueue import MultiKueueOrder
from dynamic_scoring.addon.multikueue import MAX_CLUSTERS, ORDER_LABEL, desired_config
from dynamic_scoring.kube.api import NotFound
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.ocm.placement_policy import PLACEMENT_LABEL
from tests.unit.addon.controllers.fakes import Cache, Recorder

NS = "kueue-system"
KEY = f"{NS}/gpu"
NOW = dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC)
LATER = "2026-11-29T13:00:00Z"
MKC_PATH = "/apis/kueue.x-k8s.io/v1beta2/multikueueconfigs"


class Live(Recorder):
    """A recorder whose GET of the config answers the apiserver's copy (`None`: 404)."""

    def __init__(self, config: JSON | None) -> None:
        super().__init__()
        self.config = config

    def request(self, method: str, path: str, **kw: Any) -> JSON:
        if method == "GET" and path.startswith(MKC_PATH):
            self.requests.append((method, path, None))
            if self.config is None:
                raise NotFound(404, "NotFound", "multikueueconfigs not found")
            return self.config
        return super().request(method, path, **kw)

    def sent(self) -> list[tuple[str, Any]]:
        """The writes to the config (GETs left out)."""
        return [(m, b) for m, b in self.writes(MKC_PATH) if m != "GET"]


def placement() -> JSON:
    coordinate = {"type": "AddOn", "addOn": {"resourceName": "load", "scoreName": "cpu"}}
    return {
        "apiVersion": "cluster.open-cluster-management.io/v1beta1",
        "kind": "Placement",
        "metadata": {"name": "gpu", "namespace": NS, "uid": "u1", "labels": {ORDER_LABEL: "score"}},
        "spec": {
            "prioritizerPolicy": {
                "mode": "Exact",
                "configurations": [{"scoreCoordinate": coordinate, "weight": 1}],
            }
        },
    }


def decision(*clusters: str) -> JSON:
    return {
        "metadata": {"name": "gpu-decision-1", "namespace": NS, "labels": {PLACEMENT_LABEL: "gpu"}},
        "status": {"decisions": [{"clusterName": c, "reason": ""} for c in clusters]},
    }


def scores(totals: dict[str, int]) -> Cache:
    return Cache(
        *(
            {
                "metadata": {"name": "load", "namespace": cluster},
                "status": {"validUntil": LATER, "scores": [{"name": "cpu", "value": value}]},
            }
            for cluster, value in totals.items()
        )
    )


def ours(clusters: list[str], version: str = "7") -> JSON:
    config = desired_config("gpu", KEY, clusters)
    config["metadata"]["resourceVersion"] = version
    return config


def reconciler(
    api: Recorder, decided: list[str], totals: dict[str, int], current: JSON | None
) -> MultiKueueOrder:
    return MultiKueueOrder(
        api.writer("multikueue-order"),
        placements=Cache(placement()),
        decisions=Cache(decision(*decided)),
        configs=Cache(current) if current is not None else Cache(),
        scores=[scores(totals)],
        clock=lambda: NOW,
    )


CLUSTERS = [f"c{i:02d}" for i in range(MAX_CLUSTERS + 2)]  # 22 decided: c00 .. c21
"""Scored by their number: c21 best.  The best 20 (c02 .. c21) fill the list."""
BEST_TWENTY = list(reversed(CLUSTERS))[:MAX_CLUSTERS]


def test_an_unlisted_cluster_outscoring_a_listed_one_does_not_push_it_off() -> None:
    totals = {c: i for i, c in enumerate(CLUSTERS)}
    totals["c00"] = 100  # its admin raised its score above every listed cluster
    api = Live(ours(BEST_TWENTY))
    reconciler(api, CLUSTERS, totals, ours(BEST_TWENTY)).reconcile(KEY)
    assert api.sent() == []  # the list, its members and their order, is unchanged
    assert api.events() == []


def test_a_listed_cluster_whose_score_rises_moves_up_and_no_listed_one_leaves() -> None:
    totals = {c: i for i, c in enumerate(CLUSTERS)}
    totals["c00"] = 100
    totals["c02"] = 50  # the last listed becomes the best listed
    api = Live(ours(BEST_TWENTY))
    reconciler(api, CLUSTERS, totals, ours(BEST_TWENTY)).reconcile(KEY)
    [(method, body)] = api.sent()
    assert method == "PATCH"
    assert body["spec"]["clusters"] == ["c02", *BEST_TWENTY[:-1]]
    assert body["metadata"]["resourceVersion"] == "7"  # guarded by the live copy it was computed from
    [event] = api.events()
    assert event["type"] == "Warning"
    assert "not listed (Kueue allows 20): c00 (100), c01 (1)" in event["message"]


def test_a_listed_cluster_no_longer_decided_leaves_and_the_best_unlisted_enters() -> None:
    totals = {c: i for i, c in enumerate(CLUSTERS)}
    totals["c00"] = 100  # unlisted and the best: it takes the freed place
    totals["c01"] = 50  # unlisted and above most listed ones, but only one place is free
    decided = [c for c in CLUSTERS if c != "c10"]
    api = Live(ours(BEST_TWENTY))
    reconciler(api, decided, totals, ours(BEST_TWENTY)).reconcile(KEY)
    [(_, body)] = api.sent()
    assert body["spec"]["clusters"] == ["c00", *(c for c in BEST_TWENTY if c != "c10")]
    [event] = api.events()
    assert "not listed (Kueue allows 20): c01 (50)" in event["message"]


def test_under_the_limit_every_decided_cluster_is_listed_in_score_order() -> None:
    decided = CLUSTERS[:5]
    totals = {c: i for i, c in enumerate(decided)}
    totals["c00"] = 100
    api = Live(ours(["c04", "c03", "c02", "c01", "c00"]))
    reconciler(api, decided, totals, ours(["c04", "c03", "c02", "c01", "c00"])).reconcile(KEY)
    [(_, body)] = api.sent()
    assert body["spec"]["clusters"] == ["c00", "c04", "c03", "c02", "c01"]
    [event] = api.events()
    assert event["type"] == "Normal"


def test_a_cache_behind_the_last_write_does_not_undo_an_entry() -> None:
    # the cache still shows the list before c10 left and c00 entered; the apiserver has the new one
    totals = {c: i for i, c in enumerate(CLUSTERS)}
    decided = [c for c in CLUSTERS if c != "c10"]
    live = ["c00", *(c for c in BEST_TWENTY if c != "c10")]
    totals["c00"] = 0
    totals["c01"] = 60  # c01 now beats c00, but c00 is listed: it stays
    api = Live(ours(live, version="8"))
    reconciler(api, decided, totals, ours(BEST_TWENTY)).reconcile(KEY)
    [(_, body)] = api.sent()
    assert "c00" in body["spec"]["clusters"] and "c01" not in body["spec"]["clusters"]
    assert body["spec"]["clusters"][-1] == "c00"  # listed, and last by its score
    assert body["metadata"]["resourceVersion"] == "8"


def test_a_config_gone_meanwhile_is_recreated_on_the_next_pass() -> None:
    totals = {c: i for i, c in enumerate(CLUSTERS)}
    decided = [c for c in CLUSTERS if c != "c10"]
    api = Live(None)
    result = reconciler(api, decided, totals, ours(BEST_TWENTY)).reconcile(KEY)
    assert result is not None and result.requeue_after == 1.0
    assert api.sent() == [] and api.events() == []
