"""What the agents report back, summarised per cluster for a DynamicScorer's ``status.clusters``.

Errors an agent meets at run time (bad PromQL, a scorer answering garbage, a missing Secret) are written
by that agent as the ``ScoresUpToDate`` condition of the AddOnPlacementScore it publishes on the hub,
in the cluster's namespace.  Upstream had no such path: errors lived in agent logs only.  The
hub reads those objects and folds them into the scorer's status, so ``kubectl describe ds NAME`` says
which clusters fail and why.

A cluster's report is:

* the agent's condition, when the AddOnPlacementScore exists, belongs to this score name (annotation
  ``dynamic-scoring.open-cluster-management.io/score-name``) and has not expired;
* ``False`` / ``ScoresExpired`` when ``validUntil`` has passed: the agent stopped publishing (it may be
  down), and Placement already ignores the scores;
* ``True`` / ``ScoresWithoutCondition`` when it holds scores but no condition: an agent that writes
  scores only (the upstream Go agent, on a cluster whose ``AgentReplicas`` is 0);
* ``Unknown`` / ``NoReportYet`` when no AddOnPlacementScore exists yet (a new scorer, or a destination of
  ``None``, which publishes nothing);
* ``False`` / ``ScoreNameTaken`` when an AddOnPlacementScore of that name exists that this addon did
  not create (another addon's, or one made by hand): the agent leaves it alone and publishes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from dynamic_scoring.kube.timestamps import parse_time

SCORE_NAME_ANNOTATION = "dynamic-scoring.open-cluster-management.io/score-name"
AGENT_CONDITION = "ScoresUpToDate"
MAX_MESSAGE = 512


@dataclass(frozen=True)
class ClusterReport:
    """One entry of ``status.clusters``."""

    cluster: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str
    last_update: str | None = None

    def to_status(self) -> dict[str, Any]:
        """The JSON entry for ``status.clusters`` (key ``clusterName``)."""
        entry: dict[str, Any] = {
            "clusterName": self.cluster,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
        }
        if self.last_update:
            entry["lastUpdateTime"] = self.last_update
        return entry


def _taken(cluster: str, other: Mapping[str, Any]) -> ClusterReport:
    meta = other.get("metadata") or {}
    owners = ", ".join(f"{o.get('kind')}/{o.get('name')}" for o in meta.get("ownerReferences") or [])
    return ClusterReport(
        cluster,
        "False",
        "ScoreNameTaken",
        f"AddOnPlacementScore {cluster}/{meta.get('name')} exists and this addon did not create it "
        f"(owner: {owners or 'none'}); it is left untouched and nothing is published on this cluster. "
        "Choose another scoreName; if it is the upstream Go agent's score, see docs/migration.md",
    )


def _report(
    cluster: str,
    score_name: str,
    aps: Mapping[str, Any] | None,
    now: datetime,
    taken: Mapping[str, Any] | None = None,
) -> ClusterReport:
    if aps is None and taken is not None:
        return _taken(cluster, taken)
    if aps is None:
        return ClusterReport(
            cluster, "Unknown", "NoReportYet", "no AddOnPlacementScore from this cluster's agent yet"
        )
    owner = ((aps.get("metadata") or {}).get("annotations") or {}).get(SCORE_NAME_ANNOTATION)
    if owner is not None and owner != score_name:
        return ClusterReport(
            cluster, "Unknown", "NotOurs", f"the AddOnPlacementScore belongs to score name {owner!r}"
        )
    status = aps.get("status") or {}
    cond = next((c for c in status.get("conditions") or [] if c.get("type") == AGENT_CONDITION), None)
    until = parse_time(status.get("validUntil"))
    if until is not None and until <= now:
        stamp = status.get("validUntil")
        return ClusterReport(
            cluster,
            "False",
            "ScoresExpired",
            f"the scores expired at {stamp}; the agent has not published since (is it running?)",
            stamp,
        )
    if cond is None:
        scores = status.get("scores") or []
        if scores:
            # The upstream Go agent writes scores and nothing else: no condition, no validUntil.
            return ClusterReport(
                cluster,
                "True",
                "ScoresWithoutCondition",
                f"{len(scores)} score(s) published by an agent that reports no condition "
                "(the upstream Go agent writes scores only); its failures show in its own logs",
            )
        return ClusterReport(cluster, "Unknown", "NoReportYet", "the agent has not reported a condition yet")
    value = cond.get("status")
    state: Literal["True", "False", "Unknown"] = value if value in ("True", "False") else "Unknown"
    message = str(cond.get("message") or "")[:MAX_MESSAGE]
    return ClusterReport(
        cluster, state, str(cond.get("reason") or "Unknown"), message, cond.get("lastTransitionTime")
    )


def cluster_reports(
    score_name: str,
    clusters: Sequence[str],
    aps_by_cluster: Mapping[str, Mapping[str, Any]],
    now: datetime,
    taken_by_cluster: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[ClusterReport]:
    """One report per cluster the scorer is distributed to, sorted by cluster name.

    ``aps_by_cluster`` holds the AddOnPlacementScore named after this score (sanitised) in each cluster's
    namespace, where our agent wrote it; ``taken_by_cluster`` the object of that name another owner
    created, where one exists.
    """
    taken = taken_by_cluster or {}
    return [_report(c, score_name, aps_by_cluster.get(c), now, taken.get(c)) for c in sorted(clusters)]


def reports_message(reports: Sequence[ClusterReport], limit: int = 3) -> tuple[bool, str]:
    """Whether any cluster fails, and one line naming the failing clusters and their reasons."""
    failing = [r for r in reports if r.status == "False"]
    if not failing:
        scoring = sum(1 for r in reports if r.status == "True")
        return False, f"scoring on {scoring} of {len(reports)} cluster(s)"
    shown = "; ".join(f"{r.cluster}: {r.reason}: {r.message}" for r in failing[:limit])
    more = f"; and {len(failing) - limit} more" if len(failing) > limit else ""
    return True, f"failing on {len(failing)} of {len(reports)} cluster(s): {shown}{more}"


__all__ = ["AGENT_CONDITION", "SCORE_NAME_ANNOTATION", "ClusterReport", "cluster_reports", "reports_message"]
