"""One oversized DynamicScorer is left out on its own; every other scorer still reaches every cluster.

The scorer and distribution controllers run in-process against the real hub apiserver (the harness
of test_registry_controllers.py), with a real scorer on loopback for `/healthz`.  A scorer with 20
queries of 60 KB (the CRD allows 32 of 64 KiB) resolves into a summary of more than 1.2 MB: more
than one ConfigMap or ManifestWork may hold.  It must be marked on its own status, with an Event
naming its size and the limit, and left out; the config works must stay within the limit and keep
carrying the other scorers, including their later edits.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from dynamic_scoring.addon.controllers.distribution.controller import WORK_NAME
from dynamic_scoring.addon.distribution.budget import CONFIG_WORK_LIMIT, SUMMARY_LIMIT
from dynamic_scoring.kube.api import KubeAPI
from e2e.controlplane import ControlPlane
from e2e.kube import Client
from tests.integration.test_registry_controllers import (
    DS_V1A1,
    WORK_V1,
    Registry,
    Scorer,
    add_cluster,
    condition,
    config_works,
    create_config,
    events,
    health,
    make_scorer,
    none_mode,
    remove_cluster,
    scorer_obj,
    summaries,
    wait_for,
)

QUERY = 'sum by (pod) (rate(container_cpu_usage_seconds_total{namespace="team-a"}[5m])) '


@pytest.fixture(scope="module")
def hub(scorer_crds_hub: Client) -> Client:
    """This module's hub client: the shared one with the scorer CRDs served (see conftest.py)."""
    return scorer_crds_hub


@pytest.fixture(scope="module")
def namespace(hub: Client) -> Iterator[str]:
    name = f"budget-{uuid.uuid4().hex[:6]}"
    hub.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    hub.delete("v1", "Namespace", name)


@pytest.fixture(scope="module")
def clusters(hub: Client) -> Iterator[list[str]]:
    tag = uuid.uuid4().hex[:4]
    names = [f"budget-{tag}-a", f"budget-{tag}-b"]
    for name in names:
        add_cluster(hub, name)
    yield names
    for name in names:
        remove_cluster(hub, name)


@pytest.fixture(scope="module")
def scorer() -> Iterator[Scorer]:
    s = Scorer()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def running(
    control_plane: ControlPlane, hub: Client, namespace: str, clusters: list[str]
) -> Iterator[Registry]:
    assert control_plane.hub is not None
    create_config(hub, namespace)
    registry = Registry(KubeAPI(control_plane.hub.admin_kubeconfig), namespace)
    yield registry
    hub.delete(DS_V1A1, "DynamicScoringConfig", "dynamic-scoring-config", namespace)
    wait_for(lambda: not config_works(hub), "config works withdrawn", timeout=60)
    registry.close()


