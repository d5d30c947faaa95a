"""`dynamic-scoring status`: the fleet from the hub, one cluster at a time, with what is wrong first.

Per managed cluster it shows the addon's health as OCM reports it on the ManagedClusterAddOn (the
klusterlet sets `Available` from the agent's health Lease; our manager sets `RegistrationApplied`
and `ManifestApplied`), and every AddOnPlacementScore our agent wrote there: each item's value,
when the agent last wrote it, how long until `validUntil`, and the agent's `ScoresUpToDate`
condition, whose reason names the failing stage (docs/agent.md).  The same renderer draws the live
view of `make demo`, so what a user sees in the demo is what this command prints.

A cluster without the addon enabled is listed, not counted as a problem: enabling it is a choice.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import click

from dynamic_scoring.agent.ports import STABILIZED_REASON
from dynamic_scoring.ctl.hub import hub_api, kubeconfig_option, list_all, unreachable
from dynamic_scoring.ctl.output import ExitCode, emit_json, output_option, terminal_safe
from dynamic_scoring.ctl.stopping import sigterm_interrupts
from dynamic_scoring.kube.api import KubeAPI, KubeError
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.resources import ADDON_PLACEMENT_SCORES, MANAGED_CLUSTER_ADDONS, MANAGED_CLUSTERS
from dynamic_scoring.kube.timestamps import parse_time
from dynamic_scoring.ocm.score_labels import score_selector

ADDON = "dynamic-scoring"
SCORE_NAME_ANNOTATION = "dynamic-scoring.open-cluster-management.io/score-name"
SCORE_CONDITION = "ScoresUpToDate"
# Conditions on the ManagedClusterAddOn that mean the addon is not working when they are False.
MUST_BE_TRUE = ("Available", "RegistrationApplied", "ManifestApplied")
MAX_ITEMS_SHOWN = 5
CLEAR = "\x1b[H\x1b[J"  # cursor home, clear to the end: a view redrawn in place


@dataclass(frozen=True)
class Condition:
    """The part of a status condition a person needs."""

    type: str
    status: str
    reason: str
    message: str

    @classmethod
    def of(cls, raw: JSON) -> Condition:
        """From a condition as the apiserver returns it."""
        return cls(
            str(raw.get("type", "")),
            str(raw.get("status", "")),
            str(raw.get("reason", "")),
            str(raw.get("message", "")),
        )

    def __str__(self) -> str:
        return f"{self.type}={self.status}" + (f" ({self.reason})" if self.reason else "")


@dataclass
class Score:
    """One AddOnPlacementScore our agent wrote in a cluster's namespace."""

    name: str  # the object's name
    score_name: str  # the DynamicScorer's score name (annotation), or the object's name
    items: list[tuple[str, int]]
    # the newest status write (managedFields: objects of older agents), else the condition's last change
    written: dt.datetime | None
    valid_until: dt.datetime | None
    condition: Condition | None

    def expires_in(self, now: dt.datetime) -> float | None:
        """Seconds until `validUntil` (negative once passed); None for a score that never expires."""
        return None if self.valid_until is None else (self.valid_until - now).total_seconds()

    @property
    def verdict(self) -> str:
        """The SCORER cell: ``ok``, ``held`` or the failing reason.

        ``held``: the scorer answered and some published values are held back by stabilization.
        """
        if self.condition is None:
            return "-"
        if self.condition.status != "True":
            return self.condition.reason
        return "held" if self.condition.reason == STABILIZED_REASON else "ok"

    def held(self) -> str | None:
        """Why some values are held back by stabilization (the agent's message), or None."""
        if (
            self.condition is not None
            and self.condition.status == "True"
            and self.condition.reason == STABILIZED_REASON
        ):
            return f"score {self.name}: {self.condition.message}"
        return None

    def problems(self, now: dt.datetime) -> list[str]:
        """What is wrong with this score now."""
        out = []
        left = self.expires_in(now)
        if left is not None and left < 0:
            out.append(f"score {self.name} expired {-left:.0f}s ago: Placement counts it as 0")
        if self.condition is not None and self.condition.status != "True":
            out.append(f"score {self.name} {self.condition}: {self.condition.message}".rstrip(": "))
        return out


