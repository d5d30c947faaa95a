"""Small Go programs of this repository, built on first use into the tools cache, keyed by their sources.

Some checks need Go's own reading of something (the benchmark's client-go floor, the CSR reader
that says what Kubernetes reads out of a certificate request).  Their sources live in the
repository; the binary lands in ``<tools cache>/<name>/<hash of go.mod, go.sum, *.go>/<name>``, so a
changed source builds anew and an unchanged one costs nothing.  Modules come from the Go module
proxy into the tools cache's module cache, as for every other built tool.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path


def tools_root() -> Path:
    """The tools cache `e2e/build-tools.sh` uses ($DS_TOOLS_CACHE, else $XDG_CACHE_HOME or ~/.cache)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(os.environ.get("DS_TOOLS_CACHE") or Path(cache) / "dynamic-scoring-tools")


def go_program(source: Path, name: str, *, about: str, timeout: float = 1200) -> Path:
    """The binary built from the Go module in `source`, building it first when its sources changed.

    `about` says what it is and how long a cold build takes, for the progress line on stderr.
    """
    digest = hashlib.sha256()
    for path in sorted(p for p in source.iterdir() if p.name in ("go.mod", "go.sum") or p.suffix == ".go"):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    root = tools_root()
    binary = root / name / digest.hexdigest()[:12] / name
    if binary.exists():
        return binary
    binary.parent.mkdir(parents=True, exist_ok=True)
    print(f"[{name}] building {about} into {binary}", file=sys.stderr)
    env = {
        **os.environ,
        "GOMODCACHE": str(root / "gomod"),
        "GOCACHE": str(root / "gocache"),
        "GOFLAGS": "-mod=mod",
        "GOTOOLCHAIN": "local",
        "CGO_ENABLED": "0",
    }
    partial = binary.with_name(f"{name}.tmp.{os.getpid()}")
    subprocess.run(["go", "build", "-o", str(partial), "."], cwd=source, env=env, check=True, timeout=timeout)
    partial.replace(binary)  # atomic: a concurrent run never executes a half-written binary
    return binary
