"""``dynamic-scoring record``: capture Prometheus ``query_range`` answers into a recording file.

Each query is fetched with the agent's own ``query_range`` (same URL, parameters, size limit and
error texts as a scoring cycle), over one window shared by all queries, and stored with the
window and the capture time (format: ``dynamic_scoring.ctl.recording``).  What the agent does not keep is not
kept either: Prometheus' ``warnings`` and ``infos`` beside the matrix are dropped.
"""

from __future__ import annotations

import asyncio
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import click
import httpx
import msgspec

from dynamic_scoring.agent.errors import AgentError, PrometheusUnavailable
from dynamic_scoring.agent.http import default_ssl_context
from dynamic_scoring.agent.source.prometheus import RangeWindow, query_range
from dynamic_scoring.ctl.output import ExitCode, fail
from dynamic_scoring.ctl.recording import Recording, RecordingFile
from dynamic_scoring.outbound.urls import redact_url

QUERY_RANGE_PATH = "/api/v1/query_range"
_DURATION = re.compile(r"(\d+)(ms|y|w|d|h|m|s)")
_UNIT_SECONDS = {"y": 365 * 86400, "w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_duration(text: str) -> int:
    """Whole seconds from ``90``, ``90s``, ``5m``, ``1h30m`` (Prometheus' units, ``ms`` excluded).

    Raises:
        ValueError: empty, an unknown unit, or zero.
    """
    text = text.strip()
    if text.isdigit():
        seconds = int(text)
    else:
        parts = _DURATION.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text or any(u == "ms" for _, u in parts):
            raise ValueError(f"{text!r} is not a duration in whole seconds (e.g. 30s, 5m, 1h)")
        seconds = sum(int(n) * _UNIT_SECONDS[u] for n, u in parts)
    if seconds < 1:
        raise ValueError(f"{text!r}: must be at least 1 second")
    return seconds


def query_range_endpoint(url: str) -> str:
    """``url`` as a ``query_range`` endpoint: a bare ``http://host:9090`` gets the API path appended.

    Raises:
        ValueError: not an http(s) URL with a host.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{redact_url(url)!r} is not an http or https URL with a host")
    if parts.path.rstrip("/").endswith(QUERY_RANGE_PATH):
        return url
    return url.rstrip("/") + QUERY_RANGE_PATH


def _duration(_: click.Context, param: click.Parameter, value: str) -> int:
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param=param) from exc


async def capture(
    endpoint: str,
    queries: list[str],
    window: RangeWindow,
    *,
    headers: dict[str, str] | None = None,
    ca_files: tuple[Path, ...] = (),
    timeout: float = 30.0,
) -> list[Recording]:
    """One recording per query, fetched in order over ``window``.

    Raises:
        AgentError: the agent's own error for the first query that failed.
    """
    captured = datetime.now(UTC).replace(microsecond=0)
    out: list[Recording] = []
    async with httpx.AsyncClient(verify=default_ssl_context(ca_files), follow_redirects=False) as client:
        for index, query in enumerate(queries):
            raw = await query_range(
                client, endpoint, query, window, index=index, headers=headers, timeout=timeout
            )
            result = msgspec.json.decode(raw)
            recording = Recording.model_validate(
                {
                    "query": query,
                    "start": window.start,
                    "end": window.end,
                    "step": window.step,
                    "capturedAt": captured,
                    "prometheus": redact_url(endpoint),
                    "response": {"status": "success", "data": {"resultType": "matrix", "result": result}},
                }
            )
            recording.series()  # refuse now what replay would refuse later (e.g. native histograms)
            out.append(recording)
    return out


@click.command()
@click.option("--prometheus", "url", required=True, help="Prometheus base URL or its query_range URL.")
@click.option("--query", "queries", required=True, multiple=True, help="PromQL; repeat for several queries.")
@click.option(
    "--range", "range_", default="1h", show_default=True, callback=_duration, help="History to capture."
)
@click.option("--step", default="60s", show_default=True, callback=_duration, help="Resolution.")
@click.option("--end", type=float, default=None, help="Unix seconds the window ends at (default: now).")
@click.option(
    "--token-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="File holding a bearer token for Prometheus (never printed).",
)
@click.option(
    "--ca-file",
    "ca_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Extra CA bundle (PEM) to trust; TLS is always verified.",
)
@click.option(
    "-o",
    "--output",
    "out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Recording file to write (JSON; the summary goes to stdout as text).",
)
def record(
    url: str,
    queries: tuple[str, ...],
    range_: int,
    step: int,
    end: float | None,
    token_file: Path | None,
    ca_files: tuple[Path, ...],
    out: Path,
) -> None:
    """Capture query_range answers from Prometheus into a recording file for `replay`.

    All queries share one window: RANGE of history ending at --end (now), every STEP. Unlike
    the other commands, -o names the file: the recording itself is the machine-readable output.
    """
    try:
        endpoint = query_range_endpoint(url)
    except ValueError as exc:
        fail(f"--prometheus: {exc}", code=ExitCode.USAGE)
    if step > range_:
        fail(f"--step {step}s is larger than --range {range_}s", code=ExitCode.USAGE)
    headers = {}
    if token_file is not None:
        token = token_file.read_text(encoding="utf-8").strip()
        if not token:
            fail(f"--token-file {token_file} is empty", code=ExitCode.USAGE)
        headers["Authorization"] = f"Bearer {token}"
    window = RangeWindow.ending_at(time.time() if end is None else end, range_, step)
    try:
        recordings = asyncio.run(capture(endpoint, list(queries), window, headers=headers, ca_files=ca_files))
    except AgentError as exc:
        code = ExitCode.UNREACHABLE if isinstance(exc, PrometheusUnavailable) else ExitCode.FINDINGS
        fail(f"{exc.reason}: {exc}", hint="nothing was written", code=code)
    out.write_text(RecordingFile(recordings=recordings).dumps(), encoding="utf-8")
    rows = [
        {"query": r.query, "series": len(r.series()), "points": sum(len(s.values) for s in r.series())}
        for r in recordings
    ]
    click.echo(f"wrote {out}: window {window.start}..{window.end} step {step}s")
    for row in rows:
        click.echo(f"  {row['series']:>6} series {row['points']:>8} points  {row['query']}")


__all__ = ["capture", "parse_duration", "query_range_endpoint", "record"]
