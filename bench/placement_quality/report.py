"""The placement-quality tables in Markdown, from a run's JSON: ``python -m bench.placement_quality.report
DIR``.

Why a generator.  ``docs/placement-quality.md`` quotes dozens of numbers, each with its band over tie
orders and many with a bootstrap interval; copied by hand, one of them will be wrong.  This module turns
the ``placement-quality.json`` a run leaves in its work directory into the page's tables, so the page
says exactly what the run measured and a rerun can refresh it.  It prints to stdout; nothing is written.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.placement_quality.policies import BLENDED_LIVES, LIVES, SHIPPED_SEASONAL
from bench.placement_quality.spread import setup_label

ROWS: tuple[tuple[str, str], ...] = (
    ("static", "static (OCM's first cluster by name)"),
    ("random", "random"),
    ("round-robin", "round-robin"),
    ("reactive", "reactive (latest point)"),
    ("cpu", "cpu (mean of the last 50 min)"),
    ("predict", "predict, horizon = life"),
    ("seasonal", "seasonal, horizon = life"),
    (SHIPPED_SEASONAL, "seasonal as shipped before (1 h horizon)"),
    ("blend", "seasonal sample now, horizon = life (blended to 1 h)"),
    ("even", "seasonal, horizon = life, an even blend"),
    ("seasonal3d", "seasonal on 3 days, horizon = life"),
    ("cpu-recipe", "cpu, headroom 20\u201380 % onto \u2212100\u2026100"),
    ("recipe", "seasonal sample now, headroom 20\u201380 % onto \u2212100\u2026100"),
    ("free-cores", "free cores (latest point, capacity x idle share)"),
)
"""Table rows: a baseline, a policy without a horizon, or a family whose horizon matches each life."""

Record = Mapping[str, Any]

DASH = "\u2013"  # an en dash: ranges and empty cells, as the docs write them
MINUS = "\u2212"  # a minus sign, in "a - b"


def _policy_at(row: str, life: str) -> str:
    """The policy a table row stands for at ``life``: ``seasonal`` at 4h is ``seasonal-4h``; the sample
    as it ships now (``blend``) is ``seasonal-<life>`` itself where it does not blend."""
    if row == "blend" and life not in BLENDED_LIVES:
        return f"seasonal-{life}"
    return f"{row}-{life}" if row in ("predict", "seasonal", "blend", "even", "seasonal3d", "recipe") else row


def _find(
    results: Sequence[Record], policy: str, variant: str, form: str, k: int, lag: int, life: str
) -> Record:
    steps = LIVES[life]
    baseline = policy in ("static", "random", "round-robin")
    for r in results:
        if (
            r["policy"] == policy
            and r["variant"] == ("-" if baseline else variant)
            and r["form"] == ("-" if baseline else form)
            and r["k"] == k
            and r["lag"] == lag
            and r["life_steps"] == steps
        ):
            return r
    raise KeyError(f"no result for {policy}/{variant} {form} k={k} lag {lag} life {life}")


def band(r: Record, key: str, spec: str = ".2f", scale: float = 1.0) -> str:
    """``median [low-high]`` (an en dash) of a recorded band (just the median when the band is a point)."""
    median, low, high = (format(float(r[k]) * scale, spec) for k in (key, f"{key}_low", f"{key}_high"))
    return median if low == high else f"{median} [{low}{DASH}{high}]"


def regret_by_life(
    results: Sequence[Record], form: str, k: int, variant: str = "raw", measure: str = "regret_mean"
) -> str:
    """A table: one row per :data:`ROWS` entry, one column per life, the band of ``measure`` (the mean
    regret, or ``core_regret_mean``: idle cores short of the best)."""
    head = "| policy | " + " | ".join(f"life {life}" for life in LIVES) + " |"
    lines = [head, "|---" * (len(LIVES) + 1) + "|"]
    for row, title in ROWS:
        cells = []
        for life in LIVES:
            try:
                found = _find(results, _policy_at(row, life), variant, form, k, 0, life)
            except KeyError:
                cells.append(DASH)
                continue
            spec = ".0f" if measure.startswith("core") else ".2f"
            cells.append(DASH if found.get(measure) is None else band(found, measure, spec))
        if any(c != DASH for c in cells):  # a policy the run did not replay (seasonal, synthetic) is left out
            lines.append(f"| {title} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def one_life(results: Sequence[Record], life: str, k: int) -> str:
    """A table of every measure at ``life`` and pick ``k``: Exact and margin, raw and stabilized."""
    lines = [
        "| policy | variant | Exact: regret / p95 | Exact: exposure | Exact: changes/day"
        " | margin: regret | margin: changes/day | writes per cluster-day |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row, title in ROWS:
        if row == SHIPPED_SEASONAL and life == "1h":
            continue  # the same policy as "seasonal, horizon = life" at this life
        policy = _policy_at(row, life)
        variants = ("-",) if row in ("static", "random", "round-robin") else ("raw", "stabilized")
        for variant in variants:
            try:
                exact = _find(results, policy, variant, "exact", k, 0, life)
                margin = _find(results, policy, variant, "margin", k, 0, life)
            except KeyError:
                continue
            writes = exact.get("writes_per_cluster_day")
            lines.append(
                f"| {title} | {'' if variant == '-' else variant} | {band(exact, 'regret_mean')} /"
                f" {band(exact, 'regret_p95')} | {band(exact, 'exposure', '.1f', 100)} % |"
                f" {band(exact, 'changes_per_day', '.1f')} | {band(margin, 'regret_mean')} |"
                f" {band(margin, 'changes_per_day', '.1f')} | {DASH if writes is None else f'{writes:.1f}'} |"
            )
    return "\n".join(lines)


def lags(results: Sequence[Record], life: str = "1h") -> str:
    """Mean regret (median over tie orders) at 0, 1 and 2 steps of extra staleness, pick 1."""
    lines = ["| policy | Exact: lag 0 / 1 / 2 | margin: lag 0 / 1 / 2 |", "|---|---|---|"]
    for row, title in ROWS:
        if row in ("static", "random", "round-robin"):
            continue
        policy = _policy_at(row, life)
        cells = []
        for form in ("exact", "margin"):
            try:
                values = [
                    float(_find(results, policy, "raw", form, 1, lag, life)["regret_mean"])
                    for lag in (0, 1, 2)
                ]
            except KeyError:
                break
            cells.append(" / ".join(f"{v:.2f}" for v in values))
        if len(cells) == 2:
            lines.append(f"| {title} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def clear_comparisons(
    held: Sequence[Record],
    train: Sequence[Record],
    *,
    skip_random: bool = True,
    k: int | None = None,
    measure: str = "regret",
) -> str:
    """Every held-out comparison of ``measure`` whose interval excludes 0 (of pick ``k`` if given), with
    the training half's interval beside it."""
    other = {(c["life"], c["form"], c["k"], c["a"], c["b"], c.get("measure", "regret")): c for c in train}
    lines = [
        f"| life | form | k | a {MINUS} b ({measure.replace('_', ' ')}) | held-out: difference [95 % CI]"
        " | training half [95 % CI] |",
        "|---|---|---|---|---|---|",
    ]
    for c in held:
        if not (c["low"] > 0 or c["high"] < 0) or (skip_random and c["a"] == "random"):
            continue
        if (k is not None and c["k"] != k) or c.get("measure", "regret") != measure:
            continue
        t = other.get((c["life"], c["form"], c["k"], c["a"], c["b"], measure))
        seen = DASH if t is None else f"{t['difference']:+.2f} [{t['low']:+.2f}, {t['high']:+.2f}]"
        lines.append(
            f"| {c['life']} | {c['form']} | {c['k']} | {c['a']} {MINUS} {c['b']} |"
            f" {c['difference']:+.2f} [{c['low']:+.2f}, {c['high']:+.2f}] | {seen} |"
        )
    return "\n".join(lines)


