"""The fleet view from hand-built hub objects: health, expiry, the last error, and the rendered text."""

from __future__ import annotations

import datetime as dt

import pytest

from dynamic_scoring.ctl import status as st
from dynamic_scoring.kube.jsontypes import JSON

NOW = dt.datetime(2026, 11, 22, 12, 0, 0, tzinfo=dt.UTC)


def ts(delta_s: float) -> str:
    return (NOW + dt.timedelta(seconds=delta_s)).strftime("%Y-%m-%dT%H:%M:%SZ")


def mc(name: str) -> JSON:
    return {"metadata": {"name": name}}


def mca(ns: str, *conditions: tuple[str, str, str, str]) -> JSON:
    conds = [{"type": t, "status": s, "reason": r, "message": m} for t, s, r, m in conditions]
    return {"metadata": {"name": "dynamic-scoring", "namespace": ns}, "status": {"conditions": conds}}


def aps(
    ns: str,
    name: str,
    until: float,
    written: float,
    cond: tuple[str, str, str] = ("True", "Scored", ""),
    **items: int,
) -> JSON:
    return {
        "metadata": {
            "name": name,
            "namespace": ns,
            "annotations": {st.SCORE_NAME_ANNOTATION: name.replace("-", "_")},
            "managedFields": [{"subresource": "status", "time": ts(written)}, {"time": ts(written + 5)}],
        },
        "status": {
            "validUntil": ts(until),
            "scores": [{"name": k, "value": v} for k, v in items.items()],
            "conditions": [
                {"type": "ScoresUpToDate", "status": cond[0], "reason": cond[1], "message": cond[2]}
            ],
        },
    }


AVAILABLE = ("Available", "True", "ManagedClusterAddOnLeaseUpdated", "")


def test_a_healthy_fleet_has_no_problems_and_shows_age_and_expiry() -> None:
    fleet = st.build_fleet(
        [mc("c1")], [mca("c1", AVAILABLE)], [aps("c1", "cpu-headroom", 25, -5, cpu_headroom=15)]
    )
    assert fleet.problems(NOW) == []
    text = st.render(fleet, NOW)
    row = next(line for line in text.splitlines() if line.startswith("c1"))
    assert row.split() == ["c1", "Available", "cpu_headroom", "15", "5s", "ago", "25s", "ok"]
    assert "healthy" in text


def test_the_status_write_time_is_the_age_not_a_metadata_write() -> None:
    score = st.score_of(aps("c1", "x", 60, -30, x=1))
    assert score.written == NOW - dt.timedelta(seconds=30)


def test_an_unavailable_addon_and_an_expired_failing_score_are_problems_with_their_messages() -> None:
    lost = ("Available", "False", "ManagedClusterAddOnLeaseUpdateStopped", "Lease not updated in 5m")
    failing = ("False", "PrometheusQueryError", "query #1 failed: bad_data")
    fleet = st.build_fleet(
        [mc("c1"), mc("c2")],
        [mca("c1", AVAILABLE), mca("c2", lost)],
        [aps("c2", "cpu", -30, -200, failing, cpu=50)],
    )
    assert fleet.problems(NOW) == [
        ("c2", "addon Available=False (ManagedClusterAddOnLeaseUpdateStopped): Lease not updated in 5m"),
        ("c2", "score cpu expired 30s ago: Placement counts it as 0"),
        ("c2", "score cpu ScoresUpToDate=False (PrometheusQueryError): query #1 failed: bad_data"),
    ]
    text = st.render(fleet, NOW)
    assert "1 cluster(s) with problems:" in text and "PrometheusQueryError" in text
    doc = st.to_json(fleet, NOW)
    c2 = doc["clusters"][1]
    assert not doc["healthy"] and c2["health"] == "Unavailable"
    assert (
        c2["lastError"].startswith("addon Available=False") and c2["scores"][0]["expiresInSeconds"] == -30.0
    )


def test_a_cluster_without_the_addon_is_listed_but_not_a_problem() -> None:
    fleet = st.build_fleet([mc("c1"), mc("c2")], [mca("c1", AVAILABLE)], [])
    assert [(c.name, c.health) for c in fleet.clusters] == [("c1", "Available"), ("c2", "not enabled")]
    assert fleet.problems(NOW) == []


