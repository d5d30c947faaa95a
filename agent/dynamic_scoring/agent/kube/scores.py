"""AddOnPlacementScores on the hub: the agent's output, written so Placement can trust it.

Scores go through the `status` subresource after the object exists (a create drops `status`,
which is how upstream lost the first cycle's scores).  A successful cycle writes the items,
`validUntil` and a condition; a failed one writes only the condition, so the last good scores
stay until they expire and are then ignored by Placement (the stale policy).

Writes that would change nothing are skipped while `validUntil` is far off, which keeps a fleet of
agents from rewriting identical objects every interval.  "Nothing" is judged against the object
as the hub holds it now, read before every decision: an APS deleted by hand, or with a forged item
edited into its status, is restored by the next cycle.  The read is of the object's metadata only;
when its `resourceVersion` is the one this agent's last write returned, the hub holds exactly what
was written, and the status is taken from that write instead of being read again (a 10,000-item
object is 0.65 MB, about 190 ms to read in full).  Any other version is read in full.

The status is replaced (`PUT` of the status subresource, with that `resourceVersion`), not
merge-patched: the apiserver merges a patch into the whole object first, which at 10,000 items
took 0.73 s against 0.44 s for a replacement.  A replacement that meets a newer version (409) reads
the object again and is decided again, once.

Every object the agent creates carries the labels `app.kubernetes.io/managed-by:
dynamic-scoring-agent` and `dynamic-scoring.open-cluster-management.io/addon: <addon>`, so
`list_owned` can find the ones left by scorers removed while the agent was down.

Objects carry no `managedFields`.  `status.scores` is a list keyed by `name`, so the apiserver's
field tracking records one entry per item: at 4,096 items it doubled the stored object (about
400 KB), made every status write take about three times as long (the merge of the field sets is
the apiserver's own CPU), and at 10,000 items pushed the object past etcd's request limit.  The
apiserver starts tracking on create and on server-side apply, never on an update of an object that
has none.  So right after creating an object the agent resets its tracking (`managedFields: [{}]`),
and it does the same once on any object found with some (written by an older agent, or applied by
hand).  Nobody
applies an AddOnPlacementScore with server-side apply: this agent is its only writer.

An object of the score's name that this addon's agent did not create (it lacks those labels) is
someone else's: another addon's score, or one a person made.  The agent leaves it exactly as it is
(no write, no relabel, no new owner, no delete) and fails the cycle with `ScoreNameTaken`, which the
hub reports on the DynamicScorer.  One exception, for a move from the upstream Go agent (which
labels nothing and sets no owner): with `adopt_unlabelled` (the agent's `--adopt-unlabelled-scores`,
rendered only when the hub admin starts the manager with the same flag) an object with no owner
and no addon label of ours is adopted with the first write: labelled, annotated and owned, so that
the hub reports it and the garbage collector removes it with the addon.

Each object is also owned by this cluster's ManagedClusterAddOn (read once, by name; the agent's hub
Role allows exactly that get), so the hub's garbage collector removes the scores when the addon is
disabled or uninstalled: the agent is gone by then and could not delete them itself.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass
from typing import Any

import msgspec

from dynamic_scoring.agent.errors import PublishError, ScoreNameTaken
from dynamic_scoring.agent.ports import (
    QUIET_REASONS,
    STABILIZED_REASON,
    PublishedScores,
    PublishRequest,
    ScoreItem,
)
from dynamic_scoring.kube.api import (
    MERGE_PATCH,
    PARTIAL_METADATA,
    Conflict,
    Forbidden,
    KubeAPI,
    KubeError,
    NotFound,
)
from dynamic_scoring.kube.resources import ADDON_PLACEMENT_SCORES, MANAGED_CLUSTER_ADDONS
from dynamic_scoring.kube.timestamps import format_time, parse_time
from dynamic_scoring.ocm.score_labels import adoptable, score_labels, score_selector

log = logging.getLogger(__name__)

SCORE_NAME_ANNOTATION = "dynamic-scoring.open-cluster-management.io/score-name"
RESET_MANAGED_FIELDS: list[dict[str, Any]] = [{}]
"""The value that tells the apiserver to drop an object's managedFields (and so stop tracking it)."""
OWNER_RETRY_SECONDS = 300.0
"""How long an unreadable ManagedClusterAddOn is not asked for again."""


