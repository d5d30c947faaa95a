"""`python -m e2e.cli` (behind `make e2e-up/e2e-status/e2e-down`): the local OCM control plane."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from e2e.controlplane import ControlPlane, running, status, stop_recorded
from e2e.loadgen import LoadFile
from e2e.procs import StartupError
from e2e.tools import DEFAULT_OCM_VERSION, OCM_VERSION_ENV, RELEASES, ToolsError, ocm_release

DEFAULT_RUN_DIR = Path(".e2e")


def _progress(msg: str) -> None:
    click.echo(f"[e2e] {msg}", err=True)


@click.group()
@click.option(
    "--run-dir",
    type=click.Path(path_type=Path),
    default=DEFAULT_RUN_DIR,
    show_default=True,
    help="Directory for state, logs, kubeconfigs and the env file.",
)
@click.pass_context
def cli(ctx: click.Context, run_dir: Path) -> None:
    """A real OCM hub and two managed clusters, run as local processes on 127.0.0.1."""
    ctx.obj = run_dir


@cli.command()
@click.option("--no-prometheus", is_flag=True, help="Skip the per-cluster Prometheus servers.")
@click.option("--no-runner", is_flag=True, help="Skip the process runner (Deployments will not run).")
@click.option(
    "--ocm",
    "ocm_version",
    type=click.Choice(sorted(RELEASES)),
    default=lambda: ocm_release().version,
    show_default=f"${OCM_VERSION_ENV} or {DEFAULT_OCM_VERSION}",
    help="The OCM release to run (v1.3.1 runs OCM's webhooks too).",
)
@click.pass_obj
def up(run_dir: Path, no_prometheus: bool, no_runner: bool, ocm_version: str) -> None:
    """Start everything in the background and write <run-dir>/env."""
    cp = ControlPlane(
        run_dir,
        with_prometheus=not no_prometheus,
        with_runner=not no_runner,
        progress=_progress,
        ocm_version=ocm_version,
    )
    try:
        cp.up()
    except (StartupError, ToolsError, RuntimeError) as exc:
        raise click.ClickException(f"{exc}\nLogs are in {run_dir.resolve() / 'logs'}.") from exc
    click.echo(f"source {cp.env_path}   # then: kubectl get managedclusters; clusteradm get clusters")


@cli.command()
@click.pass_obj
def down(run_dir: Path) -> None:
    """Stop every process `up` started and check that no port is left held."""
    state = run_dir / "state.json"
    if not state.exists():
        click.echo(f"nothing to stop: no {state}")
        return
    problems = stop_recorded(state)
    if problems:
        raise click.ClickException("stopped, but: " + "; ".join(problems))
    click.echo("stopped every process of the run; no port is held")


@cli.command("status")
@click.pass_obj
def status_cmd(run_dir: Path) -> None:
    """Say which processes of the run are running, with their ports."""
    state = run_dir / "state.json"
    if not state.exists():
        click.echo(f"not started (no {state})")
        sys.exit(3)
    rows = status(state)
    width = max((len(r[0]) for r in rows), default=10)
    for name, st, detail in rows:
        click.echo(f"{name:<{width}}  {st:<24} {detail}")
    alive = len(running(state))
    click.echo(f"{alive}/{len(rows)} processes running; env: {run_dir / 'env'}")
    if alive < len(rows):
        sys.exit(1)


@cli.command()
@click.argument("cluster", type=click.Choice(["cluster1", "cluster2"]))
@click.argument("pod", metavar="NAMESPACE/POD")
@click.argument("cores", type=click.FloatRange(min=0), required=False)
@click.option("--remove", is_flag=True, help="Stop exposing the pod instead.")
@click.pass_obj
def load(run_dir: Path, cluster: str, pod: str, cores: float | None, remove: bool) -> None:
    """Set the synthetic CPU load (in cores) of one pod on CLUSTER's Prometheus."""
    if cores is None and not remove:
        raise click.UsageError("give CORES, or --remove")
    state = run_dir / "state.json"
    if not state.exists():
        raise click.ClickException(f"no control plane state in {run_dir}; run `make e2e-up` first")
    path = json.loads(state.read_text())["clusters"].get(cluster, {}).get("load_file")
    if not path:
        raise click.ClickException(f"{cluster} has no load exporter (started with --no-prometheus?)")
    namespace, _, name = pod.partition("/")
    if not name:
        raise click.BadParameter("expected NAMESPACE/POD", param_hint="POD")
    node = f"{cluster}-node"
    if remove or cores is None:
        LoadFile(Path(path)).remove(namespace, name, node=node)
        click.echo(f"{cluster}: {pod} removed")
    else:
        LoadFile(Path(path)).set_cpu(namespace, name, cores, node=node)
        click.echo(f"{cluster}: {pod} now uses {cores} cores (Prometheus sees it within a few scrapes)")


def main() -> None:
    """Entry point of `python -m e2e.cli` (the harness ships no console script)."""
    cli(prog_name="python -m e2e.cli")


if __name__ == "__main__":
    main()
