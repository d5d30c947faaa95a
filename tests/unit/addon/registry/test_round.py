"""A whole probe round: results in, status patch and Event out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from dynamic_scoring.addon.registry.probe import ConfigResult, ProbeResult
from dynamic_scoring.addon.registry.round import evaluate_round
from dynamic_scoring.contract.wire import ScorerConfig

T0 = datetime(2026, 1, 1, tzinfo=UTC)
UP = ProbeResult(True, "Healthy", "GET http://s:1/healthz answered HTTP 200", 200)
DOWN = ProbeResult(False, "Unreachable", "GET http://s:1/healthz failed: ConnectError")
DOC = ScorerConfig.model_validate({"scoring": {"params": {"name": "from_config", "interval": 20}}})
FETCHED = ConfigResult(
    ProbeResult(True, "ConfigFetched", "GET http://s:1/config answered HTTP 200", 200), DOC
)
BROKEN = ConfigResult(ProbeResult(False, "InvalidSchema", "GET http://s:1/config: source.params.range: bad"))


def obj(mode: str = "Full", status: dict[str, Any] | None = None, generation: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"name": "s", "namespace": "hub", "generation": generation},
        "spec": {"configSyncMode": mode, "configURL": "http://s:1/config"},
        "status": status or {},
    }


def conditions(patch: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in patch["conditions"]}


def test_first_passing_round_activates_syncs_and_resolves() -> None:
    out = evaluate_round(obj(), UP, FETCHED, failure_threshold=3, now=T0)
    assert out.passed and out.event is not None and out.event.reason == "ScorerActive"
    assert out.status["healthStatus"] == "Active"
    assert out.status["lastSyncedConfig"]["scoring"]["params"]["name"] == "from_config"
    assert (out.status["scoreName"], out.status["scoringInterval"]) == ("from_config", 20)
    assert conditions(out.status) == {
        "Healthy": ("True", "Healthy"),
        "ConfigSynced": ("True", "ConfigFetched"),
        "Valid": ("True", "Resolved"),
    }


def test_full_mode_bad_config_fails_the_round_but_keeps_the_document_until_inactive() -> None:
    status = evaluate_round(obj(), UP, FETCHED, failure_threshold=2, now=T0).status
    out = evaluate_round(obj(status=status), UP, BROKEN, failure_threshold=2, now=T0 + timedelta(seconds=30))
    assert not out.passed and out.event is None
    assert out.status["healthStatus"] == "Active" and out.status["consecutiveFailures"] == 1
    assert out.status["lastSyncedConfig"] is not None
    assert conditions(out.status)["ConfigSynced"] == ("False", "InvalidSchema")
    assert conditions(out.status)["Healthy"] == ("True", "InvalidSchema")
    out = evaluate_round(
        obj(status=out.status), UP, BROKEN, failure_threshold=2, now=T0 + timedelta(seconds=60)
    )
    assert out.status["healthStatus"] == "Inactive"
    assert (
        out.event is not None and out.event.type == "Warning" and "source.params.range" in out.event.message
    )


def test_unchanged_rounds_keep_condition_timestamps_and_send_no_event() -> None:
    first = evaluate_round(obj(), UP, FETCHED, failure_threshold=3, now=T0).status
    again = evaluate_round(obj(status=first), UP, FETCHED, failure_threshold=3, now=T0 + timedelta(minutes=5))
    assert again.event is None
    assert again.status["conditions"] == first["conditions"]
    assert not again.changed  # nothing to write for a steady scorer
    assert evaluate_round(obj(), UP, FETCHED, failure_threshold=3, now=T0).changed
    failed = evaluate_round(
        obj(status=first), DOWN, FETCHED, failure_threshold=3, now=T0 + timedelta(minutes=6)
    )
    assert failed.changed and failed.event is None  # the failure count moved: written, but no Event


def test_nothing_to_probe_counts_as_a_failure() -> None:
    out = evaluate_round(obj("None"), None, None, failure_threshold=1, now=T0)
    assert out.status["healthStatus"] == "Inactive"
    assert conditions(out.status)["Healthy"] == ("False", "NoProbeTarget")


def test_none_mode_clears_a_stale_document() -> None:
    full = evaluate_round(obj(), UP, FETCHED, failure_threshold=3, now=T0).status
    out = evaluate_round(obj("None", status=full, generation=2), UP, None, failure_threshold=3, now=T0)
    assert out.status["lastSyncedConfig"] is None and out.status["scoreName"] == "s"
    assert conditions(out.status)["ConfigSynced"] == ("True", "SyncDisabled")


def test_unreadable_spec_only_sets_valid() -> None:
    bad = obj("None")
    bad["spec"]["scoring"] = {"params": {"interval": "30"}}
    out = evaluate_round(bad, DOWN, None, failure_threshold=3, now=T0)
    assert out.event is None and set(conditions(out.status)) == {"Valid"}
    assert "spec.scoring.params.interval" in out.status["conditions"][0]["message"]
