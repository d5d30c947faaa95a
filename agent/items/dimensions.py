"""Turn scoring results into AddOnPlacementScore items named by ``scoreDimensionFormat``.

Rendering is upstream's: each placeholder ``${cluster} ${node} ${device} ${namespace} ${app} ${pod}
${container} ${meta} ${scoreName}`` is replaced by its value (the untruncated label, or ``""``),
unknown ``${x}`` tokens stay as literal text, and a name that renders empty is skipped.  The
replacement is one pass over the format, so a label value that itself contains ``${pod}`` is not
expanded again.  An empty format means upstream's default ``${scoreName}``.

Where upstream picked a random survivor, this module is deterministic:

* duplicates: when several results render to the same name, the *last one in response order wins*
  (the order the scorer chose is the only order it controls);
* output: items are sorted by name, so an unchanged result is an unchanged object;
* validity: a rendered name must be at most 253 characters and printable (no control characters,
  no line or paragraph separators, no other non-space whitespace), and its value must be finite
  after normalisation.  Invalid items are rejected with a reason and counted; the rest of the
  result is still published.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from agent.items.maths import NonFiniteScore, score_value
from agent.ports import ScoreItem
from agent.scorer_client.answer import ScoredSeries
from dynamic_scoring.wire import ScoreNormalization

DEFAULT_FORMAT = "${scoreName}"
MAX_ITEM_NAME_LENGTH = 253
_PLACEHOLDER = re.compile(r"\$\{(cluster|node|device|namespace|app|pod|container|meta|scoreName)\}")


@functools.lru_cache(maxsize=256)
def renderer(fmt: str, cluster: str, score_name: str) -> Callable[[Mapping[str, str]], str]:
    """A function rendering ``fmt`` for one result's labels, with the cluster and score name fixed.

    The format is split once into literal text and label keys (``${cluster}`` and ``${scoreName}``
    become text), so rendering 10,000 results costs a few string joins each, not a regular
    expression substitution with a Python callback per placeholder.  Label values are inserted as
    they are: one pass, never expanded again.
    """
    pieces = _PLACEHOLDER.split(fmt or DEFAULT_FORMAT)  # text, key, text, key, ..., text
    texts = [pieces[0]]
    keys: list[str] = []
    for key, text in zip(pieces[1::2], pieces[2::2], strict=True):
        if key in ("cluster", "scoreName"):
            texts[-1] += (cluster if key == "cluster" else score_name) + text
        else:
            keys.append(key)
            texts.append(text)
    if not keys:
        constant = texts[0]
        return lambda metric: constant
    if len(keys) == 1:
        (a, b), (k,) = texts, keys
        return lambda metric: a + metric.get(k, "") + b
    if len(keys) == 2:
        (a, b, c), (k1, k2) = texts, keys
        return lambda metric: a + metric.get(k1, "") + b + metric.get(k2, "") + c

    def render(metric: Mapping[str, str]) -> str:
        out = [texts[0]]
        for key, text in zip(keys, texts[1:], strict=True):
            out.append(metric.get(key, ""))
            out.append(text)
        return "".join(out)

    return render


def render_name(fmt: str, *, cluster: str, score_name: str, metric: Mapping[str, str]) -> str:
    """Render one item name from the format and one result's labels."""
    return renderer(fmt, cluster, score_name)(metric)


def item_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be an item name, or ``None`` when it can (empty names are skipped earlier)."""
    if len(name) > MAX_ITEM_NAME_LENGTH:
        return f"longer than {MAX_ITEM_NAME_LENGTH} characters ({len(name)})"
    if not name.isprintable():
        return "contains control or non-printable characters"
    return None


@dataclass(frozen=True)
class RejectedItem:
    """A result whose rendered name is unusable: its position in the response, the name, why."""

    index: int
    name: str
    reason: str


@dataclass(frozen=True)
class ItemsOutcome:
    """The items to publish and what was dropped on the way, for logs, metrics and the condition."""

    items: list[ScoreItem]
    rejected: list[RejectedItem] = field(default_factory=list)
    skipped_empty: int = 0
    duplicates: int = 0
    clamped: int = 0


def build_items(
    results: Sequence[ScoredSeries],
    *,
    fmt: str | Sequence[str],
    cluster: str,
    score_name: str,
    normalization: ScoreNormalization | None = None,
) -> ItemsOutcome:
    """Render, validate, de-duplicate (last wins), convert and sort the items of one response.

    ``fmt`` is one format or several (``scoreDimensionFormats``).  With several, every result
    yields one item per format: the formats are rendered in order, each over the results in
    response order, so a name rendered twice (by two results or by two formats) is one duplicate
    and the later rendering wins, exactly the rule for one format.  A clamped score is counted once
    per result, not once per format.
    """
    formats = [fmt] if isinstance(fmt, str) else list(fmt)
    chosen: dict[str, int] = {}
    rejected: list[RejectedItem] = []
    skipped = duplicates = 0
    clamped: set[int] = set()
    for one in formats:
        render = renderer(one, cluster, score_name)
        for index, result in enumerate(results):
            name = render(result.metric)
            if not name:
                skipped += 1
                continue
            problem = item_name_problem(name)
            if problem is not None:
                rejected.append(RejectedItem(index, name, problem))
                continue
            try:
                value, was_clamped = score_value(result.score, normalization)
            except NonFiniteScore as exc:
                rejected.append(RejectedItem(index, name, str(exc)))
                continue
            if name in chosen:
                duplicates += 1
            chosen[name] = value
            if was_clamped:
                clamped.add(index)
    items = [ScoreItem(name, chosen[name]) for name in sorted(chosen)]
    return ItemsOutcome(items, rejected, skipped, duplicates, len(clamped))


def default_item_names(formats: Sequence[str], *, cluster: str, score_name: str) -> list[str]:
    """The item names of a stated default score (missing data or a masked pair), sorted.

    There are no series, so there are no labels to fill in.  A format that uses only
    ``${cluster}`` and ``${scoreName}`` (a cluster-level name, such as the default ``${scoreName}``)
    renders as it would for a result; a format that needs a series label (``${node}``, ``${pod}``,
    ...) would render a name no result ever has, so it yields the score name itself instead.  A
    Placement that prioritises on the cluster-level item therefore sees the default.
    """
    names: set[str] = set()
    for fmt in formats or (DEFAULT_FORMAT,):
        uses_labels = any(m.group(1) not in ("cluster", "scoreName") for m in _PLACEHOLDER.finditer(fmt))
        name = (
            score_name if uses_labels else render_name(fmt, cluster=cluster, score_name=score_name, metric={})
        )
        if not name or item_name_problem(name) is not None:
            name = score_name
        names.add(name)
    return sorted(names)


__all__ = [
    "DEFAULT_FORMAT",
    "MAX_ITEM_NAME_LENGTH",
    "ItemsOutcome",
    "RejectedItem",
    "build_items",
    "default_item_names",
    "item_name_problem",
    "render_name",
]
