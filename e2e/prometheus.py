"""A real Prometheus on loopback, fed with deterministic history and live load, for tests and demos.

Three pieces:

* ``PrometheusServer``: the Debian ``prometheus`` binary in a work directory of its own, listening
  on 127.0.0.1, optionally backfilled beforehand with ``promtool tsdb create-blocks-from
  openmetrics`` and scraping the given targets every second.
* ``synthetic_cpu_openmetrics``: deterministic OpenMetrics history for pods with a fixed CPU load,
  so a test can compute the score it expects exactly.  With ``kind="counter"`` (the default) it
  writes ``container_cpu_usage_seconds_total`` counters that grow by ``cores`` per second; with
  ``kind="gauge"`` the value itself is ``cores`` at every sample.
* ``LoadExporter``: a metrics endpoint in this process whose values a test or a demo changes live
  (``set_cpu_rate``), exposing the same counters growing at the chosen rate.

Backfilled history ends in the past.  A plain selector over it keeps returning the last value only
for Prometheus' lookback delta (5 minutes by default); tests that query backfilled gauges for longer
pass a larger ``lookback_delta``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from e2e.procs import Proc, StartupError, free_port, tail, wait_until

PodKey = tuple[str, ...]
"""``(namespace, pod)`` or ``(namespace, pod, node)``."""

CPU_METRIC = "container_cpu_usage_seconds_total"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Mapping[str, str]) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items())) + "}"


def _pod_labels(key: PodKey, node: str, container: str) -> dict[str, str]:
    namespace, pod = key[0], key[1]
    return {
        "namespace": namespace,
        "pod": pod,
        "container": container,
        "node": key[2] if len(key) == 3 else node,
    }


def _fmt(value: float) -> str:
    return repr(float(value))


def synthetic_cpu_openmetrics(
    pods: Mapping[PodKey, float],
    start: float,
    end: float,
    step: float = 15.0,
    *,
    kind: Literal["counter", "gauge"] = "counter",
    metric: str = CPU_METRIC,
    node: str = "node-1",
    container: str = "app",
) -> str:
    """OpenMetrics text with one series per pod, sampled every ``step`` seconds from ``start`` to ``end``.

    Args:
        pods: CPU load in cores per pod.
        start: first sample, Unix seconds.
        end: last sample at or before this, Unix seconds.
        step: seconds between samples.
        kind: ``counter``: the value at ``t`` is ``cores * (t - start)``, so ``rate()`` over it is
            exactly ``cores``; ``gauge``: the value is ``cores`` at every sample.
        metric: the sample name; a counter's must end in ``_total``.
        node: node label for keys without one.
        container: container label.
    """
    if kind == "counter" and not metric.endswith("_total"):
        raise ValueError("a counter's sample name must end in _total")
    family = metric.removesuffix("_total") if kind == "counter" else metric
    lines = [f"# TYPE {family} {kind}"]
    count = int((end - start) // step) + 1
    for key, cores in sorted(pods.items()):
        labels = _labels(_pod_labels(key, node, container))
        for i in range(count):
            t = start + i * step
            value = cores * (t - start) if kind == "counter" else cores
            lines.append(f"{metric}{labels} {_fmt(value)} {_fmt(t)}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


class PrometheusServer:
    """One Prometheus process on 127.0.0.1 with its data and log under ``workdir``.

    Args:
        workdir: a directory of its own (created); holds ``prometheus.yml``, ``data/`` and the log.
        scrape_targets: ``host:port`` endpoints to scrape at ``/metrics``.
        scrape_interval: Prometheus duration, also used as the evaluation interval.
        retention: how long to keep data; long by default so backfilled history is never dropped.
        lookback_delta: ``--query.lookback-delta`` (Prometheus' default is 5m).
        remote_write_receiver: accept samples pushed to ``/api/v1/write`` (Prometheus remote write),
            for callers that produce a series as they go instead of backfilling it.
        binary: the ``prometheus`` executable.
        promtool: the ``promtool`` executable.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        scrape_targets: Sequence[str] = (),
        scrape_interval: str = "1s",
        retention: str = "3650d",
        lookback_delta: str | None = None,
        remote_write_receiver: bool = False,
        binary: str = "prometheus",
        promtool: str = "promtool",
    ) -> None:
        self.workdir = Path(workdir)
        self.scrape_targets = list(scrape_targets)
        self.scrape_interval = scrape_interval
        self.retention = retention
        self.lookback_delta = lookback_delta
        self.remote_write_receiver = remote_write_receiver
        self.binary = shutil.which(binary) or binary
        self.promtool = shutil.which(promtool) or promtool
        self.port = 0
        self._proc: Proc | None = None
        self._backfills = 0

    @property
    def data_dir(self) -> Path:
        """The TSDB directory."""
        return self.workdir / "data"

    @property
    def proc(self) -> Proc | None:
        """The running process (for callers that track every process they start)."""
        return self._proc

    @property
    def log_path(self) -> Path:
        """Prometheus' log file."""
        return self.workdir / "prometheus.log"

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:41234``."""
        if not self.port:
            raise RuntimeError("Prometheus is not started")
        return f"http://127.0.0.1:{self.port}"

    @property
    def query_range_url(self) -> str:
        """The ``query_range`` endpoint, as a summary's ``sourceEndpoint``."""
        return f"{self.url}/api/v1/query_range"

    def backfill(self, openmetrics_text: str) -> None:
        """Turn OpenMetrics text into TSDB blocks in the data directory (only before ``start``)."""
        if self._proc is not None:
            raise RuntimeError("backfill before start: Prometheus only loads blocks at start-up")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(exist_ok=True)
        self._backfills += 1
        source = self.workdir / f"backfill-{self._backfills}.om"
        source.write_text(openmetrics_text)
        log = self.workdir / "promtool.log"
        with log.open("ab") as out:
            result = subprocess.run(
                [self.promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(self.data_dir)],
                stdout=out,
                stderr=subprocess.STDOUT,
                check=False,
            )
        if result.returncode != 0:
            raise StartupError(f"promtool backfill failed ({result.returncode}):\n{tail(log)}")

    def _write_config(self) -> Path:
        config: dict[str, Any] = {
            "global": {"scrape_interval": self.scrape_interval, "evaluation_interval": self.scrape_interval},
            "scrape_configs": [],
        }
        if self.scrape_targets:
            config["scrape_configs"].append(
                {"job_name": "targets", "static_configs": [{"targets": self.scrape_targets}]}
            )
        path = self.workdir / "prometheus.yml"
        path.write_text(json.dumps(config, indent=2))  # JSON is YAML
        return path

    def start(self, timeout: float = 60) -> PrometheusServer:
        """Start Prometheus and wait until ``/-/ready`` answers."""
        if self._proc is not None:
            return self
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = self._write_config()
        for attempt in range(3):  # a free port can be taken between choosing and binding
            self.port = free_port()
            argv = [
                self.binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={self.data_dir}",
                f"--storage.tsdb.retention.time={self.retention}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=info",
            ]
            if self.lookback_delta:
                argv.append(f"--query.lookback-delta={self.lookback_delta}")
            if self.remote_write_receiver:
                argv.append("--web.enable-remote-write-receiver")
            proc = Proc("prometheus", argv, self.log_path, cwd=self.workdir).start()
            self._proc = proc
            try:
                wait_until(self._ready, timeout=timeout, what="Prometheus /-/ready", proc=proc)
                return self
            except StartupError:
                proc.stop()
                self._proc = None
                if attempt == 2 or "address already in use" not in tail(self.log_path):
                    raise
        return self

    def _ready(self) -> bool:
        with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
            return bool(response.status == 200)

    def stop(self) -> None:
        """Stop Prometheus (SIGTERM, then SIGKILL)."""
        if self._proc is not None:
            self._proc.stop()
            self._proc = None

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        """Run an instant query and return ``data.result`` (for test assertions)."""
        params = {"query": promql}
        if at is not None:
            params["time"] = repr(at)
        url = f"{self.url}/api/v1/query?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.load(response)
        if body.get("status") != "success":
            raise RuntimeError(f"query {promql!r} failed: {body}")
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class _Series:
    def __init__(self, labels: dict[str, str], rate: float, now: float) -> None:
        self.labels = labels
        self.rate = rate
        self.base = 0.0
        self.since = now

    def value(self, now: float) -> float:
        return self.base + self.rate * (now - self.since)


