"""Shared stand-ins for a hub controller's unit tests: informer caches as dicts, the API as a recorder.

A reconcile reads only caches and writes only through a `Writer`, so a dict per cache and a
recorder of the requests the writer sends let a unit test drive every path of it, including the
ones a real apiserver makes awkward to reach (a refused write, a race with another writer).
What the apiserver itself does (admission, defaulting, conflicts on real data) is the
integration tier's.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, cast

from dynamic_scoring.addon.controllers.lifecycle.inputs import Caches
from dynamic_scoring.kube.api import KubeAPI, KubeError
from dynamic_scoring.kube.informer import Informer
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.writes import Writer


class Cache:
    """An informer's cache reduced to a dict of key -> object."""

    def __init__(self, *objects: JSON) -> None:
        self.objects = {self.key(o): o for o in objects}

    @staticmethod
    def key(obj: JSON) -> str:
        meta = obj["metadata"]
        return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta["name"])

    def put(self, *objects: JSON) -> None:
        """What the watch would deliver: the objects as the apiserver now holds them."""
        for obj in objects:
            self.objects[self.key(obj)] = obj

    def get(self, key: str) -> JSON | None:
        return self.objects.get(key)

    def list(self, namespace: str | None = None) -> list[JSON]:
        return [o for o in self.objects.values() if namespace in (None, o["metadata"].get("namespace"))]


class Recorder:
    """Stands in for `KubeAPI`: records each request and answers with its body, versioned.

    `refuse` maps (method, path prefix) to the error the apiserver would answer with.  A created or
    patched object comes back with a new ``resourceVersion``, as the apiserver's answer would.
    """

    def __init__(self, refuse: dict[tuple[str, str], KubeError] | None = None) -> None:
        self.requests: list[tuple[str, str, Any]] = []
        self.answers: list[tuple[str, str, JSON]] = []
        self.refuse = refuse or {}
        self._version = 0

    def request(self, method: str, path: str, **kw: Any) -> JSON:
        self.requests.append((method, path, kw.get("body")))
        for (refused_method, prefix), error in self.refuse.items():
            if method == refused_method and path.startswith(prefix):
                raise error
        answer = copy.deepcopy(dict(kw.get("body") or {}))
        if method in ("POST", "PATCH") and isinstance(answer.get("metadata"), dict):
            self._version += 1
            answer["metadata"]["resourceVersion"] = str(self._version)
        self.answers.append((method, path, answer))
        return answer

    def writes(self, path: str) -> list[tuple[str, Any]]:
        """(method, body) of every request to a path under `path`."""
        return [(m, b) for m, p, b in self.requests if p.startswith(path)]

    def answered(self, path: str) -> list[tuple[str, JSON]]:
        """(method, answer) of every request to a path under `path` that the apiserver accepted."""
        return [(m, a) for m, p, a in self.answers if p.startswith(path)]

    def events(self) -> list[JSON]:
        return [b for m, p, b in self.requests if m == "POST" and p.endswith("/events")]

    def writer(self, controller: str) -> Writer:
        """A `Writer` that sends through this recorder."""
        return Writer(cast(KubeAPI, self), controller)


def lifecycle_caches(**caches: Cache) -> Caches:
    """The lifecycle controllers' `Caches`, each one given or empty."""
    names = [f.name for f in dataclasses.fields(Caches)]
    unknown = set(caches) - set(names)
    assert not unknown, f"no such cache: {sorted(unknown)}"
    return Caches(**{name: cast(Informer, caches.get(name) or Cache()) for name in names})
