"""A segment of the replay through OCM's real placement controller, checked decision by decision.

Why.  The benchmark decides tens of thousands of steps with the project's model of Placement's
ranking (``bench.placement_quality.ranking``); a live hub would take days for that.  The model is only
evidence if OCM's own scheduler decides the same, so a window of the replay is fed to the real
placement controller on the local control plane (``e2e.controlplane``) and every decision it writes
is compared with the model's.

What runs.  The hub gets its own ManagedClusters named after the trace clusters (no klusterlet behind
them, so the NoSelect taints for an unknown availability are tolerated, as in the margin tests), in
groups, each a label-selected ManagedClusterSet bound to one namespace:

* ``qm-*``: every Placement in ``mode: Exact`` (the exact and margin forms, k = 1 and 3).  Exact
  Placements use only the prioritizers they name, so they can share clusters;
* ``qa-<series>-k<k>-*``: one group for each additive Placement.  Additive adds the built-in Balance,
  which counts the decisions *other* Placements made on a cluster; only on clusters of its own is
  Balance 100 everywhere, which is what the model assumes (a first try that let two additive
  Placements share clusters disagreed with the model for exactly that reason).

Each Placement is one of :data:`SERIES` (a policy's raw or stabilized published scores) in one form
with one k.

Steps.  Every score of the segment is written before the first step, one AddOnPlacementScore per
(series, step) in every cluster's namespace (``q-<policy>-<variant>-<step>``), and then a last one
that an extra Exact Placement (``ready-probe``) decides on.  The controller's informer sees one
resource's events in the order they were written, so once the probe's decision shows that last
write, every score is in the scheduler's cache and no step can be decided on a half-written one.
A step then re-applies every Placement pointing at that step's scores, with its decision group
renamed ``step-<j>``.  The controller writes the PlacementDecisions first and the Placement's
status (``decisionGroups[].decisionGroupName``) after, so when every status names the step, the
decisions on the server are the ones it made from that step's scores.  Steady sees the previous
step's decision, as in the model, which starts the segment from no decision.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np

from bench.placement_quality.ranking import Form, placement
from bench.placement_quality.replay import Scores, decide
from dynamic_scoring.kube.jsontypes import JSON
from e2e.controlplane import ControlPlane
from e2e.kube import Client
from e2e.procs import wait_until

NAMESPACE = "quality"
SCORE = "score"
GROUP_LABEL = "quality.bench/group"
PLACEMENT_LABEL = "cluster.open-cluster-management.io/placement"
CLUSTER_V1 = "cluster.open-cluster-management.io/v1"
CLUSTER_V1B1 = "cluster.open-cluster-management.io/v1beta1"
CLUSTER_V1B2 = "cluster.open-cluster-management.io/v1beta2"
APS_V1A1 = "cluster.open-cluster-management.io/v1alpha1"
TOLERATE = [
    {"key": "cluster.open-cluster-management.io/unreachable", "operator": "Exists"},
    {"key": "cluster.open-cluster-management.io/unavailable", "operator": "Exists"},
]
SEGMENT_STEPS = 48
"""Four hours of trace time at 300 s."""
SERIES: tuple[tuple[str, str], ...] = (("reactive", "raw"), ("seasonal-1h", "stabilized"))
"""The published scores replayed: the policy that changes its mind most, and the forecast held by the
stabilizer."""
KS = (1, 3)
FORMS: tuple[Form, ...] = ("exact", "margin", "additive")
STEP_TIMEOUT = 60.0
"""Seconds the controller may take for one step of every Placement: far above the tens of
milliseconds it needs, so only a stuck controller trips it."""
PROBE = "ready-probe"
READY_SCORES = "q-ready"


@dataclass(frozen=True)
class Case:
    """One Placement of the segment: a series of published scores, a form and a k."""

    policy: str
    variant: str
    form: Form
    k: int

    @property
    def name(self) -> str:
        return f"{self.policy}-{self.variant}-{self.form}-k{self.k}"

    @property
    def group(self) -> str:
        """The cluster group the Placement chooses from (see the module docstring)."""
        return "qm" if self.form != "additive" else f"qa-{self.policy}-{self.variant}-k{self.k}"

    def resource(self, step: int) -> str:
        """The AddOnPlacementScore holding this case's scores at ``step`` of the segment."""
        return f"q-{self.policy}-{self.variant}-{step:03d}"


CASES = tuple(Case(p, v, f, k) for p, v in SERIES for f in FORMS for k in KS)
GROUPS = tuple(sorted({c.group for c in CASES}))


def cluster_name(group: str, name: str) -> str:
    """A trace cluster's ManagedCluster in ``group``; one prefix per group keeps the model's name order."""
    return f"{group}-{name}"


