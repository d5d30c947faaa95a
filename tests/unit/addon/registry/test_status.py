"""Conditions and the status patch the scorer controller writes."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from dynamic_scoring.addon.registry.effective import resolve
from dynamic_scoring.addon.registry.health import HealthState
from dynamic_scoring.addon.registry.models import DynamicScorer, SpecProblem, parse_scorer
from dynamic_scoring.addon.registry.probe import ConfigResult, ProbeResult
from dynamic_scoring.addon.registry.status import (
    config_synced_condition,
    healthy_condition,
    status_patch,
    synced_config_after,
    valid_condition,
)
from dynamic_scoring.contract.wire import ScorerConfig

OLD = {"scoring": {"params": {"name": "old", "interval": 10}}}


def scorer(mode: str, synced: dict[str, Any] | None = None, **spec: Any) -> DynamicScorer:
    obj: dict[str, Any] = {
        "metadata": {"name": "s", "namespace": "hub", "generation": 4},
        "spec": {"configSyncMode": mode, "configURL": "http://s:1/config", **spec},
        "status": {"lastSyncedConfig": synced, "observedGeneration": 4} if synced else {},
    }
    parsed = parse_scorer(obj)
    assert isinstance(parsed, DynamicScorer)
    return parsed


FAILED = ProbeResult(False, "Timeout", "GET http://s:1/healthz did not answer within 5s")
PASSED = ProbeResult(True, "Healthy", "GET http://s:1/healthz answered HTTP 200", 200)


def test_healthy_condition_follows_the_state() -> None:
    assert healthy_condition(HealthState(), None, 3).status == "Unknown"
    c = healthy_condition(HealthState("Active", 0), PASSED, 3)
    assert (c.status, c.reason) == ("True", "Healthy")
    c = healthy_condition(HealthState("Active", 1), FAILED, 3)
    assert (c.status, c.reason) == ("True", "Timeout") and "1 of 3" in c.message
    c = healthy_condition(HealthState("Inactive", 3), FAILED, 3)
    assert (c.status, c.reason) == ("False", "Timeout") and "did not answer" in c.message


def test_config_synced_in_each_mode() -> None:
    assert config_synced_condition(scorer("None"), None).reason == "SyncDisabled"
    bad = ConfigResult(ProbeResult(False, "InvalidSchema", "GET x: source.params.range: bad"))
    c = config_synced_condition(scorer("Full", OLD), bad)
    assert (c.status, c.reason) == ("False", "InvalidSchema") and "last valid document is kept" in c.message
    good = ConfigResult(ProbeResult(True, "ConfigFetched", "ok", 200), ScorerConfig())
    assert config_synced_condition(scorer("Full"), good).status == "True"


def test_synced_config_is_replaced_kept_or_cleared() -> None:
    new = ScorerConfig.model_validate({"scoring": {"params": {"name": "new"}}})
    good = ConfigResult(ProbeResult(True, "ConfigFetched", "ok"), new)
    bad = ConfigResult(ProbeResult(False, "HTTPStatus", "500"))
    assert synced_config_after(scorer("Full", OLD), good) == new
    kept = synced_config_after(scorer("Full", OLD), bad)
    assert kept is not None and kept.scoring.params.name == "old"
    assert synced_config_after(scorer("None", OLD), good) is None  # cleared in None mode


def test_a_stale_config_does_not_survive_a_spec_edit() -> None:
    edited = replace(scorer("Full", OLD), generation=5)  # the spec changed since the last sync
    assert synced_config_after(edited, ConfigResult(ProbeResult(False, "Unreachable", "x"))) is None


def test_status_patch_clears_stale_config_and_reports_effective_values() -> None:
    s = scorer("None", OLD, scoring={"params": {"name": "mine", "interval": 20}})
    patch = status_patch(
        s, HealthState("Active", 0), None, resolve(s), datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    )
    assert patch == {
        "observedGeneration": 4,
        "healthStatus": "Active",
        "consecutiveFailures": 0,
        "lastSyncedConfig": None,
        "lastProbeTime": "2026-01-02T03:04:05Z",
        "scoreName": "mine",
        "scoringInterval": 20,
    }


def test_valid_condition_names_fields_and_notes() -> None:
    c = valid_condition(resolve(scorer("None", source={"type": "prometheus"})))
    assert (c.status, c.reason) == ("False", "InvalidSpec")
    assert "spec.source.host" in c.message and "read as 'Prometheus'" in c.message
    assert valid_condition(resolve(scorer("Full"))).reason == "WaitingForConfig"
    assert valid_condition(SpecProblem("s", "hub", "spec.location: bad")).message == "spec.location: bad"
    assert valid_condition(resolve(scorer("None"))).status == "True"


def test_valid_condition_says_when_config_moved_a_host_and_the_credentials_were_withheld() -> None:
    auth = {"tokenSecretRef": {"name": "scorer-token", "key": "token"}}
    moved = {"scoring": {"host": "https://collector.other", "params": {"name": "n"}}}
    c = valid_condition(resolve(scorer("Full", moved, scoring={"auth": auth})))
    assert (c.status, c.reason) == ("True", "CredentialsWithheld")
    assert "spec.scoring.auth is not sent there" in c.message and "https://collector.other:443" in c.message
    kept = resolve(scorer("Full", moved, scoring={"auth": auth}, sendCredentialsToSyncedHosts=True))
    assert valid_condition(kept).reason == "Resolved"
