"""``dynamic-scoring scorer ...``: tools for people who write scoring APIs.

``validate`` is thin on purpose: the checks are the scorer library's
(``dynamic_scoring.scorer.conformance``), so an author's pytest run and an operator's command line
judge a scorer by the same rules.  ``lint`` (``dynamic_scoring.ctl.lint``) checks DynamicScorer files offline.
"""

from __future__ import annotations

import json
import ssl
from pathlib import Path
from typing import Any

import click
import yaml

from dynamic_scoring.addon.registry.models import DynamicScorer, parse_scorer
from dynamic_scoring.contract.wire import check_dimension_labels
from dynamic_scoring.ctl.lint import lint_command
from dynamic_scoring.ctl.output import ExitCode, emit_json, fail, output_option
from dynamic_scoring.scorer.conformance import Checker, UnreachableError, label_sets


@click.group()
def scorer() -> None:
    """Check scoring APIs against the contract, and DynamicScorer files against the hub's rules."""


def _read_token(path: Path) -> str:
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"cannot read the token file {path}: {exc}", code=ExitCode.USAGE)
    if not token or not token.isascii() or not token.isprintable() or " " in token:
        fail(f"the token file {path} is empty or not printable ASCII without spaces", code=ExitCode.USAGE)
    return token


def _dimension_labels(entries: tuple[str, ...]) -> dict[str, str]:
    """``--dimension-label node=instance`` options as scoreDimensionLabels, checked as the hub does."""
    labels: dict[str, str] = {}
    for entry in entries:
        key, sep, label = entry.partition("=")
        if not sep:
            fail(
                f"--dimension-label {entry!r}: expected PLACEHOLDER=LABEL, e.g. node=instance",
                code=ExitCode.USAGE,
            )
        labels[key.strip()] = label.strip()
    try:
        check_dimension_labels(labels)
    except ValueError as exc:
        fail(f"--dimension-label: {exc}", code=ExitCode.USAGE)
    return labels


def _series_labels(entries: tuple[str, ...]) -> list[dict[str, str]]:
    """The ``--series-labels`` objects; a usage error names the one that is not JSON."""
    sets = []
    for entry in entries:
        try:
            sets.append(json.loads(entry))
        except ValueError as exc:
            fail(f"--series-labels {entry!r}: not JSON ({exc})", code=ExitCode.USAGE)
    try:
        label_sets(sets)
    except ValueError as exc:
        fail(f"--series-labels: {exc}", hint='give objects like \'{"pod": "a"}\'', code=ExitCode.USAGE)
    return sets


def _params(entries: tuple[str, ...]) -> dict[str, Any]:
    """``--param KEY=JSON`` options: each value read as JSON, a bare word as a string."""
    params: dict[str, Any] = {}
    for entry in entries:
        key, sep, text = entry.partition("=")
        if not sep or not key.strip():
            fail(
                f"--param {entry!r}: expected KEY=JSON, e.g. horizon=3600 or model=arima", code=ExitCode.USAGE
            )
        try:
            params[key.strip()] = json.loads(text)
        except ValueError:
            params[key.strip()] = text  # model=arima: a bare word is the string it reads as
    return params


def _params_from(path: Path) -> tuple[dict[str, Any], bool]:
    """The ``spec.scoring.params`` the agent sends for the DynamicScorer in ``path``.

    Also whether the scorer is in ``configSyncMode: Full`` (then ``/config``'s published parameters win,
    key by key).
    """
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if isinstance(d, dict)]
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        fail(f"--params-from {path}: cannot read a YAML document: {exc}", code=ExitCode.USAGE)
    scorers = [d for d in docs if d.get("kind") == "DynamicScorer"]
    if len(scorers) != 1:
        fail(
            f"--params-from {path}: holds {len(scorers)} DynamicScorers; give a file with exactly one",
            code=ExitCode.USAGE,
        )
    parsed = parse_scorer(scorers[0])
    if not isinstance(parsed, DynamicScorer):
        fail(
            f"--params-from {path}: {parsed.message}",
            hint=f"dynamic-scoring scorer lint {path} lists every problem",
            code=ExitCode.USAGE,
        )
    spec = parsed.spec
    params = spec.scoring.params.scorer_params() if spec.scoring and spec.scoring.params else {}
    return params, spec.config_sync_mode == "Full"


