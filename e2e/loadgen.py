"""Per-cluster synthetic load: a LoadExporter process steered by a JSON file.

The control plane outlives the command that started it (`make e2e-up` returns), so the metrics
endpoint each cluster's Prometheus scrapes must be a process of its own.  Tests and demos shape
the load by rewriting a small JSON file, which the exporter re-reads twice a second:

    {"cpu": [{"namespace": "demo", "pod": "app-1", "node": "cluster1-node", "cores": 0.5}],
     "gauges": [{"name": "DCGM_FI_DEV_GPU_UTIL", "labels": {"gpu": "0", "Hostname": "n1"}, "value": 30}]}

Each CPU entry becomes a `container_cpu_usage_seconds_total` counter growing by `cores` per second,
so `rate(...)` over a short window converges to `cores`; each gauge is exposed as given, for the
exporters other samples read (the DCGM exporter's GPU gauges, say).  Beside them the exporter states the
cluster's size as cAdvisor does, `machine_cpu_cores` (CAPACITY_CORES unless `--capacity-cores`
says otherwise), so a scorer can divide by it instead of assuming one.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path
from typing import Any

import click

from e2e.prometheus import LoadExporter

CAPACITY_CORES = 4.0
"""Every local cluster's size in cores: what the seasonal sample is told and `machine_cpu_cores` says."""
CAPACITY_METRIC = "machine_cpu_cores"


def _key(entry: dict[str, Any]) -> tuple[str, str, str, str]:
    return (entry["namespace"], entry["pod"], entry.get("node", "node-1"), entry.get("container", "app"))


class LoadFile:
    """Read-modify-write access to one cluster's load file (atomic replace, so readers never see half)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def document(self) -> dict[str, Any]:
        """The whole file: ``cpu`` and ``gauges`` entries."""
        try:
            document: dict[str, Any] = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        return document

    def read(self) -> list[dict[str, Any]]:
        """The current CPU entries."""
        entries: list[dict[str, Any]] = self.document().get("cpu", [])
        return entries

    def gauges(self) -> list[dict[str, Any]]:
        """The current gauge entries."""
        entries: list[dict[str, Any]] = self.document().get("gauges", [])
        return entries

    def write(self, entries: list[dict[str, Any]], gauges: list[dict[str, Any]] | None = None) -> None:
        """Replace every CPU entry (and every gauge, when ``gauges`` is given)."""
        kept = self.gauges() if gauges is None else gauges
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        tmp.write_text(json.dumps({"cpu": entries, "gauges": kept}, indent=1))
        tmp.replace(self.path)

    def set_gauge(self, name: str, labels: dict[str, str], value: float) -> None:
        """Set (or add) one gauge."""
        others = [g for g in self.gauges() if (g["name"], g["labels"]) != (name, labels)]
        self.write(self.read(), [*others, {"name": name, "labels": labels, "value": value}])

    def remove_gauges(self, name_prefix: str) -> None:
        """Stop exposing every gauge whose name starts with ``name_prefix``."""
        self.write(self.read(), [g for g in self.gauges() if not g["name"].startswith(name_prefix)])

    def set_cpu(
        self, namespace: str, pod: str, cores: float, *, node: str = "node-1", container: str = "app"
    ) -> None:
        """Set (or add) one pod's CPU rate."""
        entry = {"namespace": namespace, "pod": pod, "node": node, "container": container, "cores": cores}
        others = [e for e in self.read() if _key(e) != _key(entry)]
        self.write([*others, entry])

    def remove(self, namespace: str, pod: str, *, node: str = "node-1", container: str = "app") -> None:
        """Stop exposing one pod."""
        key = (namespace, pod, node, container)
        self.write([e for e in self.read() if _key(e) != key])


GaugeKey = tuple[str, tuple[tuple[str, str], ...]]


def _gauges(document: dict[str, Any]) -> dict[GaugeKey, float]:
    return {
        (g["name"], tuple(sorted(g["labels"].items()))): float(g["value"]) for g in document.get("gauges", [])
    }


def follow(exporter: LoadExporter, load: LoadFile, stop: threading.Event) -> None:
    """Apply the load file to the exporter whenever it changes."""
    applied: dict[tuple[str, str, str, str], float] = {}
    shown: dict[GaugeKey, float] = {}
    stamp = -1.0
    while not stop.wait(0.5):
        try:
            mtime = load.path.stat().st_mtime
        except FileNotFoundError:
            mtime = 0.0
        if mtime == stamp:
            continue
        stamp = mtime
        try:
            document = load.document()  # one read: the CPU entries and the gauges of one version
            wanted = {_key(e): float(e["cores"]) for e in document.get("cpu", [])}
            gauges = _gauges(document)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            print(f"loadgen: ignoring malformed {load.path}: {exc}", flush=True)
            continue
        for key in set(applied) - set(wanted):
            exporter.remove_pod(key[0], key[1], node=key[2], container=key[3])
        for key, cores in wanted.items():
            if applied.get(key) != cores:
                exporter.set_cpu_rate(key[0], key[1], cores, node=key[2], container=key[3])
        applied = wanted
        for name, labels in set(shown) - set(gauges):
            exporter.remove_gauge(name, dict(labels))
        for (name, labels), value in gauges.items():
            exporter.set_gauge(name, dict(labels), value)
        shown = gauges


@click.command()
@click.option("--load-file", type=click.Path(path_type=Path), required=True, help="JSON file to follow.")
@click.option("--port-file", type=click.Path(path_type=Path), required=True, help="Where to write the port.")
@click.option(
    "--capacity-cores",
    type=click.FloatRange(min=0, min_open=True),
    default=CAPACITY_CORES,
    show_default=True,
    help=f"The cluster's size, exposed as {CAPACITY_METRIC}.",
)
def main(load_file: Path, port_file: Path, capacity_cores: float) -> None:
    """Serve synthetic container CPU counters and the cluster's cores on 127.0.0.1, steered by LOAD_FILE."""
    exporter = LoadExporter().start()
    exporter.set_gauge(CAPACITY_METRIC, {"node": "node-1"}, capacity_cores)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    tmp = port_file.with_name(f".{port_file.name}.tmp")
    tmp.write_text(str(exporter.port))
    os.replace(tmp, port_file)
    try:
        follow(exporter, LoadFile(load_file), stop)
    finally:
        exporter.stop()


if __name__ == "__main__":
    main()