class LoadExporter:
    """A live ``/metrics`` endpoint on 127.0.0.1 for Prometheus to scrape.

    Each pod set with ``set_cpu_rate`` is exposed as a ``container_cpu_usage_seconds_total`` counter
    that grows by ``cores`` per second from then on (continuing from its current value when the
    rate changes, as a real counter would), so ``rate(...[1m])`` converges to ``cores`` within a
    minute of a change.  ``set_gauge`` exposes arbitrary gauges for anything else.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cpu: dict[tuple[str, ...], _Series] = {}
        self._gauges: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                body = exporter.render().encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self._server.server_address[1])

    @property
    def target(self) -> str:
        """``127.0.0.1:PORT``, for ``PrometheusServer(scrape_targets=...)``."""
        return f"127.0.0.1:{self.port}"

    def set_cpu_rate(
        self, namespace: str, pod: str, cores: float, *, node: str = "node-1", container: str = "app"
    ) -> None:
        """Make the pod's CPU counter grow by ``cores`` per second from now on."""
        now = time.time()
        key = (namespace, pod, node, container)
        with self._lock:
            series = self._cpu.get(key)
            if series is None:
                labels = {"namespace": namespace, "pod": pod, "node": node, "container": container}
                self._cpu[key] = _Series(labels, cores, now)
            else:
                series.base = series.value(now)
                series.since = now
                series.rate = cores

    def remove_pod(self, namespace: str, pod: str, *, node: str = "node-1", container: str = "app") -> None:
        """Stop exposing the pod's counter."""
        with self._lock:
            self._cpu.pop((namespace, pod, node, container), None)

    def set_gauge(self, name: str, labels: Mapping[str, str], value: float) -> None:
        """Expose gauge ``name{labels}`` with ``value``."""
        with self._lock:
            self._gauges[(name, tuple(sorted(labels.items())))] = value

    def remove_gauge(self, name: str, labels: Mapping[str, str]) -> None:
        """Stop exposing gauge ``name{labels}`` (a target that no longer reports it)."""
        with self._lock:
            self._gauges.pop((name, tuple(sorted(labels.items()))), None)

    def render(self) -> str:
        """The exposition text at this instant."""
        now = time.time()
        lines: list[str] = []
        with self._lock:
            if self._cpu:
                lines.append(f"# TYPE {CPU_METRIC} counter")
                for series in self._cpu.values():
                    lines.append(f"{CPU_METRIC}{_labels(series.labels)} {_fmt(series.value(now))}")
            typed: set[str] = set()
            for (name, labels), value in sorted(self._gauges.items()):
                if name not in typed:
                    lines.append(f"# TYPE {name} gauge")
                    typed.add(name)
                lines.append(f"{name}{_labels(dict(labels))} {_fmt(value)}")
        return "\n".join(lines) + "\n"

    def start(self) -> LoadExporter:
        """Serve from a daemon thread."""
        self._thread = threading.Thread(target=self._server.serve_forever, name="load-exporter", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> LoadExporter:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


__all__ = ["CPU_METRIC", "LoadExporter", "PodKey", "PrometheusServer", "synthetic_cpu_openmetrics"]
