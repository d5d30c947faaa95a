"""Component-test harness: scorer processes, the test PKI, waiting helpers.

Everything here starts real processes on 127.0.0.1 through ``e2e.procs`` and stops them again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from dynamic_scoring.agent.memory import MemoryPublisher
from dynamic_scoring.agent.ports import PublishRequest
from dynamic_scoring.contract.wire import ScorerConfig, ScorerSummary, ScoringResponse
from dynamic_scoring.scorer import ScorerApp
from dynamic_scoring.scorer.serve import ScorerServer
from e2e.pki import CertificateAuthority, Issued
from e2e.procs import Proc, free_port, wait_until
from e2e.prometheus import PrometheusServer

__all__ = [
    "LoopLag",
    "SampleScorer",
    "ScorerPKI",
    "ScorerProcess",
    "backfilled_prometheus",
    "eventually",
    "free_port",
    "peak_rss_growth",
    "published",
    "sample_summary",
    "serving",
    "summary",
]

APP = Path(__file__).with_name("scorer_app.py")
ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


@dataclass(frozen=True)
class ScorerPKI:
    """A CA for scorer servers, a CA for agent client certificates, and one nobody trusts."""

    ca: CertificateAuthority
    server: Issued
    client_ca: CertificateAuthority
    client: Issued
    stranger: CertificateAuthority
    stranger_client: Issued

    @classmethod
    def create(cls, directory: Path) -> ScorerPKI:
        ca = CertificateAuthority(directory / "server-ca", "scorer test CA")
        server = ca.issue("scorer", common_name="127.0.0.1", server_hosts=("127.0.0.1", "localhost"))
        client_ca = CertificateAuthority(directory / "client-ca", "agent client CA")
        client = client_ca.issue("agent", common_name="dynamic-scoring-agent", client=True)
        stranger = CertificateAuthority(directory / "stranger-ca", "untrusted CA")
        stranger_client = stranger.issue("intruder", common_name="intruder", client=True)
        return cls(ca, server, client_ca, client, stranger, stranger_client)


class ScorerProcess:
    """One ``scorer_app.py`` process; HTTPS when given a server certificate."""

    def __init__(
        self,
        name: str,
        workdir: Path,
        *,
        server: Issued | None = None,
        client_ca: Path | None = None,
        pki: ScorerPKI | None = None,
    ) -> None:
        self.name = name
        self.port = free_port()
        argv = [sys.executable, str(APP), "--port", str(self.port)]
        if server is not None:
            argv += ["--certfile", str(server.cert_path), "--keyfile", str(server.key_path)]
        if client_ca is not None:
            argv += ["--client-ca", str(client_ca)]
        self.scheme = "https" if server is not None else "http"
        self._context: ssl.SSLContext | None = None
        if server is not None and pki is not None:
            self._context = ssl.create_default_context(cafile=str(pki.ca.cert_path))
            if client_ca is not None:
                self._context.load_cert_chain(str(pki.client.cert_path), str(pki.client.key_path))
        self.proc = Proc(name, argv, workdir / f"{name}.log")

    @property
    def base(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return f"{self.base}{path}"

    def start(self) -> ScorerProcess:
        self.proc.start()
        wait_until(
            lambda: self._call("GET", "/healthz") == b"ok",
            timeout=30,
            what=f"{self.name} /healthz",
            proc=self.proc,
        )
        return self

    def stop(self) -> None:
        self.proc.stop()

    def _call(self, method: str, path: str, payload: Any = None) -> bytes:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(self.url(path), data=data, method=method)
        with urllib.request.urlopen(request, timeout=10, context=self._context) as response:
            body: bytes = response.read()
            return body

    def requests(self, prefix: str) -> list[dict[str, Any]]:
        """What the scorer received on paths starting with ``prefix``."""
        found: list[dict[str, Any]] = json.loads(self._call("GET", f"/_requests?prefix={prefix}"))
        return found

    def expect(self, key: str, headers: dict[str, str]) -> None:
        """Make ``/auth/<key>/scoring`` require exactly these header values."""
        self._call("PUT", f"/_expect/{key}", headers)

    def respond(self, key: str, payload: Any) -> None:
        """Make ``/fixed/<key>/scoring`` answer ``payload``."""
        self._call("PUT", f"/_respond/{key}", payload)


async def eventually(check: Callable[[], T | None], *, timeout: float = 30.0, what: str = "condition") -> T:
    """Poll ``check`` on the event loop until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(0.05)


def summary(score_name: str, scoring_endpoint: str, **fields: Any) -> ScorerSummary:
    """A test summary: no source, publishing, 30 s interval, unless ``fields`` (camelCase) say otherwise."""
    data: dict[str, Any] = {
        "name": f"{score_name}-scorer",
        "scoreName": score_name,
        "sourceType": "None",
        "scoringEndpoint": scoring_endpoint,
        "scoringInterval": 30,
        "location": "Internal",
        "scoreDestination": "AddOnPlacementScore",
        "scoreDimensionFormat": "${scoreName}",
    }
    data.update(fields)
    return ScorerSummary.model_validate(data)


