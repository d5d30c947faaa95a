"""``dynamic-scoring scorer lint FILE...``: DynamicScorer files checked offline, as cluster and hub would.

Nothing is asked of any server.  Each DynamicScorer document is first checked against the CRD's own
schema (``dynamic_scoring.kube.structural``), as a strict ``kubectl apply`` would be; the refused
fields are then taken out and the rest is read as the hub reads the object:
its spellings normalised and its ``spec`` validated by the hub's model
(``dynamic_scoring.addon.registry.models``),
then resolved by the hub's ``resolve`` (URLs, required hosts and queries, ``step <= range``,
``sources``, ``scoring.params``), and the scorers of all files planned together by the
distribution's ``plan`` (two scorers publishing one score name or one AddOnPlacementScore name).
The rules are those modules', not copies.  Only what is certain offline is checked: a
``configSyncMode: Full`` scorer's ``/config`` fields are checked when the hub syncs them.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import click
import yaml
from pydantic import ValidationError

from dynamic_scoring.addon.distribution.plan import ScorerInput, plan
from dynamic_scoring.addon.registry.crds import open_api_schema
from dynamic_scoring.addon.registry.effective import KNOWN_PLACEHOLDERS, Resolution, resolve
from dynamic_scoring.addon.registry.models import API_VERSION, DynamicScorer, DynamicScorerSpec, parse_scorer
from dynamic_scoring.addon.registry.spellings import normalise_scorer_spec
from dynamic_scoring.contract.validation import validation_issues
from dynamic_scoring.ctl.output import ExitCode, echo_lines, emit_json, fail, output_option
from dynamic_scoring.kube import structural

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
    # First what the apiserver refuses on a strict apply (the CRD's own schema), then the hub's rules on
    # what is left once the refused fields are taken out, so one run reports every error.
    issues = [i for i in structural.check(open_api_schema("dynamicscorers"), obj) if i.field != "metadata"]
    for issue in issues:
        add(ERROR, issue.field, issue.message)
    refused = {i.field for i in issues}
    spec = obj.get("spec", {})
    if not isinstance(spec, Mapping):
        if "spec" not in refused:
            add(ERROR, "spec", f"is a {type(spec).__name__}, expected an object")
        return found, None
    kept = _without(spec, sorted(f.removeprefix("spec") for f in refused if f.startswith("spec")))
    raw, _ = normalise_scorer_spec(kept)
    try:
        DynamicScorerSpec.model_validate(raw)
    except ValidationError as exc:
        for where, what in validation_issues(exc, prefix="spec"):
            if not _covered(where, refused):
                add(ERROR, where, what)
        return found, None
    parsed = parse_scorer({**obj, "spec": kept})
    if not isinstance(parsed, DynamicScorer):  # the model accepted the spec above
        add(ERROR, "spec", parsed.message)
        return found, None
    resolution = resolve(parsed)
    for problem in resolution.problems:
        if not _covered(problem.field, refused):
            add(ERROR, problem.field, problem.message)
    for note in resolution.notes:
        where, sep, what = note.partition(": ")
        if "stays literal in every item name" in note:
            known = ", ".join("${" + p + "}" for p in sorted(KNOWN_PLACEHOLDERS))
            add(
                ERROR,
                where,
                f"{what}: items that differ only there get one name and collide (ItemNameCollision); "
                f"the placeholders are {known}",
            )
        else:
            add(NOTE, where if sep else "", what if sep else note)
    if resolution.pending:
        add(
            NOTE,
            "spec.configSyncMode",
            "Full: what the scorer's /config supplies (query, range, step, interval, score name, "
            "item format) is not checked offline; `dynamic-scoring scorer validate URL` checks it",
        )
        source = parsed.spec.source
        if source is None or (source.type != "None" and not source.host):
            add(
                WARNING,
                "spec.source.host",
                "not set: in Full mode the scorer's /config must give source.host, or the scorer "
                "turns Invalid when it syncs (a Prometheus source has no default host); set it here "
                "unless /config names it",
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


_SEGMENT = re.compile(r"([^.\[\]]+)|\[(\d+)\]")
_DROPPED = object()


def _without(spec: Mapping[str, Any], paths: list[str]) -> dict[str, Any]:
    """A copy of ``spec`` without the fields at ``paths`` (``.source.sourse``, ``.queries[1]``)."""
    kept: dict[str, Any] = copy.deepcopy(dict(spec))
    for path in paths:
        parts: list[str | int] = [m[1] if m[1] else int(m[2]) for m in _SEGMENT.finditer(path)]
        if not parts:
            continue
        node: Any = kept
        for part in parts[:-1]:
            node = _child(node, part)
            if node is None:
                break
        else:
            last = parts[-1]
            if isinstance(node, dict) and isinstance(last, str):
                node.pop(last, None)
            elif isinstance(node, list) and isinstance(last, int) and last < len(node):
                node[last] = _DROPPED
    compact: dict[str, Any] = _compact(kept)
    return compact


def _child(node: Any, part: str | int) -> Any:
    if isinstance(node, dict) and isinstance(part, str):
        return node.get(part)
    if isinstance(node, list) and isinstance(part, int) and part < len(node):
        return node[part]
    return None


def _compact(node: Any) -> Any:
    """``node`` with every dropped list element taken out."""
    if isinstance(node, dict):
        return {k: _compact(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_compact(v) for v in node if v is not _DROPPED]
    return node


def _covered(field: str, refused: set[str]) -> bool:
    """True when ``field`` is, is inside or contains a field the schema already refused."""
    return any(
        field == r or field.startswith((r + ".", r + "[")) or r.startswith((field + ".", field + "["))
        for r in refused
    )


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
    """Check DynamicScorer files (YAML or JSON) offline: the CRD's schema, then the hub's rules.

    First what a strict kubectl apply refuses (unknown fields, with the closest declared name; types,
    bounds, enums), then the hub's model and rules on the rest, so every error shows in one run.
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
