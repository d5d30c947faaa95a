"""Kueue and OCM's kueue-addon, as built into the tools cache by `e2e/build-tools.sh kueue kueue-addon`.

Kueue's controller manager (v0.16.9) and kueue-addon's hub controller (addon-contrib f5844b98) are
built from pinned git mirrors: the module proxy refuses `sigs.k8s.io/kueue` v0.16.x, the release line
kueue-addon is built against.  Beside each binary the recipe copies what the harness installs with
it: Kueue's CRDs, webhook configurations and manager ClusterRole; the ManagedServiceAccount,
ClusterPermission and ClusterProfile CRDs kueue-addon's informers need, and its hub ClusterRole.
See docs/local-control-plane.md, "Kueue and kueue-addon from pinned git mirrors".
"""

from __future__ import annotations

import functools
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from e2e.procs import StartupError
from e2e.tools import BUILD_SCRIPT

KUEUE_MANAGER = "kueue-manager"
KUEUE_ADDON_CONTROLLER = "kueue-addon-controller"


@dataclass(frozen=True)
class KueueBuild:
    """The built Kueue manager and kueue-addon controller, with the manifests of the same versions."""

    manager: Path
    kueue_crds: tuple[Path, ...]
    webhooks: Path
    manager_role: Path
    kueue_source: dict[str, str]
    addon_controller: Path
    addon_crds: tuple[Path, ...]
    addon_role: Path
    addon_source: dict[str, str]


def _component_dirs(*components: str) -> dict[str, Path]:
    proc = subprocess.run([str(BUILD_SCRIPT), *components], capture_output=True, text=True, check=False)
    dirs: dict[str, Path] = {}
    for line in proc.stdout.splitlines():
        name, _, path = line.partition("=")
        if name in components and path:
            dirs[name] = Path(path)
    missing = [c for c in components if c not in dirs]
    if proc.returncode != 0 or missing:
        raise StartupError(
            f"building {', '.join(missing or components)} failed (run `make tools`):\n{proc.stderr[-3000:]}"
        )
    return dirs


@functools.cache
def kueue_build() -> KueueBuild:
    """The pinned Kueue and kueue-addon, built on first use (cold: many minutes; `make tools` does it)."""
    dirs = _component_dirs("kueue", "kueue-addon")
    kueue, addon = dirs["kueue"], dirs["kueue-addon"]
    return KueueBuild(
        manager=kueue / "bin" / KUEUE_MANAGER,
        kueue_crds=tuple(sorted((kueue / "crds").glob("*.yaml"))),
        webhooks=kueue / "webhook" / "manifests.yaml",
        manager_role=kueue / "rbac" / "role.yaml",
        kueue_source=json.loads((kueue / "source.json").read_text()),
        addon_controller=addon / "bin" / KUEUE_ADDON_CONTROLLER,
        addon_crds=tuple(sorted((addon / "crds").glob("*.yaml"))),
        addon_role=addon / "rbac" / "cluster-role.yaml",
        addon_source=json.loads((addon / "source.json").read_text()),
    )