@dataclass
class ClusterStatus:
    """One managed cluster as the hub sees it."""

    name: str
    enabled: bool
    conditions: list[Condition] = field(default_factory=list)
    scores: list[Score] = field(default_factory=list)
    known: bool = True  # False: an addon or scores in a namespace with no ManagedCluster

    def condition(self, kind: str) -> Condition | None:
        """The addon condition of this type, if set."""
        return next((c for c in self.conditions if c.type == kind), None)

    @property
    def health(self) -> str:
        """One word or two for the health column."""
        if not self.enabled:
            return "not enabled"
        degraded = self.condition("Degraded")
        if degraded is not None and degraded.status == "True":
            return "Degraded"
        for kind in MUST_BE_TRUE:
            cond = self.condition(kind)
            if cond is not None and cond.status != "True":
                if kind == "Available":
                    return "Unavailable" if cond.status == "False" else "Unknown"
                return f"{kind}={cond.status}"
        available = self.condition("Available")
        return "Available" if available is not None else "Pending"

    def addon_problems(self) -> list[str]:
        """What is wrong with the addon itself (not its scores)."""
        if not self.enabled:
            return []
        out = []
        if not self.known:
            out.append("no ManagedCluster of this name: the addon's namespace is orphaned")
        degraded = self.condition("Degraded")
        if degraded is not None and degraded.status == "True":
            out.append(f"addon {degraded}: {degraded.message}")
        for kind in MUST_BE_TRUE:
            cond = self.condition(kind)
            if cond is not None and cond.status != "True":
                out.append(f"addon {cond}: {cond.message}".rstrip(": "))
        if self.condition("Available") is None:
            out.append(
                "addon Available not reported yet (the klusterlet sets it once it sees the agent's Lease)"
            )
        return out

    def problems(self, now: dt.datetime) -> list[str]:
        """Everything wrong on this cluster, the addon's first."""
        return [*self.addon_problems(), *(p for s in self.scores for p in s.problems(now))]


@dataclass
class Fleet:
    """Every cluster the view covers, and the Placement decision the demo adds below it."""

    clusters: list[ClusterStatus]

    def problems(self, now: dt.datetime) -> list[tuple[str, str]]:
        """(cluster, problem) for every problem in the fleet."""
        return [(c.name, p) for c in self.clusters for p in c.problems(now)]


# ----------------------------------------------------------------------------- reading


def _written(aps: JSON, condition: JSON | None) -> dt.datetime | None:
    times = [
        parse_time(m.get("time"))
        for m in (aps.get("metadata") or {}).get("managedFields") or []
        if m.get("subresource") == "status"
    ]
    newest = max((t for t in times if t is not None), default=None)
    if newest is None and condition is not None:
        newest = parse_time(condition.get("lastTransitionTime"))
    return newest


def score_of(aps: JSON) -> Score:
    """An AddOnPlacementScore as the view needs it."""
    meta, status = aps.get("metadata") or {}, aps.get("status") or {}
    raw = next((c for c in status.get("conditions") or [] if c.get("type") == SCORE_CONDITION), None)
    name = str(meta.get("name", ""))
    return Score(
        name=name,
        score_name=str((meta.get("annotations") or {}).get(SCORE_NAME_ANNOTATION) or name),
        items=[(str(i.get("name", "")), int(i.get("value", 0))) for i in status.get("scores") or []],
        written=_written(aps, raw),
        valid_until=parse_time(status.get("validUntil")),
        condition=Condition.of(raw) if raw else None,
    )