@scorer.command()
@click.argument("url")
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="File with the bearer token the agent sends; then requests without it must be refused.",
)
@click.option(
    "--ca-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="PEM CA bundle to verify an https scorer with (default: the system's CAs; never unverified).",
)
@click.option("--scoring-path", help="Scoring path (default: scoring.path from /config, else /scoring).")
@click.option(
    "--timeout", type=click.FloatRange(min=0.1), default=30.0, show_default=True, help="Seconds per request."
)
@click.option("--no-large", is_flag=True, help="Skip the 10,000-series input (it takes seconds).")
@click.option(
    "--dimension-format",
    metavar="FORMAT",
    help="The DynamicScorer's scoreDimensionFormat, to check that results get item names apart "
    "(default: the agent's default ${scoreName}).",
)
@click.option(
    "--dimension-label",
    "dimension_labels",
    multiple=True,
    metavar="PLACEHOLDER=LABEL",
    help="The DynamicScorer's scoreDimensionLabels, one entry per option: node=instance makes ${node} "
    "read the instance label.",
)
@click.option(
    "--param",
    "param_entries",
    multiple=True,
    metavar="KEY=JSON",
    help="A scoring.params key the agent sends to the scorer, one per option; the value is JSON, a "
    "bare word a string: --param horizon=3600 --param model=arima.  Overrides --params-from.",
)
@click.option(
    "--params-from",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    metavar="FILE",
    help="A file with one DynamicScorer: send its spec.scoring.params as the agent would, and the "
    "parameters /config publishes only when its configSyncMode is Full.",
)
@click.option(
    "--series-labels",
    "series_labels",
    multiple=True,
    metavar="JSON",
    help="A label set the series sent carry, as a JSON object; repeat for several, sent in turn "
    "(default: per-pod CPU labels).  For a scorer that reads particular metrics: --series-labels "
    '\'{"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": "n1", "gpu": "0"}\'.',
)
@output_option
def validate(
    url: str,
    token_file: Path | None,
    ca_file: Path | None,
    scoring_path: str | None,
    timeout: float,
    no_large: bool,
    dimension_format: str | None,
    dimension_labels: tuple[str, ...],
    param_entries: tuple[str, ...],
    params_from: Path | None,
    series_labels: tuple[str, ...],
    output: str,
) -> None:
    """Check the scoring API at URL (its base, e.g. http://127.0.0.1:8000) against the contract.

    Checks /healthz, the /config schema, the scoring path with empty, small, non-finite and large
    (10,000-series) inputs, the answers' schema, scores and labels (every bad result is listed),
    item names under --dimension-format, latency, and the token.  Every scoring request carries the
    params the agent would send: --param and --params-from, and what /config publishes (as a hub in
    configSyncMode Full sends it; not for a --params-from scorer in None).  Exit 0 when nothing is an error
    (warnings allowed), 1 on any error finding, 2 for bad arguments, 3 when nothing answers at URL.
    """
    token = _read_token(token_file) if token_file is not None else None
    labels = _dimension_labels(dimension_labels)
    params, full = _params_from(params_from) if params_from is not None else ({}, True)
    params.update(_params(param_entries))
    try:
        checker = Checker(
            url,
            token=token,
            scoring_path=scoring_path,
            timeout=timeout,
            large=not no_large,
            ca_file=str(ca_file) if ca_file else None,
            dimension_format=dimension_format,
            dimension_labels=labels,
            params=params,
            config_params=full,
            series_labels=_series_labels(series_labels),
        )
    except (ValueError, ssl.SSLError) as exc:  # ssl: a CA file that is not PEM
        fail(str(exc), hint="give the scorer's base URL, e.g. http://127.0.0.1:8000", code=ExitCode.USAGE)
    try:
        report = checker.run()
    except UnreachableError as exc:
        fail(str(exc), hint="is the scorer running and listening on that address?")
    if output == "json":
        emit_json(report.to_json())
    else:
        click.echo(report.text())
    raise SystemExit(int(ExitCode.OK if report.ok else ExitCode.FINDINGS))


scorer.add_command(lint_command)

__all__ = ["scorer", "validate"]
