"""The apiserver's own write floor: the manager's writes replayed by the fastest client we can build.

A hub benchmark's time means little alone: on 2 cores the kube-apiserver and etcd share the machine
with the manager, and OCM's own controllers react to every write too.  So after the manager has done
its work, the benchmark captures the objects it wrote (the same objects, the same sizes) and replays
those writes through `bench/hub/floor`, a small Go program on client-go with client-side rate limiting
off and 32 requests in flight over HTTP/2.  Its time is the floor for that work on this machine; the
manager's time is reported as a ratio to it.

The Go program is built on first use into the tools cache (``<cache>/bench-floor/<hash>/floor``),
keyed by its sources, from the Go module proxy: about 90 s cold, nothing when cached.

Also here: CPU seconds of a process from /proc, so a benchmark can say where the time went (the
manager's CPU, the apiserver's and etcd's, or waiting).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from dynamic_scoring.kube.jsontypes import JSON
from e2e.gobuild import go_program

SOURCE = Path(__file__).resolve().parent
PARALLEL = 32
SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation", "selfLink")


def floor_binary() -> Path:
    """The built floor client, built first when its sources changed (progress on stderr)."""
    return go_program(SOURCE, "bench-floor", about="the floor client (Go, client-go; ~90 s cold)")


@dataclass(frozen=True)
class FloorRun:
    """One replay: how many requests, how long, and whether the apiserver took them all."""

    requests: int
    seconds: float
    errors: int
    first_error: str | None

    @property
    def per_second(self) -> float:
        """Requests per second."""
        return self.requests / self.seconds if self.seconds > 0 else 0.0


def replay(
    kubeconfig: Path, requests: list[JSON], *, parallel: int = PARALLEL, check: bool = True
) -> FloorRun:
    """Send `requests` ({method, path, body, contentType}) through the floor client.

    Raises when any failed and `check` is set.
    """
    binary = floor_binary()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(requests, f)
        path = Path(f.name)
    try:
        out = subprocess.run(
            [str(binary), f"-kubeconfig={kubeconfig}", f"-requests={path}", f"-parallel={parallel}"],
            capture_output=True,
            text=True,
            check=True,
            timeout=1800,
        ).stdout
    finally:
        path.unlink()
    data = json.loads(out)
    run = FloorRun(int(data["requests"]), float(data["seconds"]), int(data["errors"]), data.get("firstError"))
    if check and run.errors:
        raise RuntimeError(f"floor replay: {run.errors} of {run.requests} failed; first: {run.first_error}")
    return run


def creatable(obj: JSON) -> JSON:
    """`obj` as a create body: without status and the fields the apiserver sets."""
    meta = {k: v for k, v in obj["metadata"].items() if k not in SERVER_FIELDS}
    return {k: v for k, v in obj.items() if k != "status"} | {"metadata": meta}


def creates(collection_path: str, objs: Iterable[JSON]) -> list[JSON]:
    """POST requests creating each of `objs` in its namespace; `collection_path` has a ``{ns}`` slot."""
    return [
        {
            "method": "POST",
            "path": collection_path.format(ns=o["metadata"]["namespace"]),
            "body": creatable(o),
        }
        for o in objs
    ]


def deletes(object_path: str, objs: Iterable[JSON]) -> list[JSON]:
    """DELETE requests for each of `objs`; `object_path` has ``{ns}`` and ``{name}`` slots."""
    return [
        {
            "method": "DELETE",
            "path": object_path.format(ns=o["metadata"]["namespace"], name=o["metadata"]["name"]),
            "body": None,
        }
        for o in objs
    ]


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds `pid` has used so far (/proc/PID/stat utime + stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


__all__ = ["FloorRun", "cpu_seconds", "creatable", "creates", "deletes", "floor_binary", "replay"]
