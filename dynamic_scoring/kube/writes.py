"""Writes made only on difference, so a resync of a converged world sends nothing.

A controller states the object it wants (`desired`) and passes the object as its cache sees it
(`current`).  `Writer.ensure` compares only the fields `desired` names, because the apiserver and
other controllers add fields of their own (defaults, managedFields, finalizers, other owners'
labels); a field missing from `desired` is none of our business.

Status is shared with other writers (OCM's addon-manager, the klusterlet), so `patch_status`
always works from a fresh GET, sends a merge patch carrying `uid` and `resourceVersion` (the
apiserver answers 409 if anyone wrote in between), and recomputes on 409.

`ensure` patches carry the `resourceVersion` of the object they were computed from, too: a patch
computed from a cache that is behind (our own previous write not seen yet, or a change by another
writer, such as a new leader) is refused with 409 instead of applied, and `ensure` compares once
more with a fresh GET.  So a stale view never overwrites a newer one, and a cache that is merely
behind costs a read, not a redundant write.

Ownership: a name is not an object.  Between a caller's read and our write, the object it found
ours can be deleted and another writer's created under the same name.  So every write and delete
that works on an object states which object it means (its `uid` and `resourceVersion` go with the
request as preconditions, and the apiserver answers 409 for any other), and every object the
writer reads for itself (after a 409, or a create that met an existing object) must pass the
caller's `owns` test before it is patched or deleted.  One that fails it is another writer's: an
`ensure` raises `NotOurs` (a `Conflict`, so callers that retry a conflict on their next pass
already cope), a `delete` answers False, and neither changes it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from dynamic_scoring.kube.api import APPLY_PATCH, MERGE_PATCH, Conflict, KubeAPI, KubeError, NotFound
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.metrics import ControllerMetrics
from dynamic_scoring.kube.resources import EVENTS, Resource

log = logging.getLogger(__name__)

_MISSING: Any = object()
#: Metadata fields a controller may own on an object it writes; the rest belong to the apiserver.
OWNED_METADATA = ("labels", "annotations", "ownerReferences")


Owns = Callable[[JSON], bool]
"""A caller's test of whether an object is its own to write or delete.

The same notion the caller used on the object it read (the labels its informer selects on, an
owner, an annotation naming what it was written for), applied again by the writer to an object
it had to read itself, because the one the caller checked may have been replaced since.
"""


class NotOurs(Conflict):
    """The name is held by an object the caller's `owns` refuses: it was left as it is.

    A `Conflict` (409) because that is what it is to a caller: someone else wrote meanwhile.  A
    controller that retries conflicts reads again on its next pass and reports what it finds there.
    """

    def __init__(self, resource: Resource, obj: JSON) -> None:
        meta = obj.get("metadata") or {}
        where = f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else meta.get("name")
        super().__init__(
            409,
            "NotOurs",
            f"{resource.kind} {where} (uid {meta.get('uid')}) is not ours: it replaced the object we "
            "read, or was made by another writer; it was left as it is",
        )


def labelled(labels: Mapping[str, str]) -> Owns:
    """`Owns` for objects carrying each of `labels`: the test a caller's informer selector makes."""
    wanted = dict(labels)

    def owns(obj: JSON) -> bool:
        have = (obj.get("metadata") or {}).get("labels") or {}
        return all(have.get(k) == v for k, v in wanted.items())

    return owns


def merge_patch(current: JSON, desired: JSON) -> JSON | None:
    """The smallest JSON merge patch (RFC 7386) that makes `current` agree with `desired`.

    Only keys of `desired` are compared: objects recursively, lists and scalars whole (a merge
    patch cannot address list items).  A `None` in `desired` means "absent".  Returns None when
    nothing differs, which is how a no-op resync writes nothing.
    """
    patch: JSON = {}
    for key, want in desired.items():
        have = current.get(key, _MISSING)
        if want is None:
            if have is not _MISSING and have is not None:
                patch[key] = None
        elif isinstance(want, dict):
            sub = merge_patch(have if isinstance(have, dict) else {}, want)
            if sub is not None:
                patch[key] = sub
            elif have is not _MISSING and not isinstance(have, dict):
                patch[key] = want  # a scalar or list where we want an object
            # an empty object where the field is absent is no difference: the apiserver
            # drops empty maps, and insisting on one would patch on every resync
        elif have is _MISSING or have != want:
            patch[key] = want
    return patch or None


