"""An in-memory apiserver keeping the rules a writer's ownership checks rest on, and no others.

Names, uids, resourceVersions, and the preconditions of a write or a delete: a create of a taken
name is refused (409 AlreadyExists); a merge patch whose metadata names a `uid` or
`resourceVersion` the stored object does not have is refused (409), as the real apiserver does;
a DELETE whose `DeleteOptions.preconditions` do not match is refused (409).  A test can make
another writer act between our read and our write (`before`), which a real apiserver only allows
by luck of timing.  Defaulting, admission and validation are the integration tier's.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from typing import Any

from dynamic_scoring.kube.api import Conflict, NotFound
from dynamic_scoring.kube.jsontypes import JSON


def merged(target: Any, patch: Any) -> Any:
    """RFC 7386: `patch` applied to `target`."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merged(out.get(key), value)
    return out


class FakeApiserver:
    """Stands in for `KubeAPI.request`: one store of objects by path, and a log of requests."""

    def __init__(self) -> None:
        self.objects: dict[str, JSON] = {}
        self.requests: list[tuple[str, str, Any]] = []
        self.refused: list[tuple[str, str]] = []
        self._hooks: list[tuple[str, Callable[[], None]]] = []
        self._versions = itertools.count(100)
        self._uids = itertools.count(1)

    # -- what another writer does ---------------------------------------------------------------

    def before(self, method: str, action: Callable[[], None]) -> None:
        """Run `action` once, just before the next `method` request is served."""
        self._hooks.append((method, action))

    def put(self, path: str, obj: JSON) -> JSON:
        """Store `obj` at `path` as a new object (a fresh uid and resourceVersion); it is returned."""
        stored = copy.deepcopy(obj)
        meta = stored.setdefault("metadata", {})
        meta["uid"] = f"uid-{next(self._uids)}"
        meta["resourceVersion"] = str(next(self._versions))
        self.objects[path] = stored
        return copy.deepcopy(stored)

    def edit(self, path: str, patch: JSON) -> None:
        """Merge `patch` into the object at `path` (same uid, a new resourceVersion)."""
        obj = merged(self.objects[path], patch)
        obj["metadata"]["resourceVersion"] = str(next(self._versions))
        self.objects[path] = obj

    def replace(self, path: str, obj: JSON) -> None:
        """Delete the object at `path` and create `obj` under the same name: a new uid."""
        del self.objects[path]
        self.put(path, obj)

    def sent(self, method: str) -> list[str]:
        """The paths of the `method` requests sent, refused or not."""
        return [p for m, p, _ in self.requests if m == method]

    # -- the API --------------------------------------------------------------------------------

    def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> JSON:
        self.requests.append((method, path, copy.deepcopy(body)))
        for i, (hooked, action) in enumerate(self._hooks):
            if hooked == method:
                del self._hooks[i]
                action()
                break
        try:
            return self._serve(method, path, body)
        except Conflict:
            self.refused.append((method, path))
            raise

    def _serve(self, method: str, path: str, body: Any) -> JSON:
        if method == "POST":
            target = f"{path}/{body['metadata']['name']}"
            if target in self.objects:
                raise Conflict(409, "AlreadyExists", f"{target} already exists")
            return self.put(target, body)
        status = path.endswith("/status")
        target = path.removesuffix("/status") if status else path
        if target not in self.objects:
            raise NotFound(404, "NotFound", f"{target} not found")
        obj = self.objects[target]
        meta = obj["metadata"]
        if method == "GET":
            return copy.deepcopy(obj)
        if method == "DELETE":
            wanted = (body or {}).get("preconditions") or {}
            for key in ("uid", "resourceVersion"):
                if key in wanted and wanted[key] != meta[key]:
                    raise Conflict(
                        409, "Conflict", f"Precondition failed: {key} {wanted[key]} != {meta[key]}"
                    )
            del self.objects[target]
            return {"kind": "Status", "status": "Success"}
        if method == "PATCH":
            named = (body or {}).get("metadata") or {}
            for key in ("resourceVersion", "uid"):
                if key in named and named[key] != meta[key]:
                    raise Conflict(409, "Conflict", f"the object has been modified ({key})")
            patch = copy.deepcopy(body)
            if status:  # the status subresource changes status alone
                patch = {"status": patch.get("status")}
            else:
                patch.pop("status", None)
                for key in ("uid", "resourceVersion"):
                    patch.get("metadata", {}).pop(key, None)
            self.edit(target, patch)
            return copy.deepcopy(self.objects[target])
        raise AssertionError(f"unexpected {method} {path}")
