"""What every subcommand shares: the ``-o`` option, exit codes, and how errors reach the user.

Exit codes are part of the interface, so scripts can branch on them without parsing text:

* ``OK`` (0): the command did what was asked and found nothing wrong;
* ``FINDINGS`` (1): it ran, and what it checked is wrong (a failing contract check, a decision
  that disagrees with our computation, an unhealthy cluster);
* ``USAGE`` (2): click's own code for bad arguments (a ``--kubeconfig`` given that does not exist
  or does not load is one too);
* ``UNREACHABLE`` (3): it could not ask (hub, Prometheus or scorer unreachable, the default
  kubeconfig missing or unusable).

Every error a command ends with goes through ``fail`` (ours) or ``Group`` (click's usage errors),
so with ``-o json`` it is one JSON document on stdout, ``{"error": {"code", "kind", "message",
"hint"}}``, and in text mode ``error: ...`` and ``hint: ...`` on stderr.
"""

from __future__ import annotations

import json
import sys
import unicodedata
from collections.abc import Callable, Sequence
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


ERROR_KINDS = {
    ExitCode.FINDINGS: "findings",
    ExitCode.USAGE: "usage",
    ExitCode.UNREACHABLE: "unreachable",
}
"""The ``kind`` of an error document, one per exit code other than 0."""

_FORMAT = "dynamic_scoring.output"
"""Key of the chosen ``-o`` in ``click.Context.meta`` (shared by a command and its parents)."""


def _remember(ctx: click.Context, param: click.Parameter, value: str) -> str:
    ctx.meta[_FORMAT] = value
    return value


def output_option(func: F) -> F:
    """``-o/--output text|json``: text for people (the default), JSON for machines.

    Eager, so it is known before any other argument can fail: a bad one is reported in JSON too.
    """
    return click.option(
        "-o",
        "--output",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        is_eager=True,
        callback=_remember,
        help="Output format: readable text, or one JSON document on stdout.",
    )(func)


def wants_json() -> bool:
    """Whether the running command was given ``-o json``."""
    ctx = click.get_current_context(silent=True)
    return ctx is not None and ctx.meta.get(_FORMAT) == "json"


def _json_in(args: Sequence[str]) -> bool:
    """Whether raw arguments ask for ``-o json``: for errors raised before ``-o`` was processed."""
    for i, arg in enumerate(args):
        if arg == "--":
            return False
        if arg in ("-o", "--output") and i + 1 < len(args) and args[i + 1] == "json":
            return True
        if arg in ("-ojson", "--output=json"):
            return True
    return False


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


def error_document(message: str, *, hint: str = "", code: ExitCode) -> dict[str, Any]:
    """The ``-o json`` form of an error: ``{"error": {"code", "kind", "message", "hint"}}``."""
    return {"error": {"code": int(code), "kind": ERROR_KINDS[code], "message": message, "hint": hint or None}}


def report_error(message: str, *, hint: str = "", code: ExitCode, as_json: bool | None = None) -> None:
    """Show an error: one JSON document on stdout under ``-o json``, else ``error:``/``hint:`` on stderr."""
    if wants_json() if as_json is None else as_json:
        emit_json(error_document(message, hint=hint, code=code))
        return
    click.echo(f"error: {message}", err=True)
    if hint:
        click.echo(f"hint: {hint}", err=True)


def fail(message: str, *, hint: str = "", code: ExitCode = ExitCode.UNREACHABLE) -> NoReturn:
    """End the command with ``code``: the error (and what to do next) as ``report_error`` shows it."""
    report_error(message, hint=hint, code=code)
    sys.exit(int(code))


class Group(click.Group):
    """The top-level group: click's own usage errors also become one JSON document under ``-o json``.

    Text mode keeps click's rendering (usage line, ``Try ... -h``, ``Error: ...``) unchanged.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Keep the raw arguments: an unknown option fails before ``-o`` is processed."""
        ctx.meta[_FORMAT + ".args"] = list(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the subcommand; under ``-o json`` a ``ClickException`` becomes an error document."""
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:
            failed = exc.ctx if isinstance(exc, click.UsageError) else None
            as_json = ctx.meta.get(_FORMAT) == "json" or (
                _FORMAT not in ctx.meta  # click failed before it got to -o: read the arguments
                and failed is not None
                and any(getattr(p, "callback", None) is _remember for p in failed.command.params)
                and _json_in(ctx.meta.get(_FORMAT + ".args", []))
            )
            if not as_json:
                raise
            code = ExitCode.USAGE if exc.exit_code == ExitCode.USAGE else ExitCode.FINDINGS
            hint = f"see `{failed.command_path} --help`" if failed is not None else ""
            report_error(exc.format_message(), hint=hint, code=code, as_json=True)
            sys.exit(int(code))