def queries(count: int, size: int) -> dict[str, Any]:
    """`source.params` with `count` PromQL queries of about `size` bytes each."""
    one = (QUERY * (size // len(QUERY) + 1))[:size]
    return {"queries": [one] * count, "range": 600, "step": 60}


def work_size(hub: Client, cluster: str) -> int:
    """The bytes of the config work's manifests, as OCM's work webhook measures them."""
    work = hub.get(WORK_V1, "ManifestWork", WORK_NAME, cluster)
    return sum(
        len(json.dumps(m, separators=(",", ":")).encode()) for m in work["spec"]["workload"]["manifests"]
    )


def names(hub: Client, cluster: str) -> set[str] | None:
    got = summaries(hub, cluster)
    return None if got is None else {s["name"] for s in got}


def test_an_oversized_scorer_is_left_out_and_a_normal_one_still_reaches_every_cluster(
    hub: Client, namespace: str, clusters: list[str], running: Registry, scorer: Scorer
) -> None:
    make_scorer(hub, namespace, "normal", none_mode(scorer, "normal_score"))
    wait_for(lambda: all("normal" in (names(hub, c) or ()) for c in clusters), "normal on every cluster")

    huge = none_mode(scorer, "huge_score")
    huge["source"]["params"] = queries(20, 60_000)
    make_scorer(hub, namespace, "huge", huge)
    wait_for(lambda: health(hub, namespace, "huge") == "Active", "the huge scorer probed Active")
    # the other scorer's edits still reach every cluster (without the budget, the apiserver refuses
    # every cluster's work as too large, and nothing reaches any agent any more)
    make_scorer(hub, namespace, "normal", none_mode(scorer, "normal_score", validForSeconds=900))

    def edited(cluster: str) -> bool:
        got = {s["name"]: s for s in summaries(hub, cluster) or []}
        return "huge" not in got and got.get("normal", {}).get("validForSeconds") == 900

    wait_for(lambda: all(edited(c) for c in clusters), "the edit of the normal scorer on every cluster")
    for cluster in clusters:
        assert work_size(hub, cluster) <= CONFIG_WORK_LIMIT

    # the huge one is marked on its own status, naming its size and the limit
    distributed = wait_for(
        lambda: (
            (c := condition(scorer_obj(hub, namespace, "huge"), "Distributed")).get("reason")
            == "SummaryTooLarge"
            and c
        ),
        "Distributed=False/SummaryTooLarge on the huge scorer",
    )
    assert distributed["status"] == "False"
    size = int(distributed["message"].split("takes ")[1].split(" bytes")[0].replace(",", ""))
    assert size > 1_200_000
    assert f"{SUMMARY_LIMIT:,}" in distributed["message"]
    wait_for(lambda: "SummaryTooLarge" in events(hub, namespace, "huge"), "the Warning Event")

    def invalid() -> dict[str, Any] | None:
        got = condition(scorer_obj(hub, namespace, "huge"), "Valid")
        return got if got.get("reason") == "SummaryTooLarge" else None

    valid = wait_for(invalid, "Valid=False/SummaryTooLarge from the scorer controller")
    assert valid["status"] == "False" and f"{size:,} bytes" in valid["message"]

    wait_for(
        lambda: condition(scorer_obj(hub, namespace, "normal"), "Distributed").get("reason") == "Distributed",
        "the normal scorer Distributed",
    )

    # shrunk below the limit, the same scorer is distributed like any other
    huge["source"]["params"] = queries(2, 1_000)
    make_scorer(hub, namespace, "huge", huge)
    wait_for(lambda: all("huge" in (names(hub, c) or ()) for c in clusters), "the fixed scorer everywhere")
    wait_for(
        lambda: condition(scorer_obj(hub, namespace, "huge"), "Distributed").get("reason") == "Distributed",
        "Distributed=True once it fits",
    )


def test_scorers_that_fit_alone_but_not_together_lose_the_newest(
    hub: Client, namespace: str, clusters: list[str], running: Registry, scorer: Scorer
) -> None:
    # each about 118 KB in the ConfigMap (under the 128 KiB a scorer may take); four do not fit in one
    # work, three do.  big-e is created last (and, if in the same second, sorts last by name), so it
    # is the newest and the one left out
    sizes = {"big-a": 54_000, "big-b": 54_500, "big-c": 55_000, "big-e": 55_500}
    for name, size in sizes.items():
        spec = none_mode(scorer, name.replace("-", "_"))
        spec["source"]["params"] = queries(2, size)
        make_scorer(hub, namespace, name, spec)
    wait_for(
        lambda: condition(scorer_obj(hub, namespace, "big-e"), "Distributed").get("reason") == "WorkTooLarge",
        "the newest one left out",
        timeout=60,
    )

    def trimmed(cluster: str) -> bool:
        got = names(hub, cluster) or set()
        return got >= {"big-a", "big-b", "big-c"} and "big-e" not in got

    wait_for(lambda: all(trimmed(c) for c in clusters), "the three older ones on every cluster")
    for cluster in clusters:
        assert work_size(hub, cluster) <= CONFIG_WORK_LIMIT
    wait_for(
        lambda: (
            f"{CONFIG_WORK_LIMIT:,} bytes"
            in condition(scorer_obj(hub, namespace, "big-e"), "Distributed")["message"]
        ),
        f"big-e's Distributed message naming the limit of {CONFIG_WORK_LIMIT:,} bytes",
    )
    wait_for(
        lambda: condition(scorer_obj(hub, namespace, "big-a"), "Distributed").get("reason") == "Distributed",
        "the older ones Distributed",
    )
    wait_for(lambda: "WorkTooLarge" in events(hub, namespace, "big-e"), "the Warning Event")
    for name in sizes:
        hub.delete(DS_V1A1, "DynamicScorer", name, namespace)
