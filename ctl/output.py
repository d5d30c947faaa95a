"""What every subcommand shares: the ``-o`` option, exit codes, and how errors reach the user.

Exit codes are part of the interface, so scripts can branch on them without parsing text:

* ``OK`` (0): the command did what was asked and found nothing wrong;
* ``FINDINGS`` (1): it ran, and what it checked is wrong (a failing contract check, a decision
  that disagrees with our computation, an unhealthy cluster);
* ``USAGE`` (2): click's own code for bad arguments;
* ``UNREACHABLE`` (3): it could not ask (hub, Prometheus or scorer unreachable, kubeconfig unusable).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from enum import IntEnum
from typing import Any, NoReturn, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


class ExitCode(IntEnum):
    """Process exit codes shared by every subcommand."""

    OK = 0
    FINDINGS = 1
    USAGE = 2
    UNREACHABLE = 3


def output_option(func: F) -> F:
    """``-o/--output text|json``: text for people (the default), JSON for machines."""
    return click.option(
        "-o",
        "--output",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help="Output format: readable text, or one JSON document on stdout.",
    )(func)


def emit_json(document: Any) -> None:
    """Write one JSON document to stdout (sorted keys are not used: field order carries meaning)."""
    click.echo(json.dumps(document, indent=2, default=str))


def fail(message: str, *, hint: str = "", code: ExitCode = ExitCode.UNREACHABLE) -> NoReturn:
    """Print ``error: message`` (and what to do next) to stderr and exit with ``code``."""
    click.echo(f"error: {message}", err=True)
    if hint:
        click.echo(f"hint: {hint}", err=True)
    sys.exit(int(code))
