"""Where the built control-plane binaries are: asks `e2e/build-tools.sh`, which builds what is missing.

The script owns the cache layout (component, version, Go version, recipe) so this module never
guesses paths; when everything is cached the call takes well under a second.
"""

from __future__ import annotations

import subprocess
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
