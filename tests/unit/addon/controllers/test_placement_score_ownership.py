"""The hub's AddOnPlacementScore writers when a score is replaced between their read and their write.

Another addon's agent (or a person) deletes our score and creates its own of the same name just
before our patch or delete.  The score-expiry and external-agent-scores controllers must leave
that object exactly as its writer made it: not marked, not relabelled, not deleted.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from typing import cast

from prometheus_client import CollectorRegistry

from dynamic_scoring.addon.constants import (
    ADDON_NAME,
    CONFIG_WORK_NAME,
    DEPLOY_WORK_PREFIX,
    SUMMARY_CONFIGMAP,
)
from dynamic_scoring.addon.controllers.placement_scores.decision import EXPIRED_ANNOTATION, MARGIN_SECONDS
from dynamic_scoring.addon.controllers.placement_scores.expiry import ScoreExpiry
from dynamic_scoring.addon.controllers.placement_scores.external import ExternalAgentScores
from dynamic_scoring.addon.render.hub_rbac import SUMMARIES_KEY
from dynamic_scoring.kube.api import KubeAPI
from dynamic_scoring.kube.informer import Informer
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.resources import ADDON_PLACEMENT_SCORES
from dynamic_scoring.kube.writes import Writer
from dynamic_scoring.ocm.score_labels import score_labels
from tests.unit.addon.controllers.fakes import Cache
from tests.unit.shared.fake_apiserver import FakeApiserver

CLUSTER = "cluster1"
VALID_UNTIL = "2026-11-22T07:00:00Z"
LATER = dt.datetime(2026, 11, 22, 7, 0, tzinfo=dt.UTC) + dt.timedelta(seconds=MARGIN_SECONDS + 1)


def score(name: str, *, ours: bool = True) -> JSON:
    """A score of `name`: our agents' (labelled), or another addon's (owned by its addon, unlabelled)."""
    meta: JSON = {"name": name, "namespace": CLUSTER}
    if ours:
        meta["labels"] = score_labels(ADDON_NAME)
    else:
        meta["ownerReferences"] = [
            {"apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ManagedClusterAddOn"}
            | {"name": "other-addon", "uid": "other-uid"}
        ]
    return {
        "apiVersion": ADDON_PLACEMENT_SCORES.api_version,
        "kind": "AddOnPlacementScore",
        "metadata": meta,
        "status": {"scores": [{"name": "s", "value": 5}], "validUntil": VALID_UNTIL},
    }


def path(name: str) -> str:
    return ADDON_PLACEMENT_SCORES.path(CLUSTER, name)


def event_reasons(api: FakeApiserver) -> list[str]:
    return [str(b["reason"]) for m, p, b in api.requests if m == "POST" and p.endswith("/events")]


# -- score expiry -------------------------------------------------------------------------------


def test_an_expired_score_replaced_before_its_mark_is_not_marked() -> None:
    api = FakeApiserver()
    ours = api.put(path("cpu"), score("cpu"))
    registry = CollectorRegistry()
    expiry = ScoreExpiry(
        Writer(cast(KubeAPI, api), "score-expiry"), lambda _key: ours, registry, clock=lambda: LATER
    )
    theirs = score("cpu", ours=False)
    api.before("PATCH", lambda: api.replace(path("cpu"), copy.deepcopy(theirs)))
    assert expiry.reconcile(f"{CLUSTER}/cpu") is None
    stored = api.objects[path("cpu")]
    assert EXPIRED_ANNOTATION not in (stored["metadata"].get("annotations") or {})
    assert "labels" not in stored["metadata"]
    assert registry.get_sample_value("dynamic_scoring_hub_scores_expired_total") == 0
    assert event_reasons(api) == []  # no ScoreExpired on another owner's score


def test_an_expired_score_of_ours_is_still_marked() -> None:
    api = FakeApiserver()
    ours = api.put(path("cpu"), score("cpu"))
    registry = CollectorRegistry()
    expiry = ScoreExpiry(
        Writer(cast(KubeAPI, api), "score-expiry"), lambda _key: ours, registry, clock=lambda: LATER
    )
    assert expiry.reconcile(f"{CLUSTER}/cpu") is None
    assert api.objects[path("cpu")]["metadata"]["annotations"] == {EXPIRED_ANNOTATION: VALID_UNTIL}
    assert registry.get_sample_value("dynamic_scoring_hub_scores_expired_total") == 1


# -- external agent scores ----------------------------------------------------------------------


def external(api: FakeApiserver, *cached: JSON, wanted: tuple[str, ...] = ()) -> ExternalAgentScores:
    """The controller for a cluster scored by another agent (0 replicas), sent summaries `wanted`."""
    mca = {"metadata": {"name": ADDON_NAME, "namespace": CLUSTER, "uid": "mca-uid"}}
    deploy = {
        "metadata": {"name": f"{DEPLOY_WORK_PREFIX}-0", "namespace": CLUSTER},
        "spec": {"workload": {"manifests": [{"kind": "Deployment", "spec": {"replicas": 0}}]}},
    }
    summaries = [{"scoreName": n, "scoreDestination": "AddOnPlacementScore"} for n in wanted]
    configmap = {
        "kind": "ConfigMap",
        "metadata": {"name": SUMMARY_CONFIGMAP},
        "data": {SUMMARIES_KEY: json.dumps(summaries)},
    }
    config = {
        "metadata": {"name": CONFIG_WORK_NAME, "namespace": CLUSTER},
        "spec": {"workload": {"manifests": [configmap]}},
    }
    return ExternalAgentScores(
        Writer(cast(KubeAPI, api), "external-agent-scores"),
        cast(Informer, Cache(mca)),
        cast(Informer, Cache(deploy, config)),
        cast(Informer, Cache(*cached)),
        cast(Informer, Cache()),
    )


def test_a_withdrawn_score_replaced_before_its_delete_is_not_deleted() -> None:
    api = FakeApiserver()
    ours = api.put(path("old"), score("old"))
    logic = external(api, ours)
    theirs = score("old", ours=False)
    api.before("DELETE", lambda: api.replace(path("old"), copy.deepcopy(theirs)))
    logic.reconcile(f"{CLUSTER}/{ADDON_NAME}")
    assert path("old") in api.objects  # the other addon's score is still there
    assert api.objects[path("old")]["metadata"]["ownerReferences"][0]["name"] == "other-addon"


def test_a_withdrawn_score_of_ours_is_still_deleted() -> None:
    api = FakeApiserver()
    logic = external(api, api.put(path("old"), score("old")))
    logic.reconcile(f"{CLUSTER}/{ADDON_NAME}")
    assert path("old") not in api.objects


def test_a_prepared_score_replaced_before_its_patch_is_left_to_its_owner() -> None:
    api = FakeApiserver()
    ours = api.put(path("cpu"), score("cpu"))  # lacks the owner and the score-name annotation
    logic = external(api, ours, wanted=("cpu",))
    theirs = score("cpu", ours=False)
    api.before("PATCH", lambda: api.replace(path("cpu"), copy.deepcopy(theirs)))
    assert logic.reconcile(f"{CLUSTER}/{ADDON_NAME}") is None  # handled, not raised
    stored = api.objects[path("cpu")]
    assert "labels" not in stored["metadata"] and "annotations" not in stored["metadata"]
    assert stored["metadata"]["ownerReferences"][0]["name"] == "other-addon"
    assert stored["status"]["validUntil"] == VALID_UNTIL  # its status not "cleaned" either
    assert api.sent("PATCH") == [path("cpu")]  # the one refused; nothing after it