def build_fleet(
    clusters: Iterable[JSON], addons: Iterable[JSON], scores: Iterable[JSON], only: Sequence[str] = ()
) -> Fleet:
    """The fleet from hub objects: ManagedClusters, our ManagedClusterAddOns and our agents' scores."""
    names = {str((c.get("metadata") or {}).get("name")) for c in clusters}
    by_ns: dict[str, ClusterStatus] = {n: ClusterStatus(name=n, enabled=False) for n in names}
    for mca in addons:
        ns = str((mca.get("metadata") or {}).get("namespace"))
        row = by_ns.setdefault(ns, ClusterStatus(name=ns, enabled=True, known=False))
        row.enabled = True
        row.conditions = [Condition.of(c) for c in (mca.get("status") or {}).get("conditions") or []]
    for aps in scores:
        ns = str((aps.get("metadata") or {}).get("namespace"))
        row = by_ns.setdefault(ns, ClusterStatus(name=ns, enabled=False, known=False))
        row.scores.append(score_of(aps))
    for row in by_ns.values():
        row.scores.sort(key=lambda s: s.name)
    wanted = set(only)
    return Fleet(sorted((r for n, r in by_ns.items() if not wanted or n in wanted), key=lambda r: r.name))


def read_fleet(api: KubeAPI, only: Sequence[str] = ()) -> Fleet:
    """Read the fleet from the hub now; raises `KubeError`, so a live view can show it and go on."""
    return build_fleet(
        list_all(api, MANAGED_CLUSTERS),
        list_all(api, MANAGED_CLUSTER_ADDONS, fieldSelector=f"metadata.name={ADDON}"),
        list_all(api, ADDON_PLACEMENT_SCORES, labelSelector=score_selector(ADDON)),
        only,
    )


# ----------------------------------------------------------------------------- rendering


def secs(value: float | None) -> str:
    """`12s`, `-3s` (passed), `4m`, or `-` when unknown."""
    if value is None:
        return "-"
    return f"{value:.0f}s" if abs(value) < 600 else f"{value / 60:.0f}m"


def _rows(c: ClusterStatus, now: dt.datetime) -> list[list[str]]:
    first = [c.name, c.health]
    if not c.scores:
        return [[*first, "-", "-", "-", "-", "-"]]
    rows = []
    for s in c.scores:
        items = s.items[:MAX_ITEMS_SHOWN] or [("(no items)", 0)]
        for i, (item, value) in enumerate(items):
            written = "-" if s.written is None else f"{secs((now - s.written).total_seconds())} ago"
            cond = "-" if s.condition is None else s.verdict
            show_value = "-" if not s.items else str(value)
            rows.append(
                [*first, item, show_value, written, secs(s.expires_in(now)), cond]
                if i == 0
                else ["", "", item, show_value, "", "", ""]
            )
            first = ["", ""]
        if len(s.items) > MAX_ITEMS_SHOWN:
            rows.append(["", "", f"... {len(s.items) - MAX_ITEMS_SHOWN} more", "", "", "", ""])
    return rows


def render(fleet: Fleet, now: dt.datetime, extra: Sequence[str] = ()) -> str:
    """The fleet view: a table, then every problem with its message (the `last error` of a cluster).

    `extra` lines go between the table and the problems; the demo puts the Placement's decision
    there.  Every value from the hub goes through `terminal_safe`, so no name or message can send
    the terminal an escape sequence.
    """
    head = ["CLUSTER", "ADDON", "SCORE", "VALUE", "WRITTEN", "EXPIRES", "SCORER"]
    rows = [head]
    for c in fleet.clusters:
        rows.extend([terminal_safe(cell) for cell in row] for row in _rows(c, now))
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    table = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    enabled = sum(c.enabled for c in fleet.clusters)
    summary = f"{len(fleet.clusters)} cluster(s), addon enabled on {enabled}   {now:%H:%M:%S}Z"
    problems = fleet.problems(now)
    tail = [f"  {terminal_safe(cluster)}: {terminal_safe(problem)}" for cluster, problem in problems]
    held = [(c.name, line) for c in fleet.clusters for s in c.scores if (line := s.held()) is not None]
    if held:  # not problems: the published values are what stabilization decided, on purpose
        extra = [*extra, "held by stabilization (published values lag the raw ones on purpose):"]
        extra += [f"  {cluster}: {line}" for cluster, line in held]
    extra = [terminal_safe(line) for line in extra]
    verdict = "healthy: every enabled cluster available, no score expired or failing"
    if problems:
        verdict = f"{len({c for c, _ in problems})} cluster(s) with problems:"
    return "\n".join([summary, "", *table, *([""] if extra else []), *extra, "", verdict, *tail])