def owned_fields(desired: JSON) -> JSON:
    """The part of `desired` that `ensure` compares and writes."""
    wanted = {k: v for k, v in desired.items() if k not in ("metadata", "apiVersion", "kind", "status")}
    meta = desired.get("metadata") or {}
    owned_meta = {k: meta[k] for k in OWNED_METADATA if k in meta}
    if owned_meta:
        wanted["metadata"] = owned_meta
    return wanted


def _guarded(patch: JSON, current: JSON) -> JSON:
    """`patch` made conditional on `current` being the object's latest version (409 otherwise).

    The `uid` and `resourceVersion` of `current` go into the patch's metadata, which the apiserver
    treats as preconditions: an object changed or re-created since is not patched.
    """
    return {**patch, "metadata": {**(patch.get("metadata") or {}), **_preconditions(current)}}


def _preconditions(obj: JSON) -> JSON:
    """The `uid` and `resourceVersion` of `obj`: what a write or delete names as the object it means."""
    meta = obj.get("metadata") or {}
    return {k: meta[k] for k in ("uid", "resourceVersion") if meta.get(k)}


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Writer:
    """One controller's writes, each counted in `dynamic_scoring_controller_writes_total`."""

    def __init__(
        self,
        api: KubeAPI,
        controller: str,
        metrics: ControllerMetrics | None = None,
        *,
        component: str = "dynamic-scoring-addon",
    ) -> None:
        self.api = api
        self.controller = controller
        self.metrics = metrics if metrics is not None else ControllerMetrics()
        self.component = component

    def _call(self, verb: str, resource: Resource, method: str, path: str, **kw: Any) -> JSON:
        try:
            result = self.api.request(method, path, **kw)
        except KubeError:
            self.metrics.write_failed(self.controller, verb, resource.name)
            raise
        self.metrics.wrote(self.controller, verb, resource.name)
        return result

    def create(self, resource: Resource, desired: JSON) -> JSON:
        """Create `desired`; `Conflict` when an object of that name exists already.

        For objects whose name is not ours alone (a cluster-scoped name another writer may hold):
        unlike `ensure`, an existing object is never compared and patched.
        """
        meta = desired.get("metadata") or {}
        namespace = meta.get("namespace") if resource.namespaced else None
        body = {**desired, "apiVersion": resource.api_version, "kind": resource.kind}
        return self._call("create", resource, "POST", resource.path(namespace), body=body)

    def _read_owned(self, resource: Resource, namespace: str | None, name: str, owns: Owns) -> JSON:
        """The object of that name as the apiserver now holds it, if `owns` says it is ours.

        `NotFound` when there is none; `NotOurs` (logged, naming the object) when it is another's.
        """
        obj = self.api.request("GET", resource.path(namespace, name))
        if not owns(obj):
            refused = NotOurs(resource, obj)
            log.warning("%s", refused.message, extra={"controller": self.controller})
            raise refused
        return obj

    def ensure(self, resource: Resource, desired: JSON, current: JSON | None, *, owns: Owns) -> JSON:
        """Create `desired`, or merge-patch the fields of it that differ from `current`.

        `current` is the object as the caller read it and found its own; `owns` is the caller's
        test for that, applied to any object the writer reads itself.  Sends nothing when nothing
        differs.  The patch carries `current`'s uid and resourceVersion, so a replaced or changed
        object is refused (409) rather than overwritten; the writer then reads it again and patches
        only if `owns` still holds.  A create that meets an existing object (the cache was behind)
        likewise reads it and patches on difference only if it is ours.

        Raises:
            NotOurs: the name is held by an object `owns` refuses; nothing was written to it.
        """
        meta = desired.get("metadata") or {}
        name = meta.get("name")
        namespace = meta.get("namespace") if resource.namespaced else None
        if not name or (resource.namespaced and not namespace):
            raise ValueError(f"desired {resource.kind} needs metadata.name (and a namespace)")
        if current is None:
            try:
                return self.create(resource, desired)
            except Conflict:
                current = self._read_owned(resource, namespace, name, owns)
                log.info("%s %s existed already; comparing instead", resource.kind, name)
        wanted = owned_fields(desired)
        patch = merge_patch(current, wanted)
        if patch is None:
            return current
        path = resource.path(namespace, name)
        try:
            result = self._call(
                "patch", resource, "PATCH", path, body=_guarded(patch, current), content_type=MERGE_PATCH
            )
        except Conflict:
            # changed, or deleted and replaced, since it was read: the new one is ours only if
            # `owns` says so, never merely because it has the name
            current = self._read_owned(resource, namespace, name, owns)
            patch = merge_patch(current, wanted)
            log.debug("%s %s changed since it was read; compared again: %s", resource.kind, name, patch)
            if patch is None:
                return current
            result = self._call(
                "patch", resource, "PATCH", path, body=_guarded(patch, current), content_type=MERGE_PATCH
            )
        left = merge_patch(result, wanted)
        if left is not None:
            # the apiserver normalised a value (e.g. "1000m" -> "1"): every resync would patch again
            log.warning(
                "%s %s/%s does not converge; the apiserver rewrites fields %s: write them in canonical form",
                resource.kind,
                namespace or "",
                name,
                sorted(left),
            )
        return result

    def delete(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        *,
        owns: Owns,
        current: JSON | None = None,
        attempts: int = 3,
    ) -> bool:
        """Delete our object of that name (dependents in the background); True if it was deleted.

        `current` is the object as the caller read it and found its own (without it, the writer
        reads it and applies `owns`).  The delete carries its uid and resourceVersion as
        preconditions, so the apiserver refuses (409) to delete an object that replaced it or
        changed since; the writer then reads it again and deletes only what `owns` still accepts.
        False when nothing of ours is there: it is gone, or the name is now another's (logged,
        and left as it is).  `Conflict` when the object kept changing for `attempts` tries.  (A
        `current` without a uid, which only a hand-made object lacks, is named by what it has.)
        """
        path = resource.path(namespace, name)
        obj = current
        for attempt in range(1, attempts + 1):
            if obj is None:
                try:
                    obj = self._read_owned(resource, namespace, name, owns)
                except (NotFound, NotOurs):
                    return False  # gone, or the name is another's now (logged): nothing of ours to delete
            body: JSON = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
            preconditions = _preconditions(obj)
            if preconditions:
                body["preconditions"] = preconditions
            try:
                self._call("delete", resource, "DELETE", path, body=body)
            except NotFound:
                return False
            except Conflict:
                if attempt == attempts:
                    raise
                log.debug(
                    "%s %s changed since it was read; reading it again before a delete", resource.kind, name
                )
                obj = None
                continue
            return True
        return False  # attempts < 1

    def patch_status(
        self,
        resource: Resource,
        namespace: str | None,
        name: str,
        compute: Callable[[JSON], JSON | None],
        *,
        current: JSON | None = None,
        attempts: int = 5,
        owns: Owns | None = None,
        field_manager: str | None = None,
    ) -> bool:
        """Merge-patch the status fields `compute` returns, on the latest object; True if it wrote.

        `compute(obj)` gets the object and returns the status merge patch (only the fields we own:
        a list such as `conditions` must be the full list as read, with only our entries changed)
        or None when nothing differs.  The first attempt works from `current` (the cache's object)
        when given, else from a GET; the patch is conditional on that object's resourceVersion, so
        on 409 (someone wrote since, or the cache was behind) `compute` runs again on a fresh GET.
        A controller whose cache is current thus writes status with one request instead of two.

        `owns`, for status this controller writes only on objects it owns: every object read
        fresh must pass it (`NotOurs` otherwise), so a replacement's status is never written.
        Without it, status is written on whatever holds the name (an object the caller reports on,
        such as a ManagedClusterAddOn, is not "ours" but still has a status part that is).

        `field_manager` names the writer in the object's managedFields, for a field whose owner
        other controllers read (Kueue's nominations tell an outside dispatcher's from its own).
        """
        path = resource.path(namespace, name)
        for attempt in range(1, attempts + 1):
            if attempt == 1 and current is not None:
                obj = current
            elif owns is not None:
                obj = self._read_owned(resource, namespace, name, owns)
            else:
                obj = self.api.request("GET", path)
            patch = compute(obj)
            if patch is None:
                return False
            body = _guarded({"status": patch}, obj)
            try:
                self._call(
                    "status",
                    resource,
                    "PATCH",
                    resource.path(namespace, name, "status"),
                    body=body,
                    content_type=MERGE_PATCH,
                    query={"fieldManager": field_manager} if field_manager else None,
                )
            except Conflict:
                if attempt == attempts:
                    raise
                log.debug("status of %s %s changed under us; retrying (%d)", resource.kind, name, attempt)
                continue
            if log.isEnabledFor(logging.DEBUG):  # sorting the fields is not free on every write
                log.debug(
                    "wrote status fields %s of %s %s/%s", sorted(patch), resource.kind, namespace or "", name
                )
            return True
        return False  # attempts < 1

    def apply_status(
        self, resource: Resource, namespace: str | None, name: str, status: JSON, *, field_manager: str
    ) -> JSON:
        """Server-side apply of `status` (only the fields it names) as `field_manager`.

        For an entry of a list another controller writes too, keyed by the apiserver (a condition of
        our own type among Kueue's): apply merges it by key, where a merge patch would replace the
        whole list.  Not forced: a field another manager holds is a `Conflict`, left to its owner.
        """
        body = {
            "apiVersion": resource.api_version,
            "kind": resource.kind,
            "metadata": {"name": name, **({"namespace": namespace} if namespace else {})},
            "status": status,
        }
        return self._call(
            "status",
            resource,
            "PATCH",
            resource.path(namespace, name, "status"),
            body=body,
            content_type=APPLY_PATCH,
            query={"fieldManager": field_manager},
        )

    def event(self, involved: JSON, type_: str, reason: str, message: str) -> None:
        """Record a core/v1 Event on `involved`; a repeat of the same reason and message counts up.

        Events are advice to a human, so a failure to record one is logged, never raised.
        """
        meta = involved.get("metadata", {})
        namespace = meta.get("namespace") or "default"  # where kubectl looks for cluster-scoped objects
        digest = hashlib.sha256(f"{meta.get('uid')}|{type_}|{reason}|{message}".encode()).hexdigest()
        name = f"{meta.get('name')}.{digest[:16]}"
        now = _now()
        body: JSON = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {
                "apiVersion": involved.get("apiVersion"),
                "kind": involved.get("kind"),
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "type": type_,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            try:
                self._call("event", EVENTS, "POST", EVENTS.path(namespace), body=body)
            except Conflict:
                old = self.api.request("GET", EVENTS.path(namespace, name))
                patch = {"count": int(old.get("count") or 1) + 1, "lastTimestamp": now}
                self._call(
                    "event",
                    EVENTS,
                    "PATCH",
                    EVENTS.path(namespace, name),
                    body=patch,
                    content_type=MERGE_PATCH,
                )
        except KubeError as exc:
            log.warning("could not record Event %s on %s/%s: %s", reason, namespace, meta.get("name"), exc)