def busiest_window(decisions: Sequence[tuple[int, ...]], length: int) -> int:
    """The first step of the ``length``-step window with the most decision changes (the earliest on ties).

    The segment should exercise the ranking where it matters: where the decision moves.
    """
    if len(decisions) <= length:
        return 0
    changed = np.array([a != b for a, b in itertools.pairwise(decisions)], dtype=np.int64)
    sums = np.convolve(changed, np.ones(length - 1, dtype=np.int64), mode="valid")
    return int(np.argmax(sums))


def model_decisions(
    published: Mapping[str, Scores], names: Sequence[str], start: int, length: int
) -> dict[Case, list[tuple[str, ...]]]:
    """What the model decides for every case over the segment, starting from no decision, as sorted
    ManagedCluster names (a PlacementDecision lists no order)."""
    out: dict[Case, list[tuple[str, ...]]] = {}
    for case in CASES:
        window = published[f"{case.policy}/{case.variant}"][:, start : start + length]
        picked = decide(window, names, case.k, case.form, case.resource(0), SCORE)
        out[case] = [tuple(sorted(cluster_name(case.group, names[i]) for i in d)) for d in picked]
    return out


def on_group(obj: JSON, group: str) -> JSON:
    """A model Placement (``ranking.placement``) as an object on the hub, choosing from ``group``."""
    spec = obj["spec"]
    spec["clusterSets"] = [f"quality-{group}"]
    spec["tolerations"] = TOLERATE
    obj["metadata"]["namespace"] = NAMESPACE
    return {"apiVersion": CLUSTER_V1B1, "kind": "Placement", **obj}


def placement_object(case: Case, step: int) -> JSON:
    """The Placement of ``case`` at ``step``: the model's Placement, on its group's clusters, pointing
    at the step's scores, with its one decision group named after the step."""
    obj = on_group(placement(case.k, case.form, case.resource(step), SCORE, name=case.name), case.group)
    return step_group(obj, case.group, step)


def step_group(obj: JSON, group: str, step: int) -> JSON:
    """``obj`` (a Placement on ``group``) with its one decision group named ``step-<step>``: its status
    then says which step's scores the controller last decided on."""
    obj["spec"]["decisionStrategy"] = {
        "groupStrategy": {
            "decisionGroups": [
                {
                    "groupName": f"step-{step}",
                    "groupClusterSelector": {"labelSelector": {"matchLabels": {GROUP_LABEL: group}}},
                }
            ]
        }
    }
    return obj


def score_objects(case_resource: str, cluster: str, value: int) -> tuple[JSON, JSON]:
    """The AddOnPlacementScore to create and the status to give it (a status is a subresource)."""
    obj: JSON = {
        "apiVersion": APS_V1A1,
        "kind": "AddOnPlacementScore",
        "metadata": {"name": case_resource, "namespace": cluster},
    }
    return obj, {"scores": [{"name": SCORE, "value": value}]}


def hub_objects(names: Sequence[str], groups: Sequence[str] = GROUPS) -> list[JSON]:
    """The namespaces, ManagedClusters, cluster sets and bindings of every group."""
    objs: list[JSON] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}]
    for group in groups:
        for n in names:
            c = cluster_name(group, n)
            objs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": c}})
            objs.append(
                {
                    "apiVersion": CLUSTER_V1,
                    "kind": "ManagedCluster",
                    "metadata": {"name": c, "labels": {GROUP_LABEL: group}},
                    "spec": {"hubAcceptsClient": False},
                }
            )
        objs.append(
            {
                "apiVersion": CLUSTER_V1B2,
                "kind": "ManagedClusterSet",
                "metadata": {"name": f"quality-{group}"},
                "spec": {
                    "clusterSelector": {
                        "selectorType": "LabelSelector",
                        "labelSelector": {"matchLabels": {GROUP_LABEL: group}},
                    }
                },
            }
        )
        objs.append(
            {
                "apiVersion": CLUSTER_V1B2,
                "kind": "ManagedClusterSetBinding",
                "metadata": {"name": f"quality-{group}", "namespace": NAMESPACE},
                "spec": {"clusterSet": f"quality-{group}"},
            }
        )
    return objs


def probe_object() -> JSON:
    """An Exact Placement picking 1 of the ``qm`` clusters by :data:`READY_SCORES`, which only the
    last cluster publishes (so the probe's answer differs from the name order's)."""
    return on_group(placement(1, "exact", READY_SCORES, SCORE, name=PROBE), "qm")


def compare(step: int, want: Mapping[Case, tuple[str, ...]], got: Mapping[str, tuple[str, ...]]) -> list[str]:
    """One line per case whose real decision differs from the model's at ``step``."""
    return [
        f"step {step} {case.name}: model {list(w)}, controller {list(got.get(case.name, ()))}"
        for case, w in want.items()
        if got.get(case.name, ()) != w
    ]


