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
import unicodedata
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


def terminal_safe(text: str) -> str:
    r"""`text` with every control and format character spelled out (``\x1b``, ``\u202e``).

    Names, messages and condition text come from hub objects, which anyone who may write them
    chooses: raw, an escape sequence could clear the screen, rewrite lines already shown, retitle
    the window or hide text (bidirectional overrides, zero-width characters).  Tabs and newlines
    are spelled out too, since each value is one cell or one line.  Printable text, including
    non-ASCII letters, is unchanged.  (JSON output needs none of this: `json.dumps` escapes
    these characters already.)
    """
    if text.isprintable():
        return text
    return "".join(
        c if unicodedata.category(c) not in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp") else _spelled(c)
        for c in text
    )


def _spelled(c: str) -> str:
    code = ord(c)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def echo_lines(text: str) -> None:
    """Print `text` line by line through `terminal_safe`: a report whose values come from the hub."""
    click.echo("\n".join(terminal_safe(line) for line in text.split("\n")))


def emit_json(document: Any) -> None:
    """Write one JSON document to stdout (sorted keys are not used: field order carries meaning)."""
    click.echo(json.dumps(document, indent=2, default=str))


def fail(message: str, *, hint: str = "", code: ExitCode = ExitCode.UNREACHABLE) -> NoReturn:
    """Print ``error: message`` (and what to do next) to stderr and exit with ``code``."""
    click.echo(f"error: {message}", err=True)
    if hint:
        click.echo(f"hint: {hint}", err=True)
    sys.exit(int(code))
