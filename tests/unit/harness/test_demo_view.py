"""The demo's live view is the `status` view plus the Placement's choice: the same text, not a copy."""

from __future__ import annotations

import datetime as dt

from ctl import status as st
from e2e import demo
from e2e.mission import PLACEMENT, USER_NS


def test_the_demo_view_contains_the_status_view_verbatim_and_the_decision() -> None:
    now = dt.datetime.now(dt.UTC)
    until = (now + dt.timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    fleet = st.build_fleet(
        [{"metadata": {"name": "cluster1"}}, {"metadata": {"name": "cluster2"}}],
        [
            {
                "metadata": {"name": "dynamic-scoring", "namespace": c},
                "status": {"conditions": [{"type": "Available", "status": "True", "reason": "Leased"}]},
            }
            for c in ("cluster1", "cluster2")
        ],
        [
            {
                "metadata": {"name": "cpu-headroom", "namespace": "cluster2"},
                "status": {"validUntil": until, "scores": [{"name": "cpu_headroom", "value": 90}]},
            }
        ],
    )
    text = demo.render(
        fleet, ["cluster2"], {"cluster1": 3.4, "cluster2": 0.4}, 67, ["load is on cluster1"], now
    )
    table = st.render(fleet, now).split("\n\n")[1]  # the status command's table, between blank lines
    assert table in text
    assert f"Placement {USER_NS}/{PLACEMENT} (the highest cpu_headroom) chooses: cluster2" in text
    assert "demo load: cluster1 3.4 cores, cluster2 0.4 cores" in text
    assert text.rstrip().endswith("load is on cluster1")
