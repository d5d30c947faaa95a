"""Turn scoring results into AddOnPlacementScore items named by ``scoreDimensionFormat``.

Rendering is upstream's: each placeholder ``${cluster} ${node} ${device} ${namespace} ${app} ${pod}
${container} ${meta} ${scoreName}`` is replaced by its value (the untruncated label, or ``""``),
unknown ``${x}`` tokens stay as literal text, and a name that renders empty is skipped.  Unlike
upstream, a label placeholder that results have no value for is never silent: it is counted per
format and placeholder (``ItemsOutcome.empty_placeholders``) and the agent's condition names it
with the labels the results did have (``describe_empty_placeholders``).  The
replacement is one pass over the format, so a label value that itself contains ``${pod}`` is not
expanded again.  An empty format means upstream's default ``${scoreName}``.

Where upstream picked a random survivor, this module is deterministic and says what it found:

* collisions: when two or more *different results* render to the same name, no value is right for
  that item; they are listed in ``ItemsOutcome.collisions`` (``describe_collisions`` explains them:
  the format, the labels that differ, a format that would tell them apart) and the cycle fails
  with ``ItemNameCollision`` instead of publishing one of them.  The items still hold the last
  rendering of each name (``explain`` shows them);
* duplicates: one result rendering the same name under two formats is the same value, written once;
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

from dynamic_scoring.agent.items.maths import NonFiniteScore, score_value
from dynamic_scoring.agent.ports import ScoreItem
from dynamic_scoring.agent.scorer_client.answer import ScoredSeries
from dynamic_scoring.contract.wire import (
    DEFAULT_DIMENSION_FORMAT,
    DIMENSION_LABEL_PLACEHOLDERS,
    ScoreNormalization,
    display_name,
)

DEFAULT_FORMAT = DEFAULT_DIMENSION_FORMAT
MAX_ITEM_NAME_LENGTH = 253
LABEL_PLACEHOLDERS = DIMENSION_LABEL_PLACEHOLDERS
"""The placeholders filled from a result's labels (``${cluster}`` and ``${scoreName}`` are not).

Each reads the label of its own name, unless the summary's ``scoreDimensionLabels`` maps it to
another (``{"node": "instance"}``: ``${node}`` is the result's ``instance`` label, for OpenShift's
node metrics).  ``Labels`` is that mapping as sorted pairs, hashable for the renderer's cache."""
Labels = tuple[tuple[str, str], ...]
_PLACEHOLDER = re.compile(r"\$\{(cluster|node|device|namespace|app|pod|container|meta|scoreName)\}")


def source_label(placeholder: str, labels: Labels) -> str:
    """The result label that fills ``placeholder`` under the mapping ``labels``."""
    for key, label in labels:
        if key == placeholder:
            return label
    return placeholder


@functools.lru_cache(maxsize=256)
def renderer(
    fmt: str, cluster: str, score_name: str, labels: Labels = ()
) -> Callable[[Mapping[str, str]], str]:
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
            keys.append(source_label(key, labels))
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


def render_name(
    fmt: str, *, cluster: str, score_name: str, metric: Mapping[str, str], labels: Labels = ()
) -> str:
    """Render one item name from the format and one result's labels (read through ``labels``)."""
    return renderer(fmt, cluster, score_name, labels)(metric)


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
class ItemCollision:
    """One item name rendered by several different results (their positions, in response order)."""

    name: str
    results: list[int]
    formats: list[str]
    """The formats that rendered the name, in the order they did (one unless several collide)."""


@dataclass
class EmptyPlaceholder:
    """A label placeholder a format uses that results have no value for: the first one, and how many.

    Upstream renders it as "" and skips a name that comes out empty, so a scorer for node metrics
    on a platform whose series carry ``instance`` but no ``node`` (OpenShift's) published nothing
    and said nothing.  Here it is counted and described (:func:`describe_empty_placeholders`).
    """

    fmt: str
    placeholder: str
    index: int
    """The first result without a value for it."""
    count: int = 1
    emptied: int = 0
    """Results whose whole name rendered empty because of it (those publish no item)."""
    source: str = ""
    """The label it reads when ``scoreDimensionLabels`` maps it to another (``""``: its own name)."""


@dataclass(frozen=True)
class ItemsOutcome:
    """The items to publish and what was dropped on the way, for logs, metrics and the condition."""

    items: list[ScoreItem]
    rejected: list[RejectedItem] = field(default_factory=list)
    skipped_empty: int = 0
    duplicates: int = 0
    """Names one result rendered again under another format (the same value, written once)."""
    clamped: int = 0
    collisions: list[ItemCollision] = field(default_factory=list)
    """Names that different results rendered, in the order the second result appeared."""
    empty_placeholders: list[EmptyPlaceholder] = field(default_factory=list)
    """Label placeholders results had no value for, per format and placeholder, in format order."""