@dataclass
class _Known:
    """What the object's status holds on the hub."""

    scores: list[dict[str, Any]] | None
    valid_until: str | None
    condition: dict[str, Any] | None
    owners: list[dict[str, Any]] | None = None
    exists: bool = False
    tracked: bool = False
    """The object has managedFields (see the module's docstring for why they go)."""
    resource_version: str = ""
    status: dict[str, Any] | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    uid: str = ""


@dataclass(frozen=True)
class _Written:
    """The status this agent last wrote to an object, and the version the write returned."""

    resource_version: str
    status: dict[str, Any]


def _same_condition(a: dict[str, Any] | None, b: dict[str, Any]) -> bool:
    """Whether writing condition ``b`` over ``a`` would tell a reader nothing new.

    The same type, status, reason and message; or, when either says ``Stabilized``, the same type and
    status with both reasons quiet (``Scored``/``Stabilized``): the held-back message names raw
    values and seconds held, which change every cycle, and writing them would cost a hub write a
    cycle for scores that did not change, which is what stabilization is there to save.
    """
    if a is None or any(a.get(k) != b.get(k) for k in ("type", "status")):
        return False
    reasons = {a.get("reason"), b.get("reason")}
    if STABILIZED_REASON in reasons and reasons <= QUIET_REASONS:
        return True
    return all(a.get(k) == b.get(k) for k in ("reason", "message"))


