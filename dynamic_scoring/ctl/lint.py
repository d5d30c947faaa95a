"""``dynamic-scoring scorer lint FILE...``: check DynamicScorer files offline, by the hub's own rules.

Nothing is asked of any server.  Each DynamicScorer document is read as the hub reads the object:
its spellings normalised and its ``spec`` validated by the hub's model
(``dynamic_scoring.addon.registry.models``),
then resolved by the hub's ``resolve`` (URLs, required hosts and queries, ``step <= range``,
``sources``, ``scoring.params``), and the scorers of all files planned together by the
distribution's ``plan`` (two scorers publishing one score name or one AddOnPlacementScore name).
The rules are those modules', not copies.  Only what is certain offline is checked: a
``configSyncMode: Full`` scorer's ``/config`` fields are checked when the hub syncs them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import click
import yaml
from pydantic import ValidationError

from dynamic_scoring.addon.distribution.plan import ScorerInput, plan
from dynamic_scoring.addon.registry.effective import Resolution, resolve
from dynamic_scoring.addon.registry.models import API_VERSION, DynamicScorer, DynamicScorerSpec, parse_scorer
from dynamic_scoring.addon.registry.spellings import normalise_scorer_spec
from dynamic_scoring.contract.validation import validation_issues
from dynamic_scoring.ctl.output import ExitCode, echo_lines, emit_json, fail, output_option

ERROR = "error"
WARNING = "warning"
NOTE = "note"


@dataclass(frozen=True)
class Problem:
    """One thing wrong (or worth knowing) in one document: where, how bad, what."""

    file: str
    document: int
    """0-based position of the YAML document in the file."""
    item: int | None
    """Position in ``items`` when the document is a ``List`` (``kubectl get -o yaml``)."""
    name: str
    severity: str
    field: str
    message: str


@dataclass
class _Scorer:
    file: str
    document: int
    item: int | None
    name: str
    obj: Mapping[str, Any]


def _documents(path: Path) -> list[Any]:
    """Every YAML (or JSON) document of the file; exits 2 when it cannot be read."""
    try:
        return list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        fail(
            f"{path}: cannot read a YAML or JSON document: {exc}",
            hint="lint reads DynamicScorer manifests (YAML or JSON, several documents allowed)",
            code=ExitCode.USAGE,
        )


def _objects(documents: list[Any]) -> Iterator[tuple[int, int | None, Any]]:
    for i, doc in enumerate(documents):
        if isinstance(doc, Mapping) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            for j, item in enumerate(doc["items"]):
                yield i, j, item
        elif doc is not None:
            yield i, None, doc


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return ""
    namespace, name = meta.get("namespace"), meta.get("name")
    return f"{namespace}/{name}" if namespace else str(name or "")


def _check(scorer: _Scorer) -> tuple[list[Problem], Resolution | None]:
    """The problems of one DynamicScorer object, and how the hub resolves it when it can."""
    found: list[Problem] = []

    def add(severity: str, field: str, message: str) -> None:
        found.append(
            Problem(scorer.file, scorer.document, scorer.item, scorer.name, severity, field, message)
        )

    obj = scorer.obj
    if obj.get("apiVersion") != API_VERSION:
        add(ERROR, "apiVersion", f"is {obj.get('apiVersion')!r}, expected {API_VERSION!r}")
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str) or not meta.get("name"):
        add(ERROR, "metadata.name", "required")
    spec = obj.get("spec", {})
    if not isinstance(spec, Mapping):
        add(ERROR, "spec", f"is a {type(spec).__name__}, expected an object")
        return found, None
    raw, _ = normalise_scorer_spec(spec)
    try:
        DynamicScorerSpec.model_validate(raw)
    except ValidationError as exc:
        for where, what in validation_issues(exc, prefix="spec"):
            add(ERROR, where, what)
        return found, None
    parsed = parse_scorer(obj)
    if not isinstance(parsed, DynamicScorer):  # the model accepted the spec above
        add(ERROR, "spec", parsed.message)
        return found, None
    resolution = resolve(parsed)
    for problem in resolution.problems:
        add(ERROR, problem.field, problem.message)
    for note in resolution.notes:
        where, sep, what = note.partition(": ")
        if "stays literal in every item name" in note:
            add(WARNING, where, what)
        else:
            add(NOTE, where if sep else "", what if sep else note)
    if resolution.pending:
        add(
            NOTE,
            "spec.configSyncMode",
            "Full: what the scorer's /config supplies (query, range, step, interval, score name, "
            "item format) is not checked offline; `dynamic-scoring scorer validate URL` checks it",
        )
    formats = parsed.spec.score_dimension_formats or []
    for i, fmt in enumerate(formats):
        if fmt in formats[:i]:
            add(
                WARNING,
                f"spec.scoreDimensionFormats[{i}]",
                f"repeats entry {formats.index(fmt)}: every result's two items get the same name "
                "(the later wins)",
            )
    return found, resolution


def lint(paths: list[Path]) -> tuple[list[Problem], int]:
    """Every problem of the DynamicScorers in ``paths``, and how many DynamicScorers were read."""
    scorers: list[_Scorer] = []
    problems: list[Problem] = []
    for path in paths:
        for i, j, obj in _objects(_documents(path)):
            if not isinstance(obj, Mapping):
                problems.append(
                    Problem(str(path), i, j, "", ERROR, "", f"is a {type(obj).__name__}, not an object")
                )
            elif obj.get("kind") == "DynamicScorer":
                scorers.append(_Scorer(str(path), i, j, _name(obj), obj))
    inputs: dict[str, ScorerInput] = {}  # by namespace/name: a later document replaces an earlier one
    by_name: dict[str, _Scorer] = {}
    seen: dict[str, _Scorer] = {}
    for scorer in scorers:
        found, resolution = _check(scorer)
        problems.extend(found)
        first = seen.setdefault(scorer.name, scorer)
        if first is not scorer and scorer.name:
            problems.append(
                Problem(
                    scorer.file,
                    scorer.document,
                    scorer.item,
                    scorer.name,
                    WARNING,
                    "metadata.name",
                    f"DynamicScorer {scorer.name} is also in {first.file} document {first.document}: "
                    "applied, the later replaces the earlier",
                )
            )
        if resolution is not None:
            meta = scorer.obj.get("metadata") or {}
            name, created = str(meta.get("name", "")), str(meta.get("creationTimestamp") or "")
            inputs[scorer.name] = ScorerInput(name, created, resolution.summary, active=True)
            by_name[name] = scorer
    # Score-name and AddOnPlacementScore-name conflicts between scorers: the distribution's own rule.
    for conflict in plan(list(inputs.values()), [], []).problems:
        owner, _, where = conflict.field.partition(": ")
        scorer = by_name[owner.removeprefix("DynamicScorer ")]
        problems.append(
            Problem(scorer.file, scorer.document, scorer.item, scorer.name, ERROR, where, conflict.message)
        )
    order = {str(path): n for n, path in enumerate(paths)}
    problems.sort(key=lambda p: (order[p.file], p.document, -1 if p.item is None else p.item))
    return problems, len(scorers)


def _where(p: Problem) -> str:
    item = f" item {p.item}" if p.item is not None else ""
    name = f" {p.name}" if p.name else ""
    return f"{p.file}: document {p.document}{item}{name}"


def _text(problems: list[Problem], count: int, files: int) -> str:
    lines: list[str] = []
    current = ""
    for p in problems:
        if _where(p) != current:
            current = _where(p)
            lines.append(current)
        field = f"{p.field}: " if p.field else ""
        lines.append(f"  {p.severity.upper():<7} {field}{p.message}")
    errors = sum(p.severity == ERROR for p in problems)
    warnings = sum(p.severity == WARNING for p in problems)
    lines.append(f"{count} DynamicScorer(s) in {files} file(s): {errors} error(s), {warnings} warning(s)")
    return "\n".join(lines)


@click.command(name="lint")
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path), metavar="FILE..."
)
@output_option
def lint_command(files: tuple[Path, ...], output: str) -> None:
    """Check DynamicScorer files (YAML or JSON, several documents each) offline, by the hub's rules.

    Each problem is named by file, document index and field path.  Documents of other kinds are
    skipped.  Exit 0 when nothing is an error (warnings allowed), 1 on any error, 2 when a file
    cannot be read.
    """
    problems, count = lint(list(files))
    errors = [p for p in problems if p.severity == ERROR]
    if output == "json":
        emit_json(
            {
                "ok": not errors,
                "scorers": count,
                "problems": [asdict(p) for p in problems],
            }
        )
    else:
        echo_lines(_text(problems, count, len(files)))
    raise SystemExit(int(ExitCode.FINDINGS if errors else ExitCode.OK))


__all__ = ["Problem", "lint", "lint_command"]
