"""The placement-quality benchmark's two plots, drawn from the files a run leaves in its work directory.

Why plots at all.  ``docs/placement-quality.md`` reports the measures as a table: mean regret, overload
exposure, decision changes per day.  A table says *that* a stabilized policy changes its decision less
and pays some regret for it; it does not show *why*.  The two figures show it:

* ``placement-quality-day.png`` (:func:`plot_day`): one judged day.  The top panel is every cluster's
  CPU load; the bottom one is, per policy, the cluster its Placement picked at each step, in that
  cluster's colour, under a strip "hindsight best" (the cluster a workload placed at that step would
  have been best on over its whole life).  A reader sees the reactive policy flicker between clusters
  whose loads cross and recross, the stabilized variants and the window and forecast scorers hold a
  cluster through the noise, and static sit on OCM's first cluster whatever happens.  Clusters of one
  trace share a hue (shades of it), so the strips also show which trace the decisions follow.
* ``placement-quality-churn.png`` (:func:`plot_churn_regret`): the trade-off itself, every policy and
  variant as one point of decision changes per day against mean regret, per Placement form and k.
  Down is better placements, left is fewer moves; the line from a policy's raw point to its
  stabilized one is what the agent's ``Stabilizer`` buys and costs, and the dashed line is the
  hindsight oracle that pays for its moves (``bench.placement_quality.oracle``): nothing can sit below it.

Nothing is recomputed differently from the benchmark: the day plot re-derives decisions from the
cached raw scores with the replay's own :func:`~bench.placement_quality.replay.stabilize`,
:func:`~bench.placement_quality.replay.decide` and :func:`~bench.placement_quality.replay.decide_static`,
and the churn plot reads the recorded results.

matplotlib draws them, as for ``bench/placement_stability/plot.py``: installed with the ``bench`` extra
(``pip install -e '.[bench]'``) and imported only when a plot is drawn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import NDArray

from bench.placement_quality import metrics
from bench.placement_quality.policies import POLICIES, SHIPPED_SEASONAL, STABILIZATION
from bench.placement_quality.prometheus import step_time
from bench.placement_quality.replay import LIFE_STEPS, Scores, Timeline, decide, decide_static, stabilize
from bench.placement_quality.spread import Spread
from bench.placement_quality.traces import STEPS_PER_DAY
from dynamic_scoring.agent.items.stabilization import Stabilization

NAME = "placement-quality"
DAY_PNG = f"{NAME}-day.png"
CHURN_PNG = f"{NAME}-churn.png"
CLOSED_PNG = f"{NAME}-closed.png"

HINDSIGHT = "hindsight best"
"""The top strip of the day plot: the best a workload placed at the step could have done."""

CHURN_FORMS = ("exact", "margin")
"""Forms in the churn plot.  ``additive`` is left out: Steady's 100 outweighs any score difference, so
every policy's first decision sticks (0 changes per day) and its regret is that one pick's, a column of
points at x = 0 that says nothing about the trade-off; the table reports it."""

POLICY_COLOURS = {
    "static": "black",
    "random": "tab:gray",
    "round-robin": "tab:brown",
    "power-of-two": "tab:olive",
    "least-loaded": "tab:cyan",
    "reactive": "tab:red",
    "cpu": "tab:blue",
    "predict": "tab:green",
    "seasonal": "tab:purple",
    "blend": "tab:pink",
    "recipe": "tab:orange",
}
"""One colour per policy family in the churn plot (an unknown one gets grey)."""

VARIANT_MARKERS = {"-": "s", "raw": "o", "stabilized": "^"}

ONE_HOUR_POLICIES = frozenset(p.name for p in POLICIES if p.life in (None, "1h"))
"""The policies the churn plot draws: those reported at the 1 h life (matched horizon or none)."""


def _at_one_hour(policy: str) -> bool:
    return policy in ONE_HOUR_POLICIES or policy not in {p.name for p in POLICIES}


LABEL_OFFSETS = {"cpu": (-6, -11), "predict": (6, 5), "seasonal": (6, -11), "random": (-6, -11)}
"""Where each policy's name sits from its raw point (points): the three windowed policies land close
together, so their names go to different sides; the others sit up and to the right."""


def _pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (files only), or a RuntimeError saying how to install it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise RuntimeError("the placement-quality plots need matplotlib: pip install -e '.[bench]'") from exc
    return plt


FAMILY_MAPS = ("Reds", "Blues", "Greens", "Purples", "Oranges", "Greys")
"""One sequential colour map per trace family, in order of first appearance; shades tell clusters apart."""


def cluster_colours(names: Sequence[str]) -> list[tuple[float, float, float, float]]:
    """A fixed RGBA colour per cluster, the same in the load lines and the decision strips.

    The family is the name up to its first ``-`` (``google-w2`` is ``google``); each family gets its own
    hue and its clusters shades of it from dark to light, so a reader sees at once which trace a strip
    came from, and no two families share a hue.
    """
    plt = _pyplot()
    families: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        families.setdefault(name.split("-", 1)[0], []).append(i)
    colours: list[tuple[float, float, float, float]] = [(0.0, 0.0, 0.0, 1.0)] * len(names)
    for f, members in enumerate(families.values()):
        cmap = plt.get_cmap(FAMILY_MAPS[f % len(FAMILY_MAPS)])
        shades = np.linspace(0.9, 0.45, len(members)) if len(members) > 1 else [0.75]
        for member, shade in zip(members, shades, strict=True):
            colours[member] = tuple(float(c) for c in cmap(float(shade)))  # type: ignore[assignment]
    return colours


def hindsight_best(loads: NDArray[np.float64], life_steps: int = LIFE_STEPS) -> NDArray[np.int64]:
    """Per step ``j``, the cluster with the lowest mean load over ``[j, j + life_steps)``; -1 where the
    life runs past the series.

    This is the yardstick :func:`bench.placement_quality.metrics.lifetime_regret` measures k=1 regret against
    (regret 0 means the pick was this cluster or tied with it; ties go to the lowest index here).
    """
    steps = loads.shape[1]
    best = np.full(steps, -1, dtype=np.int64)
    if life_steps < 1:
        raise ValueError(f"life_steps must be at least 1, got {life_steps}")
    if life_steps <= steps:
        means = sliding_window_view(loads, life_steps, axis=1).mean(axis=-1)
        best[: means.shape[1]] = np.argmin(means, axis=0)
    return best


def representative_day(decisions: Sequence[metrics.Decision], steps_per_day: int = STEPS_PER_DAY) -> int:
    """The whole day (0-based) whose count of decision changes is closest to the median day's.

    A typical day rather than the first or the busiest: the plot should look like what the table's
    "changes per day" averages.  Changes are counted inside each day (its first step is not one);
    ties go to the earliest day.
    """
    days = len(decisions) // steps_per_day
    if days < 1:
        raise ValueError(f"{len(decisions)} decisions do not fill one day of {steps_per_day} steps")
    counts = [
        metrics.decision_changes(decisions[d * steps_per_day : (d + 1) * steps_per_day]) for d in range(days)
    ]
    median = float(np.median(counts))
    return min(range(days), key=lambda d: (abs(counts[d] - median), d))


DAY_POLICIES = ("reactive", "cpu", SHIPPED_SEASONAL)
"""The scored policies the day plot draws (raw and stabilized each), beside static."""


def decision_rows(published: Mapping[str, Scores], names: Sequence[str]) -> dict[str, NDArray[np.int64]]:
    """The cluster the ``exact`` k=1 Placement picks at every judged step, per row of the day plot.

    ``published`` maps a row label (``"cpu raw"``) to its published scores aligned to the judged steps
    (:meth:`bench.placement_quality.replay.Timeline.aligned`); rows are ``static`` then those, in order, each
    decided over the whole judged series so that a day's first step sees the decision before it.
    Ties go to the cluster names as given (one order of the benchmark's many).
    """
    steps = next(iter(published.values())).shape[1] if published else 0
    rows = {"static": np.array([d[0] for d in decide_static(steps, names, 1, "exact")], dtype=np.int64)}
    for label, scores in published.items():
        decided = decide(scores, names, 1, "exact", "quality", "score")
        rows[label] = np.array([d[0] for d in decided], dtype=np.int64)
    return rows


def day_series(
    scores: Mapping[str, Scores], timeline: Timeline, settings: Stabilization = STABILIZATION
) -> dict[str, Scores]:
    """Each of :data:`DAY_POLICIES` in ``scores``, raw and stabilized, aligned at lag 0, by row label."""
    times = [float(step_time(s)) for s in timeline.scored]
    out: dict[str, Scores] = {}
    for policy in DAY_POLICIES:
        if policy not in scores:
            continue
        raw = scores[policy]
        out[f"{policy} raw"] = timeline.aligned(raw)
        out[f"{policy} stabilized"] = timeline.aligned(stabilize(raw, times, settings))
    return out


def plot_day(
    loads: NDArray[np.float64],
    timeline: Timeline,
    scores: Mapping[str, Scores],
    names: Sequence[str],
    out: Path,
    *,
    day: int | None = None,
    settings: Stabilization = STABILIZATION,
) -> Path:
    """Write the day plot to ``out`` (PNG): loads and ``exact`` k=1 decisions over one judged day.

    Args:
        loads: clusters x all steps (warm-up included), CPU percent, as in the scores file.
        timeline: the run's warm-up, judged steps and scored samples.
        scores: raw scores per policy, clusters x ``timeline.scored`` samples.
        names: the clusters, in the order of the arrays' rows.
        out: where to write.
        day: the judged day to draw (0-based); None picks :func:`representative_day` of the reactive
            raw decisions (the policy that moves most, so its typical day is the most telling), or of
            the first row's if there is no reactive one.
        settings: the stabilization the stabilized rows use (the benchmark's by default).
    """
    plt = _pyplot()
    warmup = timeline.warmup
    judged = loads[:, warmup : warmup + timeline.judged]
    steps = judged.shape[1]
    expected = (loads.shape[0], len(timeline.scored))
    if len(names) != loads.shape[0] or any(s.shape != expected for s in scores.values()):
        raise ValueError(f"{len(names)} names, loads {loads.shape}, {timeline}: scores do not match")
    rows = decision_rows(day_series(scores, timeline, settings), names)
    if day is None:
        basis = "reactive raw" if "reactive raw" in rows else next(iter(rows.keys() - {"static"}), "static")
        day = representative_day([int(c) for c in rows[basis]])
    days = steps // STEPS_PER_DAY
    if not 0 <= day < days:
        raise ValueError(f"day {day} is not one of the {days} whole judged days")
    cut = slice(day * STEPS_PER_DAY, (day + 1) * STEPS_PER_DAY)
    strips = {HINDSIGHT: hindsight_best(judged)[cut], **{r: v[cut] for r, v in rows.items()}}

    colours = cluster_colours(names)
    start = step_time(warmup + cut.start)
    first_hour = (start % 86_400) / 3600
    hours = first_hour + np.arange(STEPS_PER_DAY) * (24 / STEPS_PER_DAY)
    fig, (top, bottom) = plt.subplots(
        2, 1, sharex=True, figsize=(12, 8.5), height_ratios=(1.1, 1), constrained_layout=True
    )
    for i, name in enumerate(names):
        top.plot(hours, judged[i, cut], color=colours[i], linewidth=1, label=name)
    top.set_ylabel("CPU load (%)")
    top.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", title="cluster")
    top.grid(alpha=0.3)

    image = np.ones((len(strips), STEPS_PER_DAY, 4))
    for r, picks in enumerate(strips.values()):
        for c in range(len(names)):
            image[r, picks == c] = colours[c]
    end = first_hour + 24
    bottom.imshow(
        image, aspect="auto", interpolation="nearest", extent=(first_hour, end, len(strips) - 0.5, -0.5)
    )
    bottom.set_yticks(range(len(strips)), list(strips), fontsize="small")
    for r in range(len(strips) - 1):
        bottom.axhline(r + 0.5, color="white", linewidth=2 if r == 0 else 1)
    bottom.set_xlim(first_hour, end)
    bottom.set_xticks(np.arange(first_hour, end + 0.01, 3))
    date = np.datetime64(int(start), "s").astype("datetime64[D]")
    bottom.set_xlabel(f"hour of the series' day (the traces carry no time zone), {date}")
    bottom.set_ylabel(f"cluster picked\n(exact, k=1, lag 0; best over the next {LIFE_STEPS} steps on top)")
    fig.suptitle(f"placement-quality: loads and decisions, judged day {day + 1} of {days}")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def plot_churn_regret(
    results: Sequence[Mapping[str, Any]],
    out: Path,
    frontiers: Mapping[int, Sequence[Mapping[str, Any]]] | None = None,
) -> Path:
    """Write the churn plot to ``out`` (PNG): decision changes per day against mean regret.

    One subplot per (form, k) present in ``results`` among :data:`CHURN_FORMS` (rows: forms, columns:
    k), sharing the y axis so forms and k compare at a glance; it is log-scaled because static's regret
    is several times the scored policies' and would squash their differences on a linear axis.  One
    point per policy and variant, colour by policy family, marker by variant, a thin line from each
    policy's raw point to its stabilized one.  The x axis is symlog (linear below 1) so static's 0
    changes stay on the plot next to hundreds.  A regret of exactly 0 has no place on a log axis, so
    then y is linear.  Results recorded with a lag and a life are drawn at lag 0 and the 1 h life, for
    the policies reported there.  ``frontiers`` (per k, the oracle's points: ``changes_per_day``,
    ``regret``) is drawn as a dashed line in that k's panels: the best regret any policy picking k
    clusters could reach at that churn.
    """
    plt = _pyplot()
    chosen = [
        r
        for r in results
        if r["form"] in (*CHURN_FORMS, "-")
        and r.get("regret_mean") is not None
        and r.get("lag", 0) == 0
        and r.get("life_steps", LIFE_STEPS) == LIFE_STEPS
        and _at_one_hour(str(r["policy"]))
    ]
    # A baseline has no Placement form: it is drawn in every form's panel.
    chosen = [{**r, "form": f} for r in chosen for f in (CHURN_FORMS if r["form"] == "-" else (r["form"],))]
    forms = [f for f in CHURN_FORMS if any(r["form"] == f for r in chosen)]
    ks = sorted({int(r["k"]) for r in chosen})
    log_y = all(float(r["regret_mean"]) > 0 for r in chosen)
    if not forms or not ks:
        raise ValueError(f"no result of form {' or '.join(CHURN_FORMS)} with a mean regret to plot")
    floor = min(float(r["regret_mean"]) for r in chosen) / 4 if log_y else 0.0
    fig, axes = plt.subplots(
        len(forms),
        len(ks),
        sharex=True,
        sharey=True,
        squeeze=False,
        figsize=(5.5 * len(ks) + 1.5, 4.2 * len(forms)),
        constrained_layout=True,
    )
    for row, form in enumerate(forms):
        for col, k in enumerate(ks):
            ax = axes[row][col]
            here = [r for r in chosen if r["form"] == form and int(r["k"]) == k]
            points = {(r["policy"], r["variant"]): (r["changes_per_day"], r["regret_mean"]) for r in here}
            if frontier := (frontiers or {}).get(k):
                ordered = sorted(frontier, key=lambda p: float(p["changes_per_day"]))
                ax.plot(
                    [max(float(p["changes_per_day"]), 0.0) for p in ordered],
                    # On a log axis the oracle's 0 is drawn at the floor (the axis bottom below).
                    [max(float(p["regret"]), floor) if log_y else float(p["regret"]) for p in ordered],
                    color="grey",
                    linestyle="--",
                    linewidth=1,
                    zorder=1,
                    label="_oracle",
                )
            for (policy, variant), (x, y) in points.items():
                colour = POLICY_COLOURS.get(
                    policy.split("-", 1)[0] if policy != "round-robin" else policy, "grey"
                )
                ax.scatter(
                    x,
                    y,
                    s=45,
                    marker=VARIANT_MARKERS.get(variant, "D"),
                    facecolors=colour if variant != "stabilized" else "white",
                    edgecolors=colour,
                    linewidths=1.5,
                    zorder=3,
                )
                if variant in ("raw", "-"):
                    family = policy.split("-", 1)[0]
                    ax.annotate(
                        policy,
                        (x, y),
                        xytext=LABEL_OFFSETS.get(family, (6, 4)),
                        textcoords="offset points",
                        ha="right" if LABEL_OFFSETS.get(family, (1, 0))[0] < 0 else "left",
                        fontsize="x-small",
                        color=colour,
                    )
                if variant == "raw" and (policy, "stabilized") in points:
                    sx, sy = points[(policy, "stabilized")]
                    ax.plot([x, sx], [y, sy], color=colour, linewidth=0.8, alpha=0.6, zorder=2)
            ax.set_xscale("symlog", linthresh=1.0)
            if log_y:
                ax.set_yscale("log")
            ax.set_title(f"{form}, k={k}", fontsize="medium")
            ax.grid(alpha=0.3, which="both")
            if row == len(forms) - 1:
                ax.set_xlabel("decision changes per day (symlog)")
            if col == 0:
                ax.set_ylabel("mean regret (load points)")
    if log_y:
        axes[0][0].set_ylim(bottom=floor)
        ticker = plt.matplotlib.ticker
        axes[0][0].yaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        axes[0][0].yaxis.set_major_formatter(ticker.StrMethodFormatter("{x:g}"))
        axes[0][0].yaxis.set_minor_formatter(ticker.NullFormatter())
    else:
        axes[0][0].set_ylim(bottom=0)
    handles = [
        plt.Line2D([], [], linestyle="", marker="o", color="grey", label="raw"),
        plt.Line2D(
            [],
            [],
            linestyle="",
            marker="^",
            markerfacecolor="white",
            markeredgecolor="grey",
            label="stabilized",
        ),
        plt.Line2D([], [], linestyle="", marker="s", color="grey", label="baseline (no scores)"),
        *(
            plt.Line2D([], [], linestyle="-", color=c, label=p)
            for p, c in POLICY_COLOURS.items()
            if any(str(r["policy"]).split("-", 1)[0] == p or r["policy"] == p for r in chosen)
        ),
        *(
            [plt.Line2D([], [], linestyle="--", color="grey", label="hindsight oracle")]
            if any((frontiers or {}).get(k) for k in ks)
            else []
        ),
    ]
    fig.legend(handles=handles, loc="outside right center", fontsize="small")
    fig.suptitle("placement-quality: churn against regret (down: better placements, left: fewer moves)")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def plot_closed_loop(results: Sequence[Mapping[str, Any]], out: Path, life: str = "1h") -> Path:
    """Write the closed-loop plot to ``out`` (PNG): how each placer fares as the workloads grow.

    Two panels over the workload size at ``life``: the share of workload-time above 80 % load, and
    the mean slowdown 1/(1 - u) (log axis: the herding placers' cost is many times the others').  One
    line per placer, scored policies solid and the placers without scores dashed, coloured by family
    as in the churn plot.
    """
    plt = _pyplot()
    here = [r for r in results if r["life"] == life]
    if not here:
        raise ValueError(f"no closed-loop result at the {life} life to plot")
    fig, (hot, slow) = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)

    def key(r: Mapping[str, Any]) -> tuple[str, str, str]:
        return str(r["policy"]), str(r["variant"]), str(r.get("form", "exact"))

    labels = sorted({key(r) for r in here}, key=lambda pvf: (pvf[1] == "-", pvf))
    for policy, variant, form in labels:
        rows = sorted((r for r in here if key(r) == (policy, variant, form)), key=lambda r: r["size"])
        sizes = [float(r["size"]) for r in rows]
        family = policy if variant == "-" else policy.split("-", 1)[0]
        spread = Spread.parse(form)
        style = {
            "color": POLICY_COLOURS.get(family, "grey"),
            "linestyle": "--" if variant == "-" else (":" if spread else "-"),
            "marker": "s" if variant == "-" else ("^" if spread else "o"),
            "label": policy if spread is None else f"{policy}+{spread.form}",
        }
        hot.plot(sizes, [100 * float(r["hot_share"]) for r in rows], **style)
        slow.plot(sizes, [float(r["slowdown"]) for r in rows], **style)
    hot.set_ylabel("workload-time above 80 % load (%)")
    slow.set_ylabel("mean slowdown 1/(1 - u), capped at 100")
    slow.set_yscale("log")
    for ax in (hot, slow):
        ax.set_xlabel("workload size (% of a cluster)")
        ax.set_xticks(sorted({float(r["size"]) for r in here}))
        ax.grid(True, alpha=0.3)
    slow.legend(fontsize=8, loc="upper left")
    fig.suptitle(f"Closed loop, {life} life: placed work adds load (held-out clusters, pick 1, Exact)")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def plot_all(workdir: Path) -> list[Path]:
    """Both plots from ``workdir``'s ``placement-quality-scores.npz`` and ``placement-quality.json``.

    Writes :data:`DAY_PNG` (the representative day), :data:`CHURN_PNG` and, when the run has a closed
    loop, :data:`CLOSED_PNG` into ``workdir`` and returns their paths, in that order.
    """
    record = json.loads((workdir / f"{NAME}.json").read_text())
    setup = record["setup"]
    names: list[str] = list(setup["clusters"])
    with np.load(workdir / f"{NAME}-scores.npz") as data:
        loads = np.asarray(data["loads"], dtype=np.float64)
        warmup = int(data["warmup_steps"])
        first = int(data["first_scored_sample"])
        stored = [k for k in data.files if k not in ("loads", "warmup_steps", "first_scored_sample")]
        known = [p.name for p in POLICIES if p.name in stored]
        order = known + sorted(set(stored) - set(known))
        scores = {p: np.asarray(data[p], dtype=np.int64) for p in order}
    timeline = Timeline(warmup, int(setup["judged_steps"]), max_lag=warmup - 1 - first)
    frontiers = {
        1: (record.get("oracle") or {}).get("1h") or [],
        3: (record.get("oracle_k3") or {}).get("1h") or [],
    }
    out = [
        plot_day(loads, timeline, scores, names, workdir / DAY_PNG),
        plot_churn_regret(record["results"], workdir / CHURN_PNG, frontiers),
    ]
    closed = (record.get("closed_loop") or {}).get("results") or []
    if closed:
        out.append(plot_closed_loop(closed, workdir / CLOSED_PNG))
    return out


__all__ = [
    "CHURN_FORMS",
    "CHURN_PNG",
    "CLOSED_PNG",
    "DAY_PNG",
    "DAY_POLICIES",
    "HINDSIGHT",
    "cluster_colours",
    "day_series",
    "decision_rows",
    "hindsight_best",
    "plot_all",
    "plot_churn_regret",
    "plot_closed_loop",
    "plot_day",
    "representative_day",
]
