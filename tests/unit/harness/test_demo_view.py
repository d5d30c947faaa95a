"""The demo's live view is the `status` view plus `why`'s verdicts: the same text, not a copy."""

from __future__ import annotations

import datetime as dt
from typing import Any

from dynamic_scoring.ctl import placement_model as pm
from dynamic_scoring.ctl import status as st
from dynamic_scoring.ocm import placement_policy as pp
from e2e import demo


def test_the_demo_view_contains_the_status_view_verbatim_and_why_for_the_placement() -> None:
    now = dt.datetime.now(dt.UTC)
    until = (now + dt.timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    clusters = [{"metadata": {"name": c}} for c in ("cluster1", "cluster2")]
    scores: list[dict[str, Any]] = [
        {
            "metadata": {"name": "cpu-headroom", "namespace": c},
            "status": {"validUntil": until, "scores": [{"name": "cpu_headroom", "value": v}]},
        }
        for c, v in (("cluster1", 15), ("cluster2", 90))
    ]
    fleet = st.build_fleet(
        clusters,
        [
            {
                "metadata": {"name": "dynamic-scoring", "namespace": c},
                "status": {"conditions": [{"type": "Available", "status": "True", "reason": "Leased"}]},
            }
            for c in ("cluster1", "cluster2")
        ],
        scores,
    )
    placement = pm.explain(
        pm.HubState(
            placement={
                "metadata": {"namespace": "ns", "name": "p"},
                "spec": {
                    "numberOfClusters": 1,
                    "prioritizerPolicy": {
                        "mode": "Exact",
                        "configurations": [
                            {
                                "scoreCoordinate": {
                                    "type": "AddOn",
                                    "addOn": {"resourceName": "cpu-headroom", "scoreName": "cpu_headroom"},
                                },
                                "weight": 1,
                            }
                        ],
                    },
                },
            },
            clusters=[
                {**c, "metadata": {**c["metadata"], "labels": {pm.CLUSTER_SET_LABEL: "default"}}}
                for c in clusters
            ],
            cluster_sets=[{"metadata": {"name": "default"}, "spec": {}}],
            bindings=[{"metadata": {"name": "default", "namespace": "ns"}}],
            scores={(c, "cpu-headroom"): a for c, a in zip(("cluster1", "cluster2"), scores, strict=True)},
            decisions=[
                {
                    "metadata": {
                        "namespace": "ns",
                        "name": "p-decision-1",
                        "labels": {pp.PLACEMENT_LABEL: "p"},
                    },
                    "status": {"decisions": [{"clusterName": "cluster2"}]},
                }
            ],
        ),
        now,
    )
    text = demo.render(fleet, placement, {"cluster1": 3.4, "cluster2": 0.4}, 67, ["load is on cluster1"], now)
    table = st.render(fleet, now).split("\n\n")[1]  # the status command's table, between blank lines
    assert table in text
    assert "Placement ns/p chooses: cluster2   (why: agrees)" in text
    assert "  cluster1: not selected: rank 2, total 15, below the numberOfClusters cut" in text
    assert "  cluster2: selected: rank 1, total 90" in text
    assert "demo load: cluster1 3.4 cores, cluster2 0.4 cores" in text
    assert text.rstrip().endswith("load is on cluster1")