@dataclass
class SegmentResult:
    """What the segment showed; ``mismatches`` lists at most the first few differences."""

    start: int
    steps: int
    placements: int
    compared: int = 0
    matched: int = 0
    model_changes: int = 0
    mismatches: list[str] = field(default_factory=list)
    seconds_setup: float = 0.0
    seconds_steps: float = 0.0


Progress = Callable[[str], None]


@contextmanager
def local_hub(run_dir: Path, progress: Progress) -> Iterator[Client]:
    """A local control plane without Prometheus or the image runner; stopped on the way out."""
    cp = ControlPlane(run_dir, with_prometheus=False, with_runner=False, progress=progress)
    try:
        cp.up()
        assert cp.hub is not None
        yield Client(cp.hub.admin_kubeconfig, timeout=30)
    finally:
        left = cp.down()
        if left:
            progress("teardown left: " + "; ".join(left))


def decided(hub: Client) -> dict[str, tuple[str, ...]]:
    """Every Placement's decided clusters in :data:`NAMESPACE`, sorted."""
    out: dict[str, list[str]] = {}
    for pd in hub.items(CLUSTER_V1B1, "PlacementDecision", NAMESPACE):
        owner = pd["metadata"].get("labels", {}).get(PLACEMENT_LABEL, "")
        out.setdefault(owner, []).extend(
            d["clusterName"] for d in (pd.get("status") or {}).get("decisions") or []
        )
    return {k: tuple(sorted(v)) for k, v in out.items()}


def step_seen(hub: Client, step: int, placements: Sequence[str]) -> bool:
    """Whether every Placement of ``placements`` has a status naming ``step``'s decision group (see the
    module docstring)."""
    want = f"step-{step}"
    seen = {
        p["metadata"]["name"]
        for p in hub.items(CLUSTER_V1B1, "Placement", NAMESPACE)
        if [g.get("decisionGroupName") for g in (p.get("status") or {}).get("decisionGroups") or []] == [want]
    }
    return all(name in seen for name in placements)


def run_segment(
    run_dir: Path,
    names: Sequence[str],
    published: Mapping[str, Scores],
    start: int,
    length: int,
    progress: Progress,
) -> SegmentResult:
    """Replay ``length`` steps from ``start`` of every case through OCM's placement controller.

    ``published`` maps ``"<policy>/<variant>"`` to the published scores of every judged step.
    """
    model = model_decisions(published, names, start, length)
    result = SegmentResult(start=start, steps=length, placements=len(CASES))
    result.model_changes = sum(sum(a != b for a, b in itertools.pairwise(seq)) for seq in model.values())
    began = time.monotonic()
    with local_hub(run_dir, progress) as hub:
        for obj in hub_objects(names):
            hub.apply(obj)
        writes: list[tuple[JSON, JSON]] = []
        for policy, variant in SERIES:
            uses = [c for c in CASES if (c.policy, c.variant) == (policy, variant)]
            values = published[f"{policy}/{variant}"]
            case = uses[0]
            for group in sorted({c.group for c in uses}):
                for i, n in enumerate(names):
                    for j in range(length):
                        writes.append(
                            score_objects(case.resource(j), cluster_name(group, n), int(values[i, start + j]))
                        )
        progress(f"segment: writing {len(writes)} AddOnPlacementScores")

        def write(pair: tuple[JSON, JSON]) -> None:
            hub.apply(pair[0])
            hub.patch_status(pair[0], pair[1])

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(write, writes))
        last = cluster_name("qm", names[-1])
        write(score_objects(READY_SCORES, last, 100))
        hub.apply(probe_object())
        wait_until(
            lambda: decided(hub).get(PROBE) == (last,),
            timeout=STEP_TIMEOUT,
            what=f"the placement controller to see every score ({PROBE} picks {last})",
        )
        result.seconds_setup = time.monotonic() - began
        progress(f"segment: {length} steps x {len(CASES)} Placements")
        stepped = time.monotonic()
        for j in range(length):
            for case in CASES:
                hub.apply(placement_object(case, j))
            wait_until(
                partial(step_seen, hub, j, [c.name for c in CASES]),
                timeout=STEP_TIMEOUT,
                what=f"every Placement's status to name step-{j}",
                interval=0.05,
            )
            got = decided(hub)
            differ = compare(j, {c: model[c][j] for c in CASES}, got)
            result.compared += len(CASES)
            result.matched += len(CASES) - len(differ)
            result.mismatches.extend(differ[: max(0, 10 - len(result.mismatches))])
        result.seconds_steps = time.monotonic() - stepped
    return result


__all__ = [
    "CASES",
    "SEGMENT_STEPS",
    "Case",
    "SegmentResult",
    "busiest_window",
    "compare",
    "decided",
    "hub_objects",
    "local_hub",
    "model_decisions",
    "on_group",
    "placement_object",
    "run_segment",
    "score_objects",
    "step_group",
    "step_seen",
]
