"""``dynamic-scoring replay``: serve recorded ``query_range`` answers as a Prometheus would, shifted to now.

Scorers can then be developed and tested in CI against real data without a cluster.  What it
serves (``ReplayServer``; importable, so component tests and benchmarks can start one in-process):

* ``GET`` or ``POST`` (form) ``/api/v1/query_range`` with ``query``, ``start``, ``end``, ``step``.
  The request is matched to a recording by its query text, exactly, after trimming surrounding
  whitespace.  An unknown query gets what Prometheus answers a bad query: HTTP 400 with
  ``{"status": "error", "errorType": "bad_data", "error": "..."}``, naming the query.
* Time shift: every timestamp of a recording moves by one offset, ``floor(now) - newest sample``,
  so the newest sample is "now" (to the second) and the spacing is kept.  The offset is taken per
  request, so the data keeps moving with the clock.
* Window: like Prometheus, the answer has one point per ``start + k*step <= end``, the latest
  shifted sample at or before that instant and at most ``LOOKBACK`` (5 minutes, Prometheus'
  default) older; a series without any point in the window is left out.  So a request with the
  recorded range and step gets the recorded values back, and a wider step thins them.
* ``GET /api/v1/status/buildinfo`` answers a Prometheus-shaped build info (version
  ``replay``), for tools that check what they talk to; nothing in this project probes it.

It listens on loopback (``127.0.0.1:9090``) unless ``--listen`` names another host explicitly;
``:PORT`` without a host means loopback too, not every interface as in Go.  The recordings are a
cluster's metrics, and a developer tool should not publish them by accident; a non-loopback
address is served with a warning on stderr.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import click
import msgspec

from dynamic_scoring.ctl.output import ExitCode, fail
from dynamic_scoring.ctl.recording import Recording, RecordingError, load
from dynamic_scoring.ctl.stopping import sigterm_interrupts
from dynamic_scoring.runtime.threaded_server import ThreadedHTTPServer

log = logging.getLogger(__name__)

LOOKBACK = 300.0
"""Seconds a sample stays current for an evaluation instant (Prometheus' default lookback delta)."""
MAX_POINTS = 11_000
"""Points per series Prometheus refuses above; the replay refuses the same."""


@dataclass(frozen=True)
class _Series:
    metric: dict[str, str]
    times: list[float]
    values: list[str]


@dataclass(frozen=True)
class _Replayable:
    recording: Recording
    series: list[_Series]
    newest: float


class QueryError(ValueError):
    """A request Prometheus would refuse with ``bad_data``; the message is its ``error`` text."""


def _prepare(recording: Recording) -> _Replayable:
    series = []
    newest = -math.inf
    for sample in recording.series():
        pairs = sorted(sample.values)
        times = [float(t) for t, _ in pairs]
        series.append(_Series(sample.metric, times, [v for _, v in pairs]))
        if times:
            newest = max(newest, times[-1])
    return _Replayable(recording, series, newest)


def _number(params: dict[str, list[str]], name: str) -> float:
    values = params.get(name)
    if not values or not values[0]:
        raise QueryError(f'invalid parameter "{name}": missing')
    try:
        value = float(values[0])
    except ValueError:
        raise QueryError(f'invalid parameter "{name}": cannot parse {values[0]!r} to a number') from None
    if not math.isfinite(value):
        raise QueryError(f'invalid parameter "{name}": must be finite')
    return value


class Replay:
    """The recordings by query text, and the windowing that answers a request (no I/O)."""

    def __init__(self, recordings: Sequence[Recording], clock: Callable[[], float] = time.time) -> None:
        self._by_query: dict[str, _Replayable] = {}
        self.replaced: list[str] = []
        """Queries recorded more than once; the later recording is served."""
        for recording in recordings:
            key = recording.query.strip()
            if key in self._by_query:
                self.replaced.append(key)
            self._by_query[key] = _prepare(recording)
        self.clock = clock

    @property
    def queries(self) -> list[str]:
        """The query texts it answers."""
        return list(self._by_query)

    def answer(self, params: dict[str, list[str]]) -> dict[str, Any]:
        """The Prometheus answer to a ``query_range`` request.

        Raises:
            QueryError: a missing or bad parameter, or a query no recording holds.
        """
        query = (params.get("query") or [""])[0].strip()
        if not query:
            raise QueryError('invalid parameter "query": missing')
        start, end, step = _number(params, "start"), _number(params, "end"), _number(params, "step")
        if end < start:
            raise QueryError('invalid parameter "end": end timestamp must not be before start time')
        if step <= 0:
            raise QueryError(
                'invalid parameter "step": zero or negative query resolution step widths are not accepted'
            )
        if (end - start) / step > MAX_POINTS:
            raise QueryError("exceeded maximum resolution of 11,000 points per timeseries")
        found = self._by_query.get(query)
        if found is None:
            raise QueryError(f"no recording for query {query!r} (recorded: {len(self._by_query)} queries)")
        offset = math.floor(self.clock()) - found.newest if found.newest > -math.inf else 0.0
        # Evaluation instants in recorded time, and how each is printed, computed once per request.
        count = int((end - start) // step) + 1
        instants = [(start + k * step - offset, _timestamp(start + k * step)) for k in range(count)]
        result = []
        for series in found.series:
            times, values = series.times, series.values
            points: list[list[Any]] = []
            i = -1
            for recorded, stamp in instants:
                # Instants only grow, so the latest sample at or before each one only moves forward.
                while i + 1 < len(times) and times[i + 1] <= recorded:
                    i += 1
                if i >= 0 and times[i] > recorded - LOOKBACK:
                    points.append([stamp, values[i]])
            if points:
                result.append({"metric": series.metric, "values": points})
        return {"status": "success", "data": {"resultType": "matrix", "result": result}}


def _timestamp(t: float) -> float | int:
    """Whole seconds as an integer, as Prometheus prints them (``1700000000``, not ``1700000000.0``)."""
    return int(t) if t == int(t) else round(t, 3)


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        body = msgspec.json.encode(payload)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _route(self, params: dict[str, list[str]]) -> None:
        path = urlsplit(self.path).path.rstrip("/")
        if path == "/api/v1/query_range":
            try:
                self._send(200, self.server.replay.answer(params))
            except QueryError as exc:
                log.info("query_range refused: %s", exc)
                self._send(400, {"status": "error", "errorType": "bad_data", "error": str(exc)})
        elif path == "/api/v1/status/buildinfo":
            self._send(
                200, {"status": "success", "data": {"version": "replay", "revision": "", "branch": ""}}
            )
        else:
            self._send(404, {"status": "error", "errorType": "not_found", "error": f"no route {path}"})

    def do_GET(self) -> None:
        self._route(parse_qs(urlsplit(self.path).query))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        form = self.rfile.read(length).decode("utf-8", "replace") if length else ""
        params = parse_qs(urlsplit(self.path).query)
        params.update(parse_qs(form))
        self._route(params)


class _HTTPServer(ThreadedHTTPServer):
    thread_name = "replay"
    replay: Replay


class ReplayServer:
    """A running replay endpoint in a background thread; use as a context manager.

    Args:
        replay: the recordings to serve.
        host: the address to listen on (loopback unless the caller checked otherwise).
        port: 0 for any free port; ``port`` holds the one chosen.
    """

    def __init__(self, replay: Replay, host: str = "127.0.0.1", port: int = 0) -> None:
        self._server = _HTTPServer((host, port), _Handler)
        self._server.replay = replay
        self.host = host
        self.port = self._server.port

    @property
    def query_range_url(self) -> str:
        """The URL to put in a summary's ``sourceEndpoint`` or a scorer's Prometheus setting."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/api/v1/query_range"

    def start(self) -> ReplayServer:
        """Serve in a background thread."""
        self._server.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket; idempotent."""
        self._server.stop()

    def __enter__(self) -> ReplayServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def parse_listen(listen: str) -> tuple[str, int]:
    """``host:port``, ``[v6]:port`` or ``:port`` (loopback) to a host and port.

    Raises:
        ValueError: not of that shape, or a port outside 0-65535.
    """
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--listen {listen!r}: expected HOST:PORT, [V6]:PORT or :PORT")
    return (host.strip("[]") or "127.0.0.1"), int(port)


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--listen",
    default="127.0.0.1:9090",
    show_default=True,
    help="HOST:PORT to serve on; :PORT means loopback. Name another host to serve the network.",
)
def replay(files: tuple[Path, ...], listen: str) -> None:
    """Serve recordings (from `record`) as a Prometheus query_range endpoint, shifted to now.

    Requests are matched to recordings by query text; an unknown query gets Prometheus' 400
    bad_data error. Runs until interrupted (Ctrl-C or SIGTERM).
    """
    try:
        host, port = parse_listen(listen)
    except ValueError as exc:
        fail(str(exc), code=ExitCode.USAGE)
    recordings: list[Recording] = []
    try:
        for path in files:
            recordings.extend(load(path).recordings)
    except RecordingError as exc:
        fail(str(exc), hint="record the file again with `dynamic-scoring record`", code=ExitCode.FINDINGS)
    if not recordings:
        fail("the files hold no recordings", code=ExitCode.FINDINGS)
    data = Replay(recordings)
    for query in data.replaced:
        click.echo(f"warning: query recorded more than once, serving the last: {query}", err=True)
    try:
        server = ReplayServer(data, host, port)
    except OSError as exc:
        fail(f"cannot listen on {listen}: {exc.strerror or exc}", code=ExitCode.UNREACHABLE)
    if not is_loopback(host):
        click.echo(f"warning: {host} is not loopback: the recordings are readable from the network", err=True)
    click.echo(f"serving {len(data.queries)} queries at {server.query_range_url} (Ctrl-C stops)", err=True)
    with server, sigterm_interrupts():
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            click.echo("stopped", err=True)


__all__ = ["LOOKBACK", "QueryError", "Replay", "ReplayServer", "is_loopback", "parse_listen", "replay"]