CLOSED_ORDER = (
    "reactive",
    "cpu",
    "predict",
    "seasonal",
    "random",
    "round-robin",
    "power-of-two",
    "least-loaded",
)
"""Closed-loop rows: the scored families first, then the baselines."""


def _closed_key(r: Record) -> tuple[str, float, int]:
    family = str(r["policy"]).split("-", 1)[0] if r["variant"] != "-" else str(r["policy"])
    return (str(r["life"]), float(r["size"]), CLOSED_ORDER.index(family) if family in CLOSED_ORDER else 99)


def closed_loop(results: Sequence[Record]) -> str:
    """A table of every closed-loop setup: experienced load, time above 80 %, slowdown, ties, changes."""
    lines = [
        f"| life | size | placer | load mean / p95 | time above 80 % | slowdown 1/(1{MINUS}u) | ties"
        " | changes/day |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lives = list(LIVES)
    for r in sorted(results, key=lambda r: (lives.index(r["life"]), *_closed_key(r)[1:])):
        label = setup_label(str(r["policy"]), str(r["variant"]), str(r.get("form", "exact")))
        ties = DASH if r["tie_share"] is None else f"{100 * r['tie_share']:.1f} %"
        changes = DASH if r["changes_per_day"] is None else f"{r['changes_per_day']:.0f}"
        lines.append(
            f"| {r['life']} | {r['size']:g} % | {label} | {r['load_mean']:.1f} / {r['load_p95']:.1f} |"
            f" {100 * r['hot_share']:.1f} % | {r['slowdown']:.2f} | {ties} | {changes} |"
        )
    return "\n".join(lines)


def closed_comparisons(comparisons: Sequence[Record], measure: str = "slowdown") -> str:
    """Every closed-loop comparison of ``measure`` between a scored setup and another placer."""
    lines = [
        f"| life | size | a {MINUS} b ({measure.replace('_', ' ')}) | difference [95 % CI] | verdict |",
        "|---|---|---|---|---|",
    ]
    for c in comparisons:
        if c["measure"] != measure or "/" not in c["a"]:
            continue
        lines.append(
            f"| {c['life']} | {c['size']:g} % | {c['a']} {MINUS} {c['b']} |"
            f" {c['difference']:+.2f} [{c['low']:+.2f}, {c['high']:+.2f}] | {c['verdict']} |"
        )
    return "\n".join(lines)


def anticipation(records: Sequence[Record], definition: str) -> str:
    """Per life and placer: ramps of ``definition``, live share against base rate, interval and verdict."""
    lines = [
        f"| life | placer | ramps | live share | base rate | live {MINUS} base, points [95 % CI] | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    lives = list(LIVES)
    for a in sorted(records, key=lambda a: lives.index(a["life"])):
        if a["definition"] != definition:
            continue
        if a["difference"] is None:
            cells = f"{DASH} | {DASH} | {DASH}"
        else:
            cells = (
                f"{100 * a['live']:.1f} % | {100 * a['base']:.1f} % | {100 * a['difference']:+.1f}"
                f" [{100 * a['low']:+.1f}, {100 * a['high']:+.1f}]"
            )
        lines.append(f"| {a['life']} | {a['policy']} | {a['events']} | {cells} | {a['verdict']} |")
    return "\n".join(lines)


def targets(held: Sequence[Record], train: Sequence[Record]) -> str:
    """The named comparisons (``bench.placement_quality.targets``): both regrets, how much lower, the
    interval of the difference, and the target's verdict, held-out and training half side by side."""
    by_key = {(t["life"], t["label"], t["other"]): t for t in train}
    lines = [
        "| life | policy | against | held-out: regret | lower | difference [95 % CI] | target"
        " | training half: lower | difference [95 % CI] |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def cells(t: Record) -> str:
        return f"{100 * t['lower']:+.0f} % | {t['difference']:+.2f} [{t['low']:+.2f}, {t['high']:+.2f}]"

    for t in held:
        verdict = DASH if t["met"] is None else ("met" if t["met"] else "**missed**")
        other = by_key.get((t["life"], t["label"], t["other"]))
        lines.append(
            f"| {t['life']} | {t['label'].removesuffix('/raw')} | {t['other'].removesuffix('/raw')} |"
            f" {t['mine']:.2f} against {t['theirs']:.2f} | {cells(t)} | {verdict} |"
            f" {cells(other) if other else f'{DASH} | {DASH}'} |"
        )
    return "\n".join(lines)


def margins(held: Sequence[Record], train: Sequence[Record]) -> str:
    """The margin recipe's targets (``bench.placement_quality.targets.MarginTarget``): the recipe in the
    margin form against its plain score in Exact, with the recipe before (the plain score in the margin
    form) beside it, held-out and training half side by side."""
    by_key = {(t["life"], t["recipe"]): t for t in train}
    lines = [
        "| life | recipe | Exact: regret, changes/day | recipe: regret, changes/day | above Exact [95 % CI]"
        " | share of Exact's changes | target | recipe before: regret, changes/day"
        " | training half: above, share, target |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def verdict(t: Record) -> str:
        return "met" if t["met"] else "**missed**"

    for t in held:
        other = by_key.get((t["life"], t["recipe"]))
        before = (
            DASH
            if t["previous_regret"] is None
            else f"{t['previous_regret']:.2f}, {t['previous_changes']:.1f}"
        )
        trained = (
            f"{100 * other['above']:+.0f} %, {other['change_share']:.2f}, {verdict(other)}" if other else DASH
        )
        lines.append(
            f"| {t['life']} | {t['recipe']} | {t['exact_regret']:.2f}, {t['exact_changes']:.1f} |"
            f" {t['regret']:.2f}, {t['changes']:.1f} | {100 * t['above']:+.0f} %"
            f" [{t['low']:+.2f}, {t['high']:+.2f}] | {t['change_share']:.2f} | {verdict(t)} | {before} |"
            f" {trained} |"
        )
    return "\n".join(lines)


def report(record: Record) -> str:
    """Every table of the page, with a heading each, from one run's JSON."""
    halves = record["halves"]
    held = halves["held-out"]
    train = halves.get("train", {"results": [], "comparisons": []})
    parts = [
        "### Mean regret by life, pick 1, Exact (held-out)",
        regret_by_life(held["results"], "exact", 1),
        "### Mean regret by life, pick 1, margin form: AddOn 10 + Steady 1 (held-out)",
        regret_by_life(held["results"], "margin", 1),
        "### The margin recipe against Exact, pick 1",
        margins(held.get("margins", []), train.get("margins", [])),
        "### Mean regret by life, pick 3, Exact (held-out)",
        regret_by_life(held["results"], "exact", 3),
        "### Mean regret by life, pick 1, Exact (training half)",
        regret_by_life(train["results"], "exact", 1) if train["results"] else "(not run)",
        "### The seasonal sample's defaults against the alternatives, pick 1, Exact",
        targets(held.get("targets", []), train.get("targets", [])),
        "### Every measure, 1 h life, pick 1 (held-out)",
        one_life(held["results"], "1h", 1),
        "### Extra staleness, 1 h life, pick 1 (held-out)",
        lags(held["results"]),
        "### Comparisons whose interval excludes 0, pick 1 (held-out; against random left out)",
        clear_comparisons(held["comparisons"], train["comparisons"], k=1),
        "### Idle cores short of the best cluster's, by life, pick 1, Exact (held-out)",
        regret_by_life(held["results"], "exact", 1, measure="core_regret_mean"),
        "### Comparisons on idle cores whose interval excludes 0, pick 1 (held-out)",
        clear_comparisons(
            held["comparisons"], train["comparisons"], skip_random=False, k=1, measure="core_regret"
        ),
    ]
    for definition in ("sustained", "loose"):
        parts += [
            f"### Anticipation around {definition} ramps, pick 1, Exact (held-out)",
            anticipation(held.get("anticipation", []), definition),
        ]
    closed = record.get("closed_loop")
    if closed:
        parts += [
            "### Closed loop (held-out clusters)",
            closed_loop(closed["results"]),
            "### Closed loop: a scored placer against each other placer, slowdown",
            closed_comparisons(closed["comparisons"]),
        ]
    return "\n\n".join(parts) + "\n"


MEASURES = {"regret": "", "core_regret": "idle cores", "hot_share": "hot share"}
"""How a comparison's measure reads in a setting cell (regret, the usual one, goes unsaid)."""


def _setting(name: str, value: Any) -> str:
    """One part of a comparison's setting: ``3 %``, ``k=1``, ``idle cores``, ``1h``."""
    if name == "size":
        return f"{value:g} %"
    if name == "k":
        return f"k={value}"
    if name == "measure":
        return MEASURES.get(str(value), str(value))
    return str(value)


def agreement(pairs: Sequence[Record]) -> str:
    """The comparisons a synthetic and a real run share, side by side, with how they line up."""
    said = {
        "same": "agree",
        "opposite": "**opposite**",
        "synthetic_only": "synthetic only",
        "real_only": "real only",
        "neither": "neither clear",
    }
    lines = [
        f"| setting | a {MINUS} b | synthetic [95 % CI] | real, held-out [95 % CI] | clear in |",
        "|---|---|---|---|---|",
    ]
    for p in pairs:
        parts = (_setting(name, p[name]) for name in ("life", "form", "k", "size", "measure") if name in p)
        where = " ".join(part for part in parts if part)
        cells = [f"{d:+.2f} [{lo:+.2f}, {hi:+.2f}]" for d, lo, hi in (p["synthetic"], p["real"])]
        lines.append(
            f"| {where} | {p['a']} {MINUS} {p['b']} | {cells[0]} | {cells[1]} | {said[p['outcome']]} |"
        )
    return "\n".join(lines)


def synthetic_report(record: Record) -> str:
    """Every table of the synthetic fleet's run (``placement-quality-synthetic.json``)."""
    fleet = record["halves"]["synthetic"]
    parts = [
        "### Synthetic fleet: mean regret by life, pick 1, Exact",
        regret_by_life(fleet["results"], "exact", 1),
        "### Synthetic fleet: mean regret by life, pick 1, margin form: AddOn 10 + Steady 1",
        regret_by_life(fleet["results"], "margin", 1),
        "### Synthetic fleet: mean regret by life, pick 3, Exact",
        regret_by_life(fleet["results"], "exact", 3),
        "### Synthetic fleet: idle cores short of the best cluster's, by life, pick 1, Exact",
        regret_by_life(fleet["results"], "exact", 1, measure="core_regret_mean"),
        "### Synthetic fleet: comparisons on idle cores whose interval excludes 0, pick 1",
        clear_comparisons(fleet["comparisons"], [], k=1, measure="core_regret"),
        "### Synthetic fleet: every measure, 1 h life, pick 1",
        one_life(fleet["results"], "1h", 1),
        "### Synthetic fleet: anticipation around sustained ramps, pick 1, Exact",
        anticipation(fleet.get("anticipation", []), "sustained"),
        "### Synthetic fleet: anticipation around loose ramps, pick 1, Exact",
        anticipation(fleet.get("anticipation", []), "loose"),
        "### Synthetic fleet: closed loop",
        closed_loop(record["closed_loop"]["results"]),
        "### Synthetic fleet: closed loop, a scored placer against each other placer, slowdown",
        closed_comparisons(record["closed_loop"]["comparisons"]),
    ]
    for loop in ("open_loop", "closed_loop"):
        found = record.get("agreement", {}).get(loop)
        title = loop.replace("_", " ")
        parts += [
            f"### Synthetic against real fleet, {title}: the comparisons both runs make, pick 1",
            "(the real run was not in the same work directory)"
            if found is None
            else agreement([p for p in found["pairs"] if p.get("k", 1) == 1]),
        ]
    return "\n\n".join(parts) + "\n"


def history_report(record: Record) -> str:
    """The history run's tables: regret by life (both halves) and its named comparisons."""
    halves = record["halves"]
    held, train = halves["held-out"], halves.get("train", {"results": [], "targets": []})
    parts = [
        "### Several days of history: mean regret by life, pick 1, Exact (held-out, 6-day blocks)",
        regret_by_life(held["results"], "exact", 1),
        "### Several days of history: mean regret by life, pick 1, Exact (training half, 6-day blocks)",
        regret_by_life(train["results"], "exact", 1) if train["results"] else "(not run)",
        "### Three days against one, pick 1, Exact",
        targets(held.get("targets", []), train.get("targets", [])),
        "### The margin recipe against Exact, pick 1 (6-day blocks)",
        margins(held.get("margins", []), train.get("margins", [])),
    ]
    return "\n\n".join(parts) + "\n"


RUNS = (
    ("placement-quality.json", report),
    ("placement-quality-synthetic.json", synthetic_report),
    ("placement-quality-history.json", history_report),
)
"""The JSON files a work directory may hold, each with the function that prints its tables."""


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.placement_quality.report WORKDIR``: print the tables of every run found in
    ``WORKDIR``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0] in ("-h", "--help"):
        print(
            "usage: python -m bench.placement_quality.report WORKDIR  (the directory holding"
            " placement-quality.json or placement-quality-synthetic.json)"
        )
        return 0 if args and args[0] in ("-h", "--help") else 2
    found = [(Path(args[0]) / name, fn) for name, fn in RUNS if (Path(args[0]) / name).is_file()]
    if not found:
        print(
            f"no run in {args[0]}: run `python -m bench placement-quality --workdir DIR` (or"
            " placement-quality-synthetic) first and pass DIR/<benchmark>",
            file=sys.stderr,
        )
        return 1
    for path, fn in found:
        sys.stdout.write(fn(json.loads(path.read_text())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = [
    "ROWS",
    "RUNS",
    "agreement",
    "band",
    "clear_comparisons",
    "closed_comparisons",
    "closed_loop",
    "history_report",
    "lags",
    "main",
    "margins",
    "one_life",
    "regret_by_life",
    "report",
    "synthetic_report",
    "targets",
]