def test_manager_conditions_and_degraded_count_and_a_missing_available_is_said() -> None:
    bad_work = (
        "ManifestApplied",
        "False",
        "ManifestWorkApplyFailed",
        "invalid AddOnDeploymentConfig: nodePlacement",
    )
    fleet = st.build_fleet([mc("a"), mc("b")], [mca("a", AVAILABLE, bad_work), mca("b")], [])
    assert fleet.clusters[0].health == "ManifestApplied=False"
    assert "nodePlacement" in fleet.problems(NOW)[0][1]
    assert fleet.problems(NOW)[1] == (
        "b",
        "addon Available not reported yet (the klusterlet sets it once it sees the agent's Lease)",
    )


def test_an_unknown_availability_reads_unknown_and_is_a_problem() -> None:
    unknown = ("Available", "Unknown", "ManagedClusterAddOnLeaseNotFound", "The status is unknown.")
    fleet = st.build_fleet([mc("a")], [mca("a", unknown)], [])
    assert fleet.clusters[0].health == "Unknown"
    assert fleet.problems(NOW) == [
        ("a", "addon Available=Unknown (ManagedClusterAddOnLeaseNotFound): The status is unknown.")
    ]


def test_only_narrows_and_many_items_are_cut_with_a_count() -> None:
    many = {f"pod{i}": i for i in range(8)}
    fleet = st.build_fleet(
        [mc("a"), mc("b")],
        [mca("a", AVAILABLE)],
        [aps("a", "pods", 60, -1, ("True", "Scored", ""), **many)],
        only=["a"],
    )
    assert [c.name for c in fleet.clusters] == ["a"]
    text = st.render(fleet, NOW, extra=["Placement ns/p chooses: a"])
    assert "... 3 more" in text and "Placement ns/p chooses: a" in text
    assert "pod4" in text and "pod5" not in text


def test_secs_formats_short_long_and_unknown() -> None:
    assert (st.secs(None), st.secs(12.4), st.secs(-3), st.secs(900)) == ("-", "12s", "-3s", "15m")


def test_escape_sequences_in_hub_text_reach_the_terminal_spelled_out() -> None:
    """Item names, reasons and messages are chosen by whoever writes the hub objects."""
    hostile_message = "ok\x1b[2J\x1b]0;pwned\x07 done\u202eevil\nsecond line"
    failing = ("False", "Bad\x1b[31mReason", hostile_message)
    fleet = st.build_fleet(
        [mc("c1"), mc("c\x1b[1A2")],
        [mca("c1", AVAILABLE), mca("c\x1b[1A2", AVAILABLE)],
        [aps("c1", "cpu", -30, -200, failing, **{"node\x1b[H": 5, "zoné-ü": 7})],
    )
    text = st.render(fleet, NOW, extra=["decision: c\x9b2J1"])
    assert not any(c in text for c in "\x1b\x07\x9b\u202e")
    for spelled in (
        "\\x1b[2J",
        "\\x1b]0;pwned\\x07",
        "\\u202eevil",
        "\\x0asecond line",
        "Bad\\x1b[31mReason",
    ):
        assert spelled in text
    assert "node\\x1b[H" in text and "c\\x1b[1A2" in text and "c\\x9b2J1" in text
    assert "zoné-ü" in text  # printable non-ASCII is left alone
    assert len(text.splitlines()) == len(st.render(fleet, NOW, extra=["x"]).splitlines())


def test_terminal_safe_leaves_printable_text_alone() -> None:
    from dynamic_scoring.ctl.output import terminal_safe

    assert terminal_safe("cluster-1 : ok, 75 % — zoné") == "cluster-1 : ok, 75 % — zoné"
    assert terminal_safe("a\tb\x00c\u200bd") == "a\\x09b\\x00c\\u200bd"


def test_echo_lines_spells_out_escapes_line_by_line(capsys: pytest.CaptureFixture[str]) -> None:
    from dynamic_scoring.ctl.output import echo_lines

    echo_lines("placement p\x1b[2J\ncluster c1\x07")
    assert capsys.readouterr().out == "placement p\\x1b[2J\ncluster c1\\x07\n"


def test_a_score_held_by_stabilization_shows_held_and_why_but_is_no_problem() -> None:
    message = "scorer cpu produced 1 score(s); 1 of 1 score(s) held by stabilization, e.g. cpu: " + (
        "rising, held 120 of 300 s"
    )
    fleet = st.build_fleet(
        [mc("c1")],
        [mca("c1", AVAILABLE)],
        [aps("c1", "cpu", 25, -5, ("True", "Stabilized", message), cpu=40)],
    )
    assert fleet.problems(NOW) == []
    text = st.render(fleet, NOW)
    row = next(line for line in text.splitlines() if line.startswith("c1"))
    assert row.split()[-1] == "held"
    assert "held by stabilization (published values lag the raw ones on purpose):" in text
    assert "  c1: score cpu: " + message in text
    assert "healthy" in text
