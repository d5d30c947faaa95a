"""The command line the sample scorers share, turned into a ``dynamic_scoring.scorer.ScorerApp``.

The HTTP side (``/healthz``, ``/config``, the scoring path, body caps, errors, the optional token)
is the scorer library's; what is left here is the samples' own options and their checks, so that a
bad option stops the process at start with a usage message instead of failing at the first request.
The one request parameter the forecasting samples share, ``params.horizon``, is read here too.
"""

from __future__ import annotations

import argparse
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dynamic_scoring.contract.wire import MAX_HORIZON_SECONDS, ScorerConfig
from dynamic_scoring.scorer import (
    BearerToken,
    RequestError,
    ScoreFn,
    ScorerApp,
    ScoringRequest,
    Series,
    TokenError,
    serve,
)


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
    capacity_option: bool = True
    """Whether the scorer takes ``--capacity-cores`` (the CPU samples do; the GPU sample does not)."""


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
    if defaults.capacity_option:
        p.add_argument("--capacity-cores", type=float, default=4.0, help="load (cores) that scores 0")
    p.add_argument(
        "--token-file",
        default=None,
        help="file holding the bearer token the scoring path requires (a mounted Secret; default: none)",
    )
    p.add_argument("--log-level", default="INFO")
    return p


def build_app(
    args: argparse.Namespace, parser: argparse.ArgumentParser, description: str, score: ScoreFn
) -> ScorerApp:
    """The app the options describe; a bad option exits with a usage message (``parser.error``)."""
    if not getattr(args, "capacity_cores", 1.0) > 0:
        parser.error("--capacity-cores must be positive")
    if args.range < 1 or args.step < 1 or args.step > args.range or args.interval < 1:
        parser.error("--range, --step and --interval must be at least 1, and --step at most --range")
    if not args.scoring_path.startswith("/") or args.scoring_path in ("/healthz", "/config"):
        parser.error("--scoring-path must start with '/' and differ from /healthz and /config")
    try:
        token = BearerToken.from_file(args.token_file) if args.token_file else None
    except TokenError as exc:
        parser.error(f"--token-file: {exc}")
    return ScorerApp(
        score,
        name=args.score_name,
        description=description,
        query=args.query,
        range=args.range,
        step=args.step,
        interval=args.interval,
        source_host=args.prometheus_url,
        scoring_path=args.scoring_path,
        advertise_url=args.advertise_url,
        token=token,
    )


def is_number(value: Any) -> bool:
    """A JSON number (not a boolean, which Python counts as an int) that is finite."""
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


def named_series(request: ScoringRequest, names: Sequence[str], exporter: str) -> list[Series]:
    """The request's series with points whose metric name (``__name__``) is one of ``names``.

    Raises:
        RequestError: there are series but none of them has one of those names: the query dropped
            the names (a function or an aggregation) or selects other metrics.
    """
    series = list(request.with_points())
    found = [s for s in series if s.label("__name__") in names]
    if series and not found:
        wanted = ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]
        raise RequestError(
            f"no {wanted} series among {len(series)}: the query must return the {exporter}'s"
            " series with their metric names (a plain selector, no functions)"
        )
    return found


def requested_horizon(request: ScoringRequest, default: float) -> float:
    """The request's ``params.horizon`` (seconds ahead to forecast) when it sends one, else ``default``.

    Raises:
        RequestError: ``horizon`` is not a number of seconds from 0 to `MAX_HORIZON_SECONDS` (30 days).
    """
    value = request.params.get("horizon", default)
    if not is_number(value) or not 0 <= value <= MAX_HORIZON_SECONDS:
        raise RequestError(f"params.horizon: expected a number of seconds from 0 to {MAX_HORIZON_SECONDS}")
    return float(value)


def config_document(args: argparse.Namespace, description: str) -> ScorerConfig:
    """The ``/config`` document the options give."""
    app = build_app(args, argparse.ArgumentParser(), description, lambda request: [])
    return app.config()


def run(args: argparse.Namespace, parser: argparse.ArgumentParser, description: str, score: ScoreFn) -> None:
    """Validate the options, bind, log where it listens, and serve until SIGTERM or Ctrl-C."""
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(message)s")
    serve(build_app(args, parser, description, score), args.host, args.port)


__all__ = [
    "Defaults",
    "build_app",
    "build_parser",
    "config_document",
    "is_number",
    "named_series",
    "requested_horizon",
    "run",
]
