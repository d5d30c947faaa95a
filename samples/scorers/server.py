"""The HTTP side shared by both sample scorers: ``/healthz``, ``/config`` and the scoring path.

The standard library's ``ThreadingHTTPServer`` is enough for a sample: one agent per cluster calls
once per interval.  Bodies are capped (``MAX_BODY_BYTES``) and must carry ``Content-Length``, so a
client cannot make the process buffer without bound.  Every failed request gets a JSON
``{"error": ...}`` body and a log line, and the server keeps serving.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from dynamic_scoring.wire import (
    ScorerConfig,
    ScoreResult,
    ScoringConfig,
    ScoringParams,
    ScoringResponse,
    SourceConfig,
    SourceParams,
    display_name,
)
from samples.scorers.series import RequestError, Series, parse_request

MAX_BODY_BYTES = 32 * 1024 * 1024
"""The agent sends at most 64 MiB of series per cycle; a sample needs far less."""

log = logging.getLogger("samples.scorers")

ScoreFn = Callable[[Series], float | None]
"""Scores one series; ``None`` skips it (no usable points)."""


@dataclass(frozen=True)
class Defaults:
    """What a scorer publishes in ``/config`` unless the command line says otherwise."""

    name: str
    description: str
    port: int
    query: str
    range: int
    step: int
    interval: int


def score_all(series: Sequence[Series], score: ScoreFn) -> ScoringResponse:
    """One result per series that can be scored, labels passed through for the dimension format."""
    results = []
    for s in series:
        value = score(s)
        if value is not None:
            results.append(ScoreResult(metric=s.labels, score=value))
    return ScoringResponse(results=results)


class ScoringServer:
    """A scorer listening on ``host:port``; ``port`` 0 picks a free one (see ``.port``)."""

    def __init__(
        self, host: str, port: int, config: Callable[[int], ScorerConfig], scoring_path: str, score: ScoreFn
    ) -> None:
        app = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "dynamic-scoring-sample"
            timeout = 30  # seconds a client may stay silent before its connection is dropped

            def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _error(self, status: int, message: str) -> None:
                # The path is the client's text: escaped so that it cannot forge a log line.
                log.warning("%s %s -> %d: %s", self.command, display_name(self.path), status, message)
                self._send(status, json.dumps({"error": message}).encode())

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/healthz":
                    self._send(200, b"ok", "text/plain")
                elif path == "/config":
                    self._send(200, app.config_body)
                else:
                    self._error(404, f"no such path; try /healthz, /config or POST {scoring_path}")

            def do_POST(self) -> None:
                if self.path.split("?", 1)[0] != scoring_path:
                    self._error(404, f"POST the series to {scoring_path}")
                    return
                length = self.headers.get("Content-Length")
                if length is None or not length.isdigit():
                    self._error(411, "a Content-Length header is required")
                    return
                if int(length) > MAX_BODY_BYTES:
                    self._error(413, f"the body is larger than {MAX_BODY_BYTES} bytes")
                    return
                try:
                    series = parse_request(self.rfile.read(int(length)))
                    response = score_all(series, app.score)
                except RequestError as exc:
                    self._error(400, str(exc))
                    return
                except Exception as exc:  # a bug in a score function: answer, log, keep serving
                    log.exception("scoring failed")
                    self._error(500, f"scoring failed: {type(exc).__name__}")
                    return
                self._send(200, response.model_dump_json().encode())
                log.info("scored %d series, %d results", len(series), len(response.results))

            def log_message(self, format: str, *args: Any) -> None:
                pass  # one line per outcome is logged above instead of the access log

        self.score = score
        self._httpd = ThreadingHTTPServer((host, port), Handler)
        self._httpd.daemon_threads = True
        # The document names the bound port, which is known only now when ``port`` was 0.
        self.config = config(self.port)
        self.config_body = self.config.model_dump_json().encode()

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self._httpd.server_address[1])

    def serve_forever(self) -> None:
        """Serve until ``shutdown`` (from another thread or a signal handler)."""
        self._httpd.serve_forever()

    def shutdown(self) -> None:
        """Stop ``serve_forever`` (call from another thread) and release the port."""
        self._httpd.shutdown()
        self._httpd.server_close()


def build_parser(prog: str, defaults: Defaults) -> argparse.ArgumentParser:
    """The command line both scorers share; each adds its own knobs."""
    p = argparse.ArgumentParser(prog=prog, description=defaults.description)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    p.add_argument("--port", type=int, default=defaults.port, help="port to listen on (0: any free port)")
    p.add_argument(
        "--advertise-url",
        default="",
        help="base URL agents use for this scorer, published in /config (default: http://HOST:PORT)",
    )
    p.add_argument("--score-name", default=defaults.name, help="score name published in /config")
    p.add_argument("--scoring-path", default="/scoring", help="path of the scoring endpoint")
    p.add_argument(
        "--prometheus-url",
        default="",
        help="Prometheus base URL published in /config as source.host (empty: the DynamicScorer sets it)",
    )
    p.add_argument("--query", default=defaults.query, help="PromQL published in /config")
    p.add_argument("--range", type=int, default=defaults.range, help="seconds of history per request")
    p.add_argument("--step", type=int, default=defaults.step, help="seconds between points")
    p.add_argument("--interval", type=int, default=defaults.interval, help="seconds between scoring cycles")
    p.add_argument("--capacity-cores", type=float, default=4.0, help="load (cores) that scores 0")
    p.add_argument("--log-level", default="INFO")
    return p


def config_document(args: argparse.Namespace, description: str, port: int) -> ScorerConfig:
    """The ``/config`` document from the parsed command line."""
    host = args.advertise_url or f"http://{args.host}:{port}"
    return ScorerConfig(
        name=args.score_name,
        description=description,
        source=SourceConfig(
            type="Prometheus",
            host=args.prometheus_url,
            path="/api/v1/query_range",
            params=SourceParams(query=args.query, range=args.range, step=args.step),
        ),
        scoring=ScoringConfig(
            host=host,
            path=args.scoring_path,
            params=ScoringParams(name=args.score_name, interval=args.interval),
        ),
    )


def run(args: argparse.Namespace, parser: argparse.ArgumentParser, description: str, score: ScoreFn) -> None:
    """Validate the options, bind, print where it listens, and serve until SIGTERM or Ctrl-C."""
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(message)s")
    if not args.capacity_cores > 0:
        parser.error("--capacity-cores must be positive")
    if args.range < 1 or args.step < 1 or args.step > args.range or args.interval < 1:
        parser.error("--range, --step and --interval must be at least 1, and --step at most --range")
    if not args.scoring_path.startswith("/") or args.scoring_path in ("/healthz", "/config"):
        parser.error("--scoring-path must start with '/' and differ from /healthz and /config")
    server = ScoringServer(
        args.host, args.port, lambda port: config_document(args, description, port), args.scoring_path, score
    )

    def stop(signum: int, frame: object) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info(
        "%s listening on http://%s:%d (POST %s)", args.score_name, args.host, server.port, args.scoring_path
    )
    server.serve_forever()


__all__ = [
    "MAX_BODY_BYTES",
    "Defaults",
    "ScoreFn",
    "ScoringServer",
    "build_parser",
    "config_document",
    "run",
    "score_all",
]