def build_items(
    results: Sequence[ScoredSeries],
    *,
    fmt: str | Sequence[str],
    cluster: str,
    score_name: str,
    normalization: ScoreNormalization | None = None,
    labels: Labels = (),
) -> ItemsOutcome:
    """Render, validate, convert and sort the items of one response, and find the names that collide.

    ``fmt`` is one format or several (``scoreDimensionFormats``).  With several, every result
    yields one item per format: the formats are rendered in order, each over the results in
    response order.  A name rendered by two different results (under one format or two) is a
    collision; a name one result renders under two formats is one item.  Each item holds the last
    rendering of its name.  A clamped score is counted once per result, not once per format.
    ``labels`` maps placeholders to the result labels they read (``scoreDimensionLabels``).
    """
    formats = [f or DEFAULT_FORMAT for f in ([fmt] if isinstance(fmt, str) else fmt)]
    chosen: dict[str, int] = {}
    count = len(formats)
    first: dict[str, int] = {}  # name -> index * count + position of the format that first rendered it
    collided: dict[str, ItemCollision] = {}
    members: dict[str, set[int]] = {}  # the results of each collision, for a constant-time test
    rejected: list[RejectedItem] = []
    skipped = duplicates = 0
    clamped: set[int] = set()
    empties: dict[tuple[str, str], EmptyPlaceholder] = {}
    for position, one in enumerate(formats):
        render = renderer(one, cluster, score_name, labels)
        used = [(k, source_label(k, labels)) for k in LABEL_PLACEHOLDERS if k in _placeholders(one)]
        for index, result in enumerate(results):
            name = render(result.metric)
            for key, label in used:
                if not result.metric.get(label):
                    found = empties.get((one, key))
                    if found is None:
                        found = empties[(one, key)] = EmptyPlaceholder(one, key, index, 0, source=label)
                    found.count += 1
                    found.emptied += not name
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
            seen = first.get(name)
            if seen is None:
                first[name] = index * count + position
            elif seen // count == index:  # the same result under an earlier format: the same value
                duplicates += 1
            else:
                earlier = (seen // count, formats[seen % count])
                _collide(collided, members, name, earlier, index, one)
            chosen[name] = value
            if was_clamped:
                clamped.add(index)
    items = [ScoreItem(name, chosen[name]) for name in sorted(chosen)]
    return ItemsOutcome(
        items, rejected, skipped, duplicates, len(clamped), list(collided.values()), list(empties.values())
    )


def _collide(
    collided: dict[str, ItemCollision],
    members: dict[str, set[int]],
    name: str,
    seen: tuple[int, str],
    index: int,
    fmt: str,
) -> None:
    """Note that result ``index`` (under ``fmt``) renders ``name`` too, which ``seen`` rendered first."""
    entry = collided.get(name)
    if entry is None:
        entry = collided[name] = ItemCollision(name, [seen[0]], [seen[1]])
        members[name] = {seen[0]}
    if index not in members[name]:
        members[name].add(index)
        entry.results.append(index)
    if fmt not in entry.formats:  # at most 16 formats
        entry.formats.append(fmt)


MAX_SHOWN_VALUES = 3
"""Values of one label a collision message quotes; the rest are counted."""
MAX_SHOWN_LABELS = 3
"""Labels a collision message names."""


def _placeholders(fmt: str) -> set[str]:
    return {m.group(1) for m in _PLACEHOLDER.finditer(fmt or DEFAULT_FORMAT)}


MAX_SHOWN_SERIES_LABELS = 6
"""Labels of one result an empty-placeholder message quotes; the rest are counted."""


def describe_empty_placeholders(empties: Sequence[EmptyPlaceholder], results: Sequence[ScoredSeries]) -> str:
    """One line naming each empty placeholder, its format, and the labels the first such result had.

    E.g. ``${node} is empty in format "${node}" for 3 of 3 result(s), 3 of which publish no item
    (their name renders empty): result 0 has labels instance="10.0.0.1:9100", job="node-exporter"``:
    the reader sees at once which label the series carry instead.
    """
    parts = []
    for e in empties:
        metric = results[e.index].metric if e.index < len(results) else {}
        shown = sorted(metric.items())[:MAX_SHOWN_SERIES_LABELS]
        labels = ", ".join(f'{display_name(k)}="{display_name(v, 60)}"' for k, v in shown)
        labels = f"labels {labels}" if labels else "no labels"
        more = f" and {len(metric) - len(shown)} more" if len(metric) > len(shown) else ""
        effect = (
            f", {e.emptied} of which publish no item (their name renders empty)"
            if e.emptied
            else ", whose names miss that part"
        )
        mapped = f" (read from label {e.source})" if e.source and e.source != e.placeholder else ""
        parts.append(
            f'${{{e.placeholder}}}{mapped} is empty in format "{display_name(e.fmt)}" for {e.count} of '
            f"{len(results)} result(s){effect}: result {e.index} has {labels}{more}"
        )
    return "; ".join(parts)


def describe_collisions(
    collisions: Sequence[ItemCollision], results: Sequence[ScoredSeries], *, several_formats: bool = False
) -> str:
    """One bounded sentence on the first collision (and how many more there are), for the condition.

    It names the item, the format(s), the labels in which the colliding results differ (at most
    ``MAX_SHOWN_LABELS`` labels and ``MAX_SHOWN_VALUES`` values each, each value shortened), and a
    remedy: a format that also uses those labels when they are placeholders, else aggregating in the
    scorer (a label such as ``source`` or ``instance`` cannot be part of an item name).
    ``several_formats``: the summary has ``scoreDimensionFormats``, so the remedy names that field.
    """
    first = collisions[0]
    metrics = [results[i].metric for i in first.results]
    shown_formats = ", ".join(f'"{display_name(f, 120)}"' for f in first.formats[:MAX_SHOWN_VALUES])
    if len(first.formats) > MAX_SHOWN_VALUES:
        shown_formats += f" and {len(first.formats) - MAX_SHOWN_VALUES} more"
    text = (
        f'{len(first.results)} results render to item "{display_name(first.name, 120)}" under '
        f"format{'s' if len(first.formats) > 1 else ''} {shown_formats}"
    )
    keys = sorted({k for m in metrics for k in m})
    differ = [k for k in keys if len({m.get(k, "") for m in metrics}) > 1]
    used = set().union(*(_placeholders(f) for f in first.formats))
    field_name = "scoreDimensionFormats" if several_formats else "scoreDimensionFormat"
    if not differ:
        text += ": they have the same labels (the scorer returned one series more than once)"
    else:
        # placeholders first: they are the ones a format can use
        order = {k: i for i, k in enumerate(LABEL_PLACEHOLDERS)}
        differ.sort(key=lambda k: (k in used, order.get(k, len(order)), k))
        parts = []
        for key in differ[:MAX_SHOWN_LABELS]:
            values = list(dict.fromkeys(m.get(key, "") for m in metrics))
            quoted = [f"{display_name(key, 40)}={display_name(v, 40)}" for v in values[:MAX_SHOWN_VALUES]]
            if len(values) > MAX_SHOWN_VALUES:
                quoted.append(f"{len(values) - MAX_SHOWN_VALUES} more")
            parts.append(", ".join(quoted))
        more = (
            f"; {len(differ) - MAX_SHOWN_LABELS} more label(s) differ"
            if len(differ) > MAX_SHOWN_LABELS
            else ""
        )
        text += f": they differ in {'; '.join(parts)}{more}"
        unused = [k for k in differ if k not in used]
        usable = [k for k in unused if k in LABEL_PLACEHOLDERS]
        if unused and len(unused) == len(differ):
            text += " (labels the format does not use)"
        if usable:
            base = first.formats[0] or DEFAULT_FORMAT
            example = base + "".join("-${" + k + "}" for k in usable[:2])
            shown = f'"{display_name(example, 200)}"'
            if several_formats:
                text += f'; change "{display_name(base, 120)}" in {field_name}, e.g. to {shown}'
            else:
                text += f"; set {field_name}, e.g. {shown}"
        elif unused:
            names = ", ".join(display_name(k, 40) for k in unused[:MAX_SHOWN_LABELS])
            text += (
                f"; no placeholder can tell them apart ({names} cannot be part of an item name): "
                "have the scorer return one result per item, e.g. aggregated over those labels"
            )
        else:
            text += (
                f"; their labels render the same name: set {field_name} with separators between placeholders"
            )
    if len(collisions) > 1:
        text += f"; {len(collisions) - 1} more item name(s) collide"
    return text


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
    "LABEL_PLACEHOLDERS",
    "MAX_ITEM_NAME_LENGTH",
    "ItemCollision",
    "ItemsOutcome",
    "RejectedItem",
    "build_items",
    "default_item_names",
    "describe_collisions",
    "item_name_problem",
    "render_name",
]