async def published(
    publisher: MemoryPublisher, score_name: str, count: int = 1, timeout: float = 30.0
) -> list[PublishRequest]:
    """Wait until ``score_name`` has at least ``count`` publish requests; return them all."""

    def enough() -> list[PublishRequest] | None:
        found = publisher.requests_for(score_name)
        return found if len(found) >= count else None

    return await eventually(enough, timeout=timeout, what=f"{count} publish(es) of {score_name}")


class LoopLag:
    """The event loop's worst stall, measured by a 10 ms ticker: in wall time and in CPU time.

    ``worst`` is the longest wall time between two ticks (beyond the 10 ms); a loaded machine
    stretches it.  ``worst_cpu`` is the most CPU time the loop's thread spent between two ticks:
    work the loop did without yielding, which a busy machine slows down but does not add to.
    """

    def __init__(self) -> None:
        self.worst = 0.0
        self.worst_cpu = 0.0

    @contextlib.asynccontextmanager
    async def measuring(self) -> AsyncIterator[LoopLag]:
        async def tick() -> None:
            last, last_cpu = time.monotonic(), time.thread_time()
            while True:
                await asyncio.sleep(0.01)
                now, now_cpu = time.monotonic(), time.thread_time()
                self.worst = max(self.worst, now - last - 0.01)
                self.worst_cpu = max(self.worst_cpu, now_cpu - last_cpu)
                last, last_cpu = now, now_cpu

        task = asyncio.create_task(tick())
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


@contextlib.contextmanager
def peak_rss_growth() -> Iterator[Callable[[], float]]:
    """How far this process's resident memory peaked above its level at entry, in MiB (Linux)."""
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
    base = _status_kib("VmRSS")
    yield lambda: (_status_kib("VmHWM") - base) / 1024


@contextlib.contextmanager
def serving(app: ScorerApp) -> Iterator[str]:
    """``app`` served by the library's ``ScorerServer`` on a free loopback port; yields its base URL."""
    server = ScorerServer(app, "127.0.0.1", 0)
    thread = server.start_in_thread()
    try:
        yield server.base_url
    finally:
        server.shutdown()
        thread.join(timeout=10)


class SampleScorer:
    """``python -m dynamic_scoring.samples.scorers.<module>`` on a free loopback port."""

    def __init__(self, module: str, workdir: Path, *extra: str) -> None:
        self.port = free_port()
        argv = [
            sys.executable,
            "-m",
            f"dynamic_scoring.samples.scorers.{module}",
            "--port",
            str(self.port),
            *extra,
        ]
        self.proc = Proc(f"sample-{module}", argv, workdir / f"sample-{module}.log", cwd=ROOT)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> SampleScorer:
        """Start it (stopping it again if it never gets healthy); stopped when the block ends."""
        try:
            return self.start()
        except BaseException:
            self.proc.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.proc.stop()

    def start(self) -> SampleScorer:
        self.proc.start()
        wait_until(lambda: self.get("/healthz") == (200, b"ok"), timeout=30, what="/healthz", proc=self.proc)
        return self

    def get(self, path: str) -> tuple[int, bytes]:
        return self.call("GET", path)

    def call(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        request = urllib.request.Request(self.base + path, data=body, method=method)
        if body is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def config(self) -> ScorerConfig:
        status, body = self.get("/config")
        assert status == 200
        return ScorerConfig.model_validate_json(body)

    def score(self, data: list[dict[str, Any]]) -> ScoringResponse:
        status, body = self.call("POST", "/scoring", json.dumps({"data": data}).encode())
        assert status == 200, body
        return ScoringResponse.model_validate_json(body)


def sample_summary(name: str, scorer: SampleScorer, endpoint: str, **fields: Any) -> ScorerSummary:
    """The summary a hub makes of a sample scorer's DynamicScorer: its own query, range and step."""
    config = scorer.config()
    return summary(
        name,
        scorer.base + config.scoring.path,  # no scoring.host: the hub takes the configURL's origin
        sourceType="Prometheus",
        sourceEndpoint=endpoint,
        sourceQuery=config.source.params.query,
        sourceRange=config.source.params.range,
        sourceStep=config.source.params.step,
        **fields,
    )


@contextlib.contextmanager
def backfilled_prometheus(workdir: Path, openmetrics: str, **options: Any) -> Iterator[PrometheusServer]:
    """A real Prometheus holding ``openmetrics`` (backfilled before it starts), stopped on exit."""
    server = PrometheusServer(workdir, **options)
    server.backfill(openmetrics)
    server.start()
    try:
        yield server
    finally:
        server.stop()
