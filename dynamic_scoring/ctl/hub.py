"""Hub access for the operator CLI: one kubeconfig rule and one clear error for every subcommand.

`--kubeconfig` defaults to `$KUBECONFIG` (its first entry) and then `~/.kube/config`, as kubectl
does.  A path that is missing or does not load ends the command with a hint, instead of a
traceback from the `kubernetes` package or, worse, a silent fall-back to in-cluster credentials:
exit 2 (bad arguments) for a path given with `--kubeconfig`, exit 3 (could not ask) for the default.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NoReturn

import click

from dynamic_scoring.ctl.output import ExitCode, fail
from dynamic_scoring.kube.api import KubeAPI, KubeError
from dynamic_scoring.kube.resources import Resource

_CLUSTER = "cluster.open-cluster-management.io"
MANAGED_CLUSTER_SETS = Resource(
    _CLUSTER, "v1beta2", "managedclustersets", "ManagedClusterSet", namespaced=False
)
MANAGED_CLUSTER_SET_BINDINGS = Resource(
    _CLUSTER, "v1beta2", "managedclustersetbindings", "ManagedClusterSetBinding", namespaced=True
)


def default_kubeconfig() -> Path:
    """`$KUBECONFIG` (first of its entries) or `~/.kube/config`."""
    env = os.environ.get("KUBECONFIG", "")
    first = next((p for p in env.split(os.pathsep) if p), "")
    return Path(first).expanduser() if first else Path.home() / ".kube" / "config"


def kubeconfig_option(func: Any) -> Any:
    """`--kubeconfig PATH` for the hub (default: $KUBECONFIG, then ~/.kube/config)."""
    return click.option(
        "--kubeconfig",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Hub kubeconfig (default: $KUBECONFIG, then ~/.kube/config).",
    )(func)


def hub_api(kubeconfig: Path | None) -> KubeAPI:
    """A `KubeAPI` on the hub, or exit with what is wrong and what to do.

    Exit 2 when the `--kubeconfig` given does not exist or does not load (the argument is wrong),
    3 when the default one (`$KUBECONFIG`, `~/.kube/config`) is missing or unusable.
    """
    given = kubeconfig is not None
    path = kubeconfig if kubeconfig is not None else default_kubeconfig()
    code = ExitCode.USAGE if given else ExitCode.UNREACHABLE
    hint = (
        "give --kubeconfig the path of the hub's kubeconfig"
        if given
        else "pass --kubeconfig PATH or set KUBECONFIG to the hub's kubeconfig"
    )
    if not path.is_file():
        fail(f"kubeconfig {path} does not exist", hint=hint, code=code)
    try:
        return KubeAPI(path, timeout=15)
    except Exception as exc:  # the kubernetes loader raises many unrelated types for a bad file
        fail(f"kubeconfig {path} is not usable: {type(exc).__name__}: {exc}", hint=hint, code=code)


def list_all(
    api: KubeAPI, resource: Resource, namespace: str | None = None, **query: str
) -> list[dict[str, Any]]:
    """Every object of a kind, following `continue` across pages; raises `KubeError`."""
    items, _ = api.list_all(resource.path(namespace), dict(query))
    return items


def unreachable(exc: KubeError, what: str) -> NoReturn:
    """Exit 3 for a hub that cannot be asked, naming the request and the server's reason."""
    hint = "check that the hub is up and the kubeconfig's user may read this"
    fail(f"could not {what}: {exc}", hint=hint, code=ExitCode.UNREACHABLE)
