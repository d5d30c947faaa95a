"""Where the built control-plane binaries are: asks `e2e/build-tools.sh`, which builds what is missing.

The script owns the cache layout (component, version, Go version, recipe) so this module never
guesses paths; when everything is cached the call takes well under a second.

`python -m e2e.tools path COMPONENT` prints the cached binary of one component without building it
(`make lint` runs actionlint through it, and must say "run make tools" rather than start a build).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

BUILD_SCRIPT = Path(__file__).resolve().parent / "build-tools.sh"
COMPONENTS = ("ocm-api", "etcd", "ocm", "clusteradm", "k8s")


class ToolsError(RuntimeError):
    """The binaries could not be built or found."""


@dataclass(frozen=True)
class Tools:
    """Absolute paths of every binary and the OCM CRD directory."""

    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kubectl: Path
    registration: Path
    work: Path
    placement: Path
    addon: Path
    clusteradm: Path
    crds: Path

    @property
    def bin_dirs(self) -> list[Path]:
        """Directories to put first on PATH so `kubectl` and `clusteradm` are ours."""
        return sorted({self.kubectl.parent, self.clusteradm.parent})


def locate() -> Tools:
    """Return the tool paths, building missing components first."""
    proc = subprocess.run([str(BUILD_SCRIPT), *COMPONENTS], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ToolsError(f"building the control-plane tools failed:\n{proc.stderr[-4000:]}")
    dirs: dict[str, Path] = {}
    for line in proc.stdout.splitlines():
        name, _, path = line.partition("=")
        if path:
            dirs[name] = Path(path)
    missing = [c for c in COMPONENTS if c not in dirs]
    if missing:
        raise ToolsError(f"build-tools.sh did not report {missing}; output:\n{proc.stdout}")
    return Tools(
        etcd=dirs["etcd"] / "bin/etcd",
        kube_apiserver=dirs["k8s"] / "bin/kube-apiserver",
        kube_controller_manager=dirs["k8s"] / "bin/kube-controller-manager",
        kubectl=dirs["k8s"] / "bin/kubectl",
        registration=dirs["ocm"] / "bin/registration",
        work=dirs["ocm"] / "bin/work",
        placement=dirs["ocm"] / "bin/placement",
        addon=dirs["ocm"] / "bin/addon",
        clusteradm=dirs["clusteradm"] / "bin/clusteradm",
        crds=dirs["ocm-api"] / "crds",
    )


def cached_binary(component: str) -> Path:
    """The binary `bin/<component>` of an already-built component; never builds it.

    Lint must stay quick and predictable, so a missing tool is an error that names `make tools`
    instead of a surprise Go build in the middle of `make lint`.
    """
    env = {**os.environ, "DS_TOOLS_CACHED_ONLY": "1"}
    proc = subprocess.run(
        [str(BUILD_SCRIPT), component], capture_output=True, text=True, check=False, env=env
    )
    for line in proc.stdout.splitlines():
        name, _, path = line.partition("=")
        if name == component and path:
            binary = Path(path) / "bin" / component
            if binary.is_file():
                return binary
            raise ToolsError(f"{binary} is missing from the tools cache; run `make tools` to rebuild it")
    raise ToolsError(proc.stderr.strip() or f"{component} is not built yet; run `make tools`")


def main(argv: list[str] | None = None) -> int:
    """Command line: `path COMPONENT` prints the cached binary's path, or exits 1 saying what to run."""
    parser = argparse.ArgumentParser(prog="python -m e2e.tools", description="locate a built tool")
    sub = parser.add_subparsers(dest="command", required=True)
    path = sub.add_parser("path", help="print the cached binary of COMPONENT (never builds it)")
    path.add_argument(
        "component", help="a build-tools.sh component whose binary has its name, e.g. actionlint"
    )
    args = parser.parse_args(argv)
    try:
        print(cached_binary(args.component))
    except ToolsError as err:
        print(f"e2e.tools: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