def to_json(fleet: Fleet, now: dt.datetime) -> JSON:
    """The fleet as one JSON document."""

    def when(t: dt.datetime | None) -> str | None:
        return None if t is None else t.strftime("%Y-%m-%dT%H:%M:%SZ")

    return {
        "time": when(now),
        "healthy": not fleet.problems(now),
        "clusters": [
            {
                "name": c.name,
                "addonEnabled": c.enabled,
                "health": c.health,
                "conditions": [vars(x) for x in c.conditions],
                "scores": [
                    {
                        "name": s.name,
                        "scoreName": s.score_name,
                        "items": [{"name": n, "value": v} for n, v in s.items],
                        "written": when(s.written),
                        "ageSeconds": None
                        if s.written is None
                        else round((now - s.written).total_seconds(), 1),
                        "validUntil": when(s.valid_until),
                        "expiresInSeconds": None
                        if s.valid_until is None
                        else round(s.expires_in(now) or 0.0, 1),
                        "condition": None if s.condition is None else vars(s.condition),
                    }
                    for s in c.scores
                ],
                "problems": c.problems(now),
                "lastError": next(iter(c.problems(now)), None),
            }
            for c in fleet.clusters
        ],
    }


def watch(draw: Callable[[], str], interval: float) -> None:
    """Redraw in place every `interval` seconds until Ctrl-C or SIGTERM; a failed read is shown, not fatal."""
    with sigterm_interrupts():
        try:
            while True:
                sys.stdout.write(CLEAR + draw() + "\n")  # as is: click.echo strips escapes off a pipe
                sys.stdout.flush()
                time.sleep(interval)
        except KeyboardInterrupt:
            return


@click.command("status")
@click.option("--cluster", "clusters", multiple=True, help="Only this cluster (repeatable).")
@click.option("--watch", "watching", is_flag=True, help="Redraw in place until Ctrl-C or SIGTERM.")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.2),
    default=2.0,
    show_default=True,
    help="Seconds between redraws with --watch.",
)
@kubeconfig_option
@output_option
def status(
    clusters: tuple[str, ...], watching: bool, interval: float, kubeconfig: Path | None, output: str
) -> None:
    """The fleet from the hub: per cluster the addon's health, scores with age and expiry, last error.

    Exit 1 when an enabled cluster's addon is unhealthy or a score is expired or failing, 3 when
    the hub cannot be read.
    """
    if watching and output == "json":
        raise click.UsageError("--watch redraws text; use -o json without --watch")
    api = hub_api(kubeconfig)
    if watching:

        def draw() -> str:
            now = dt.datetime.now(dt.UTC)
            try:
                return render(read_fleet(api, clusters), now)
            except KubeError as exc:
                return f"{now:%H:%M:%S}Z  could not read the hub: {exc} (retrying every {interval:g}s)"

        watch(draw, interval)
        return
    try:
        fleet = read_fleet(api, clusters)
    except KubeError as exc:
        unreachable(exc, "read the fleet")
    now = dt.datetime.now(dt.UTC)
    if output == "json":
        emit_json(to_json(fleet, now))
    else:
        click.echo(render(fleet, now))
    if fleet.problems(now):
        raise SystemExit(int(ExitCode.FINDINGS))