class KubeScorePublisher:
    """`agent.ports.ScorePublisher` writing AddOnPlacementScores in the cluster's hub namespace."""

    def __init__(
        self, api: KubeAPI, cluster_namespace: str, *, addon_name: str, adopt_unlabelled: bool = False
    ) -> None:
        self.api = api
        self.adopt_unlabelled = adopt_unlabelled
        self.namespace = cluster_namespace
        self.addon_name = addon_name
        self._owner: list[dict[str, Any]] | None = None
        self._owner_warned = False
        self._owner_retry_at = 0.0
        self._written: dict[str, _Written] = {}
        self._uids: dict[str, str] = {}
        """uid of each object of ours this agent has seen: its delete needs no read first."""

    async def _owner_references(self) -> list[dict[str, Any]] | None:
        """The ManagedClusterAddOn as owner, read once; None (no owner written) while it cannot be read."""
        if self._owner is not None or time.monotonic() < self._owner_retry_at:
            return self._owner
        path = MANAGED_CLUSTER_ADDONS.path(self.namespace, self.addon_name)
        try:
            mca = await self.api.arequest("GET", path)
        except KubeError as exc:
            # publish runs for every scorer every interval: ask again later, not on each cycle
            self._owner_retry_at = time.monotonic() + OWNER_RETRY_SECONDS
            if not self._owner_warned:
                self._owner_warned = True
                log.warning(
                    "ManagedClusterAddOn %s/%s not readable (%s): scores are written without an owner "
                    "until it is, and would outlive a disabled addon",
                    self.namespace,
                    self.addon_name,
                    exc,
                )
            return None
        self._owner = [
            {
                "apiVersion": "addon.open-cluster-management.io/v1alpha1",
                "kind": "ManagedClusterAddOn",
                "name": self.addon_name,
                "uid": mca["metadata"]["uid"],
            }
        ]
        return self._owner

    def _path(self, name: str = "", status: bool = False) -> str:
        return ADDON_PLACEMENT_SCORES.path(self.namespace, name or None, "status" if status else None)

    async def _read(self, name: str) -> _Known:
        """The object as the hub holds it now (all None when it does not exist).

        Its metadata is read first; its status is read only when this agent did not write the
        version the hub holds.
        """
        try:
            meta = (await self.api.arequest("GET", self._path(name), accept=PARTIAL_METADATA))["metadata"]
            version = str(meta.get("resourceVersion", ""))
            written = self._written.get(name)
            if written is not None and written.resource_version == version:
                status = written.status
            else:
                obj = await self.api.arequest("GET", self._path(name))
                meta = obj.get("metadata") or {}
                version = str(meta.get("resourceVersion", ""))
                status = obj.get("status") or {}
        except NotFound:
            self._written.pop(name, None)
            return _Known(None, None, None)
        cond = next((c for c in status.get("conditions") or [] if c.get("type") == "ScoresUpToDate"), None)
        return _Known(
            status.get("scores"),
            status.get("validUntil"),
            cond,
            meta.get("ownerReferences"),
            exists=True,
            tracked=bool(meta.get("managedFields")),
            resource_version=version,
            status=status,
            labels=meta.get("labels") or {},
            annotations=meta.get("annotations") or {},
            uid=str(meta.get("uid") or ""),
        )

    def _ours(self, labels: dict[str, str] | None) -> bool:
        return all((labels or {}).get(k) == v for k, v in score_labels(self.addon_name).items())

    def _taken(self, name: str, known: _Known) -> ScoreNameTaken | None:
        """Why the object `known` may not be written; None when it is ours or may be adopted."""
        if not known.exists or self._ours(known.labels):
            return None
        if self.adopt_unlabelled and adoptable(
            {"metadata": {"ownerReferences": known.owners, "labels": known.labels}}
        ):
            return None
        hint = (
            "it has an owner or another addon's label, so even --adopt-unlabelled-scores leaves it"
            if self.adopt_unlabelled
            else "choose another scoreName; if it is the upstream Go agent's score, see docs/migration.md"
        )
        return ScoreNameTaken(
            f"AddOnPlacementScore {self.namespace}/{name} exists and this addon's agent did not create it "
            f"(it lacks the labels {score_selector(self.addon_name)}); it is left untouched and nothing "
            f"is published for this scorer here: {hint}"
        )

    async def list_owned(self) -> list[str]:
        """Names of the APSs in this cluster's namespace that this addon's agent created."""
        selector = score_selector(self.addon_name)
        try:
            listed = await self.api.arequest("GET", self._path(), query={"labelSelector": selector})
        except KubeError as exc:
            raise PublishError(
                f"AddOnPlacementScores in {self.namespace} could not be listed: {exc}"
            ) from exc
        items = listed.get("items") or []
        for item in items:  # selected by our labels: ours
            self._uids[str(item["metadata"]["name"])] = str(item["metadata"].get("uid") or "")
        return sorted(str(i["metadata"]["name"]) for i in items)

    async def current(self, aps_name: str) -> PublishedScores | None:
        """The items and validUntil of ``aps_name`` when it is ours; None otherwise or unreadable.

        Items that are not a name and an integer are skipped: the object is ours, but this is a
        starting point for stabilization, not something to fail a cycle over.
        """
        try:
            known = await self._read(aps_name)
        except KubeError as exc:
            log.warning("AddOnPlacementScore %s/%s not readable (%s)", self.namespace, aps_name, exc)
            return None
        if not known.exists or not self._ours(known.labels):
            return None
        items = [
            ScoreItem(str(entry["name"]), int(entry["value"]))
            for entry in known.scores or []
            if isinstance(entry, dict)
            and isinstance(entry.get("name"), str)
            and isinstance(entry.get("value"), int)
            and not isinstance(entry.get("value"), bool)
        ]
        return PublishedScores(items, parse_time(known.valid_until))

    async def publish(self, result: PublishRequest) -> None:
        """Create the object if needed and write its status; skip writes that change nothing."""
        try:
            await self._publish(result, last=False)
        except (Conflict, NotFound):
            # The object changed between the read and the write (another writer, the hub's expiry
            # mark, a delete, or a racing create): read it and decide again, once.
            self._written.pop(result.aps_name, None)
            await self._publish(result, last=True)

    async def _publish(self, result: PublishRequest, *, last: bool) -> None:
        name = result.aps_name
        where = f"AddOnPlacementScore {self.namespace}/{name}"
        now = dt.datetime.now(dt.UTC)
        try:
            known = await self._read(name)
        except Forbidden as exc:
            raise PublishError(
                f"{where} could not be read (403 Forbidden): the agent's hub Role does not name it. "
                "Another owner's AddOnPlacementScore holds this name (the DynamicScorer's status "
                "says ScoreNameTaken), or the hub has not granted a new scorer's name yet"
            ) from exc
        except KubeError as exc:
            raise PublishError(f"{where} could not be read: {exc}") from exc
        taken = self._taken(name, known)
        if taken is not None:
            raise taken
        if known.exists and self._ours(known.labels) and known.uid:
            self._uids[name] = known.uid
        try:
            owners = await self._owner_references()
            meta: dict[str, Any] = {}
            if known.exists and owners is not None and known.owners != owners:
                # written before the owner was known (or by an older agent): adopt it
                meta["ownerReferences"] = owners
            if known.exists:
                # adopted (the upstream Go agent labels nothing, and the admin opted in): mark it
                # as ours, or the hub, which watches only labelled scores, never sees it
                labels = {
                    k: v for k, v in score_labels(self.addon_name).items() if (known.labels or {}).get(k) != v
                }
                if labels:
                    meta["labels"] = labels
                if (known.annotations or {}).get(SCORE_NAME_ANNOTATION) != result.score_name:
                    meta["annotations"] = {SCORE_NAME_ANNOTATION: result.score_name}
            if known.tracked:
                meta["managedFields"] = RESET_MANAGED_FIELDS
            if meta:
                # The object read above, and no other: a score deleted and re-created by another
                # writer since must not be relabelled as ours (the apiserver answers 409 instead).
                meta.update(
                    {k: v for k, v in (("uid", known.uid), ("resourceVersion", known.resource_version)) if v}
                )
                patched = await self.api.arequest(
                    "PATCH", self._path(name), body={"metadata": meta}, content_type=MERGE_PATCH
                )
                known.resource_version = str(patched["metadata"]["resourceVersion"])
        except KubeError as exc:
            raise PublishError(f"{where} could not be updated: {exc}") from exc
        c = result.condition
        condition: dict[str, Any] = {
            "type": c.type,
            "status": c.status,
            "reason": c.reason,
            "message": c.message[:1024],
            "lastTransitionTime": format_time(now),
        }
        if known.condition is not None and known.condition.get("status") == c.status:
            condition["lastTransitionTime"] = known.condition.get("lastTransitionTime") or format_time(now)
        patch: dict[str, Any] = {"conditions": [condition]}
        if result.items is not None:
            patch["scores"] = [{"name": i.name, "value": i.value} for i in result.items]
            if result.valid_until is not None:
                patch["validUntil"] = format_time(result.valid_until)
        if self._unchanged(known, patch, result, now):
            log.debug("%s unchanged and far from expiry; write skipped", where)
            return
        # The whole status: a failed cycle keeps the last good scores and their expiry.
        status = {**(known.status or {}), **patch}
        for key in ("scores", "validUntil"):
            if status.get(key) is None:
                status.pop(key, None)
        try:
            await self._write(name, result.score_name, status, known, owners)
        except KubeError as exc:
            if not last and isinstance(exc, Conflict | NotFound):
                raise
            raise PublishError(f"{where} could not be written: {exc}") from exc

    @staticmethod
    def _unchanged(known: _Known, patch: dict[str, Any], result: PublishRequest, now: dt.datetime) -> bool:
        if not _same_condition(known.condition, patch["conditions"][0]):
            return False
        if result.items is None:
            return True
        if known.scores != patch["scores"] or result.valid_until is None:
            return False
        stored = parse_time(known.valid_until or "")
        if stored is None:
            return False
        if stored > result.valid_until:  # later than anything we wrote: edited on the hub
            return False
        remaining = (stored - now).total_seconds()
        window = (result.valid_until - now).total_seconds()
        return remaining > max(window / 2, result.interval_seconds + 15)

    async def _write(
        self,
        name: str,
        score_name: str,
        status: dict[str, Any],
        known: _Known,
        owners: list[dict[str, Any]] | None = None,
    ) -> None:
        version = known.resource_version
        if not known.exists:
            body = {
                "apiVersion": "cluster.open-cluster-management.io/v1alpha1",
                "kind": "AddOnPlacementScore",
                "metadata": {
                    "name": name,
                    "namespace": self.namespace,
                    "labels": score_labels(self.addon_name),
                    "annotations": {SCORE_NAME_ANNOTATION: score_name},
                    **({"ownerReferences": owners} if owners is not None else {}),
                },
            }
            # Conflict (AlreadyExists): created meanwhile by a racing write; `publish` decides again.
            created = await self.api.arequest("POST", self._path(), body=body)
            self._uids[name] = str(created["metadata"].get("uid") or "")
            # A create records the fields it sets (labels, annotation, owner); once they are
            # dropped, the status writes that follow are not tracked either.
            reset = await self.api.arequest(
                "PATCH",
                self._path(name),
                body={"metadata": {"managedFields": RESET_MANAGED_FIELDS}},
                content_type=MERGE_PATCH,
            )
            version = str(reset["metadata"]["resourceVersion"])
        body = {
            "apiVersion": "cluster.open-cluster-management.io/v1alpha1",
            "kind": "AddOnPlacementScore",
            "metadata": {"name": name, "namespace": self.namespace, "resourceVersion": version},
            "status": status,
        }
        # Encoded by msgspec and sent as bytes: a 10,000-item status is about 0.65 MB of JSON.  The
        # answer is asked for as metadata only: the resourceVersion is all this agent reads from
        # it, and the apiserver would otherwise encode, and this agent decode, the whole object.
        written = await self.api.arequest(
            "PUT", self._path(name, status=True), body=msgspec.json.encode(body), accept=PARTIAL_METADATA
        )
        self._written[name] = _Written(str(written["metadata"]["resourceVersion"]), status)

    async def remove(self, aps_name: str) -> None:
        """Delete the object if it is ours; a missing one is fine (a retried delete went through).

        Someone else's object of that name (see `ScoreNameTaken`) is left alone.  The delete is
        conditional on the uid of the object this agent knows as its own (from its create, its
        reads or its start-up list; else read now), so an object replaced in between survives: the
        delete then meets a conflict, and the next try reads the object again.
        """
        self._written.pop(aps_name, None)
        where = f"AddOnPlacementScore {self.namespace}/{aps_name}"
        uid = self._uids.get(aps_name)
        try:
            if not uid:
                try:
                    meta = (await self.api.arequest("GET", self._path(aps_name), accept=PARTIAL_METADATA))[
                        "metadata"
                    ]
                except Forbidden:
                    # The hub's Role names every score of ours that exists: one it does not name is
                    # another owner's (or none at all), so there is nothing of ours to delete.
                    log.info("%s is not this agent's to read; not deleted", where)
                    return
                if not self._ours(meta.get("labels")):
                    log.info("%s was not created by this addon's agent; not deleted", where)
                    return
                uid = str(meta.get("uid") or "")
            options = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}
            await self.api.arequest("DELETE", self._path(aps_name), body=options)
            self._uids.pop(aps_name, None)
        except NotFound:
            self._uids.pop(aps_name, None)
            return
        except KubeError as exc:
            if isinstance(exc, Conflict):
                self._uids.pop(aps_name, None)  # not the object we knew: read it again next time
            raise PublishError(f"{where} could not be deleted: {exc}") from exc
