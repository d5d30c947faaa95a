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
BASE_COMPONENTS = ("etcd", "clusteradm", "k8s")
OCM_VERSION_ENV = "DS_OCM_VERSION"


@dataclass(frozen=True)
class OcmRelease:
    """One OCM release the harness can run, and how its parts are laid out in the tools cache.

    v1.2.1 comes through the module proxy: binaries from `ocm`, single-version CRDs from the api
    module (`ocm-api`), no webhooks.  v1.3.1 is built from a pinned git mirror (`ocm13`): the CRDs
    are the cluster manager's own templates (CMA and MCA convert through the addon webhook) and
    the registration, work and addon webhook servers run beside the controllers.
    """

    version: str
    components: tuple[str, ...]
    webhooks: bool


RELEASES = {
    "v1.3.1": OcmRelease("v1.3.1", ("ocm13",), webhooks=True),
    "v1.2.1": OcmRelease("v1.2.1", ("ocm", "ocm-api"), webhooks=False),
}
DEFAULT_OCM_VERSION = "v1.3.1"

# CRD files inside the open-cluster-management.io/api module.  OCM v1.2 speaks addon v1alpha1
# only, so the v1alpha1-only addon CRDs are installed (no conversion webhook needed).
API_HUB_CRDS = (
    "cluster/v1/0000_00_clusters.open-cluster-management.io_managedclusters.crd.yaml",
    "cluster/v1beta2/0000_00_clusters.open-cluster-management.io_managedclustersets.crd.yaml",
    "cluster/v1beta2/0000_01_clusters.open-cluster-management.io_managedclustersetbindings.crd.yaml",
    "cluster/v1beta1/0000_02_clusters.open-cluster-management.io_placements.crd.yaml",
    "cluster/v1beta1/0000_03_clusters.open-cluster-management.io_placementdecisions.crd.yaml",
    "cluster/v1alpha1/0000_05_clusters.open-cluster-management.io_addonplacementscores.crd.yaml",
    "work/v1/0000_00_work.open-cluster-management.io_manifestworks.crd.yaml",
    "work/v1alpha1/0000_00_work.open-cluster-management.io_manifestworkreplicasets.crd.yaml",
    "addon/v1alpha1/0000_00_addon.open-cluster-management.io_clustermanagementaddons.crd.yaml",
    "addon/v1alpha1/0000_01_addon.open-cluster-management.io_managedclusteraddons.crd.yaml",
    "addon/v1alpha1/0000_02_addon.open-cluster-management.io_addondeploymentconfigs.crd.yaml",
    "addon/v1alpha1/0000_03_addon.open-cluster-management.io_addontemplates.crd.yaml",
)
API_SPOKE_CRDS = (
    "work/v1/0000_01_work.open-cluster-management.io_appliedmanifestworks.crd.yaml",
    "cluster/v1alpha1/0000_02_clusters.open-cluster-management.io_clusterclaims.crd.yaml",
)


def ocm_release(version: str | None = None) -> OcmRelease:
    """The release named by `version`, else by $DS_OCM_VERSION, else the default; unknown names fail."""
    name = version or os.environ.get(OCM_VERSION_ENV) or DEFAULT_OCM_VERSION
    if name not in RELEASES:
        raise ToolsError(f"OCM {name!r} is not one the harness runs; choose one of {', '.join(RELEASES)}")
    return RELEASES[name]


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
    ocm: OcmRelease
    hub_crds: tuple[Path, ...]
    spoke_crds: tuple[Path, ...]

    @property
    def bin_dirs(self) -> list[Path]:
        """Directories to put first on PATH so `kubectl` and `clusteradm` are ours."""
        return sorted({self.kubectl.parent, self.clusteradm.parent})


def component_dirs(*components: str) -> dict[str, Path]:
    """The cache directory of each component, building the missing ones first (`make tools` does it ahead).

    The script's progress (stderr) goes straight to ours: a component built on first use (OCM v1.2.1
    for `make e2e-up OCM=v1.2.1`) takes minutes, and its plan and heartbeat say so.
    """
    proc = subprocess.run(
        [str(BUILD_SCRIPT), *components], stdout=subprocess.PIPE, stderr=None, text=True, check=False
    )
    if proc.returncode != 0:
        names = ", ".join(components)
        raise ToolsError(f"building {names} failed ({proc.returncode}); see build-tools.sh's output above")
    dirs: dict[str, Path] = {}
    for line in proc.stdout.splitlines():
        name, _, path = line.partition("=")
        if path:
            dirs[name] = Path(path)
    missing = [c for c in components if c not in dirs]
    if missing:
        raise ToolsError(f"build-tools.sh did not report {missing}; output:\n{proc.stdout}")
    return dirs


def locate(ocm_version: str | None = None) -> Tools:
    """Return the tool paths for one OCM release (see `ocm_release`), building missing components first."""
    release = ocm_release(ocm_version)
    dirs = component_dirs(*BASE_COMPONENTS, *release.components)
    if release.webhooks:
        ocm_dir = dirs["ocm13"]
        hub_crds = tuple(sorted((ocm_dir / "crds/hub").glob("*.crd.yaml")))
        spoke_crds = tuple(sorted((ocm_dir / "crds/managed").glob("*.crd.yaml")))
    else:
        ocm_dir = dirs["ocm"]
        hub_crds = tuple(dirs["ocm-api"] / "crds" / f for f in API_HUB_CRDS)
        spoke_crds = tuple(dirs["ocm-api"] / "crds" / f for f in API_SPOKE_CRDS)
    return Tools(
        etcd=dirs["etcd"] / "bin/etcd",
        kube_apiserver=dirs["k8s"] / "bin/kube-apiserver",
        kube_controller_manager=dirs["k8s"] / "bin/kube-controller-manager",
        kubectl=dirs["k8s"] / "bin/kubectl",
        registration=ocm_dir / "bin/registration",
        work=ocm_dir / "bin/work",
        placement=ocm_dir / "bin/placement",
        addon=ocm_dir / "bin/addon",
        clusteradm=dirs["clusteradm"] / "bin/clusteradm",
        ocm=release,
        hub_crds=hub_crds,
        spoke_crds=spoke_crds,
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
