"""The closed loop's pure parts: arrivals, placing, the baselines, one-step ranking and the judge."""

from __future__ import annotations

import numpy as np
import pytest

from bench.placement_quality import closed_loop as cl
from bench.placement_quality import report
from bench.placement_quality import spread as sp
from bench.placement_quality.experiment import decide_fast, decide_next, tie_order
from bench.placement_quality.ranking import FORMS, Form
from bench.placement_quality.remote_write import _varint, encode
from dynamic_scoring.ctl.placement_model import balance_scores


@pytest.mark.parametrize("life", [3, 12, 48, 144])
def test_arrivals_hold_the_same_number_of_workloads_alive_at_every_life(life: int) -> None:
    counts = cl.arrivals(2000, life, placements=2)
    alive = np.convolve(counts, np.ones(life, dtype=np.int64))[life:2000]
    # Two streams of one workload per hour of life: 24 alive once the first life has passed.
    assert alive.min() >= 23 and alive.max() <= 25
    assert abs(alive.mean() - 24) < 0.1


def test_arrivals_refuse_nonsense() -> None:
    with pytest.raises(ValueError):
        cl.arrivals(10, 0)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("k", [1, 3])
def test_one_step_ranking_is_the_fast_ranking_step_by_step(seed: int, form: Form, k: int) -> None:
    rng = np.random.default_rng(seed)
    scores = rng.integers(40, 46, size=(6, 60)).astype(np.int64)
    order = tie_order(6, seed)
    whole = decide_fast(scores, k, form, order)
    previous: tuple[int, ...] = ()
    for j in range(scores.shape[1]):
        previous = decide_next(scores[:, j], previous, k, form, order)
        assert previous == tuple(whole[j].tolist())


def _loop(
    policy: str, base: np.ndarray, *, variant: str = "-", form: str = "-", size: float = 5.0
) -> cl.Loop:
    setup = cl.Setup(policy, variant, form, size, "15m")
    return cl.Loop(setup, base, warmup=2, order=np.arange(base.shape[0], dtype=np.int64), seed=1)


def test_a_placed_workload_adds_its_size_over_its_life_only() -> None:
    loop = _loop("random", np.zeros((2, 10)))
    loop.place(4, 1, 2)
    assert loop.added[1].tolist() == [0, 0, 0, 0, 10, 10, 10, 0, 0, 0]
    assert loop.added[0].sum() == 0
    loop.place(8, 0, 1)  # a life running past the series is cut at its end
    assert loop.added[0].tolist()[8:] == [5, 5]


def test_least_loaded_reads_the_sample_before_and_sends_the_whole_step_there() -> None:
    base = np.array([[50.0, 10.0, 90.0], [30.0, 90.0, 10.0]])
    loop = _loop("least-loaded", base)
    loop.step(2, None)  # sample 1 says cluster 0 (10 %) is least loaded; sample 2 would say cluster 1
    assert loop.placed == [(2, 0, int(loop.arrivals[2]))]


def test_power_of_two_takes_the_less_loaded_of_two_and_random_spreads() -> None:
    base = np.tile(np.array([[10.0], [20.0], [30.0], [40.0]]), (1, 400))
    p2c = _loop("power-of-two", base, size=0.0)  # no added load: the loads stay as they are
    for step in range(2, 400):
        p2c.step(step, None)
    where = np.bincount([c for _, c, _ in p2c.placed], minlength=4)
    # Of two distinct random clusters the less loaded: cluster 0 wins 3/6 of pairs, 3 never.
    assert where[3] == 0 and where[0] > where[1] > where[2] > 0
    rnd = _loop("random", base, size=0.0)
    for step in range(2, 400):
        rnd.step(step, None)
    spread = np.bincount([c for _, c, _ in rnd.placed], minlength=4)
    assert spread.min() > 0.15 * spread.sum()


def test_round_robin_walks_the_names_in_order() -> None:
    setup = cl.Setup("round-robin", "-", "-", 1.0, "1h")
    order = np.array([2, 0, 1], dtype=np.int64)  # cluster 1 sorts first, then 2, then 0
    loop = cl.Loop(setup, np.zeros((3, 20)), warmup=0, order=order, seed=0)
    for step in range(1, 4):
        loop.step(step, None)
    assert [c for _, c, _ in loop.placed] == [1, 2, 0, 1, 2, 0]  # two arrivals a step


def test_a_scored_setup_sends_the_steps_arrivals_to_its_best_score_and_counts_ties() -> None:
    loop = _loop("cpu", np.zeros((3, 10)), variant="raw", form="exact")
    loop.step(2, np.array([40, 70, 70], dtype=np.int64))  # a tie: the first by name (cluster 1)
    loop.step(3, np.array([90, 70, 10], dtype=np.int64))
    assert [c for _, c, _ in loop.placed] == [1, 0]
    assert (loop.ties, loop.decisions) == (1, 2)
    with pytest.raises(ValueError, match="needs the step's scores"):
        loop.step(4, None)


def test_steady_keeps_the_previous_pick_within_its_margin() -> None:
    loop = _loop("cpu", np.zeros((2, 10)), variant="raw", form="margin")
    loop.step(2, np.array([60, 50], dtype=np.int64))
    loop.step(3, np.array([55, 62], dtype=np.int64))  # 7 points ahead: inside the 10-point margin
    loop.step(4, np.array([50, 62], dtype=np.int64))  # 12 ahead: it moves
    assert [c for _, c, _ in loop.placed] == [0, 0, 1]


def test_judge_weighs_every_workload_step_and_caps_the_cost() -> None:
    base = np.array([[50.0] * 8, [95.0] * 8])
    loop = _loop("random", base, size=10.0)  # life 3 steps
    loop.place(2, 0, 1)  # experiences 60, 60, 60
    loop.place(3, 1, 2)  # experiences 115, 115, 115 (two workloads)
    loop.place(6, 0, 1)  # its life runs past the series: not judged
    result = cl.judge(loop, first=2, step_seconds=300)
    assert result.workloads == 3
    assert result.load_mean == pytest.approx((60 + 2 * 115) / 3)
    assert result.load_p95 == 115
    assert result.hot_share == pytest.approx(2 / 3)
    assert result.slowdown == pytest.approx((2.5 + 2 * 100) / 3)
    both = (2.5 + 2 * 100) / 3
    assert result.per_step_slowdown[:4].tolist() == pytest.approx([2.5, both, both, 100.0])
    assert np.isnan(result.per_step_slowdown[4:]).all()  # no judged workload alive at steps 6 and 7
    assert result.per_step_hot[:4].tolist() == pytest.approx([0, 2 / 3, 2 / 3, 1])
    # the load the top 5 % of the workloads alive meet: 60 alone, then 115 (two of three there)
    assert result.per_step_p95[:4].tolist() == [60, 115, 115, 115]
    assert np.isnan(result.per_step_p95[4:]).all()
    # regret: above the least loaded cluster then (60 while the first workload lives there, so the two at
    # 115 are 55 above it, then 50 at the last step, 65 below them); the first is on the least loaded
    assert result.regret == pytest.approx(2 * (55 + 55 + 65) / 9)
    assert result.per_step_regret[:4].tolist() == pytest.approx([0, 110 / 3, 110 / 3, 65])


def test_the_per_step_p95_weighs_workloads_not_clusters() -> None:
    total = np.array([[10.0, 10.0], [50.0, 50.0], [90.0, 90.0]])
    weights = np.array([[19.0, 0.0], [1.0, 0.0], [0.0, 0.0]])
    # 19 of 20 workloads at 10, one at 50: the 95th percentile is 10 (19 / 20 = 0.95 of them reach it)
    assert cl.step_p95(total, weights)[0] == 10
    assert np.isnan(cl.step_p95(total, weights)[1])
    weights[1, 0] = 2.0  # 19 of 21: the top 5 % are at 50
    assert cl.step_p95(total, weights)[0] == 50


def test_comparisons_pair_steps_and_skip_steps_without_arrivals() -> None:
    base = np.tile(np.linspace(10, 90, 5)[:, None], (1, 300))
    loops = cl.make_loops(
        [cl.Setup("random", "-", "-", 3.0, "4h"), cl.Setup("least-loaded", "-", "-", 3.0, "4h")], base, 10
    )
    for loop in loops:
        for step in range(10, 300):
            loop.step(step, None)
    results = [cl.judge(loop, 10, 300) for loop in loops]
    (slow, hot, p95, regret) = cl.compare_loops(results)
    assert (slow.measure, hot.measure, p95.measure, regret.measure) == (
        "slowdown",
        "hot_share",
        "load_p95",
        "regret",
    )
    assert p95.verdict == "least-loaded lower"
    assert regret.verdict == "least-loaded lower"
    assert slow.interval.steps == np.isfinite(results[0].per_step_slowdown).sum() < 300 - 10
    assert np.isfinite(results[0].per_step_slowdown[4 : 300 - 10 - 48]).all()  # dense once work lives
    assert slow.verdict == "least-loaded lower"  # it always finds the 10 % cluster


def test_remote_write_encoding_is_protobuf_varints_and_snappy() -> None:
    assert _varint(1) == b"\x01" and _varint(300) == b"\xac\x02"
    with pytest.raises(ValueError):
        _varint(-1)
    with pytest.raises(ValueError, match="__name__"):
        encode([({"cluster": "a"}, [(0, 1.0)])])


def test_more_placements_place_more_work_a_step_and_all_of_a_scored_step_goes_to_one_cluster() -> None:
    setup = cl.Setup("cpu", "raw", "exact", 1.0, "1h")
    loop = cl.Loop(
        setup, np.zeros((4, 30)), warmup=2, order=np.arange(4, dtype=np.int64), seed=0, placements=10
    )
    assert loop.arrivals.tolist() == [10] * 30  # one workload a step per Placement at a 1 h life
    loop.step(2, np.array([10, 90, 50, 50], dtype=np.int64))
    assert loop.placed[-1] == (2, 1, 10)
    assert loop.added[1, 2] == 10.0
    loops = cl.make_loops([setup], np.zeros((4, 30)), 2, placements=3)
    assert loops[0].arrivals[0] == 3


@pytest.mark.parametrize(
    "counts", [[0, 0, 0], [0, 1, 2, 4], [3, 3, 1], [5, 0, 2, 7, 1], [1, 2, 3, 4, 5, 6, 7]]
)
def test_balance_scores_are_ocms_balance_as_the_placement_model_computes_it(counts: list[int]) -> None:
    names = [f"c{i}" for i in range(len(counts))]
    decisions = [
        {"status": {"decisions": [{"clusterName": n}]}}
        for n, k in zip(names, counts, strict=True)
        for _ in range(k)
    ]
    model = balance_scores(names, decisions)
    assert sp.balance_scores(np.array(counts, dtype=np.int64)).tolist() == [model[n][0] for n in names]


def test_spread_forms_parse_back_and_name_the_setup() -> None:
    for spread in (sp.Spread(1, None), sp.Spread(3, 12)):
        assert sp.Spread.parse(spread.form) == spread
    assert (
        sp.Spread.parse("exact") is None
        and sp.Spread.parse("margin") is None
        and sp.Spread.parse("-") is None
    )
    setup = cl.Setup("recipe-1h", "raw", "inflight-12-1", 3.0, "1h")
    assert setup.label == "recipe-1h/raw+inflight-12-1"
    assert cl.Setup("recipe-1h", "raw", "exact", 3.0, "1h").label == "recipe-1h/raw"


def test_balance_spreads_a_steps_arrivals_that_one_placement_would_herd() -> None:
    # 15 m life: 8 arrivals a step. Equal scores: the plain form sends all 8 to one cluster; with
    # Balance each Placement sees the decisions before it, so they spread evenly over the 4 clusters.
    herd = _loop("cpu", np.zeros((4, 10)), variant="raw", form="exact")
    herd.step(2, np.full(4, 50, dtype=np.int64))
    assert [(c, n) for _, c, n in herd.placed] == [(0, 8)]
    spread = _loop("cpu", np.zeros((4, 10)), variant="raw", form="balance-1")
    spread.step(2, np.full(4, 50, dtype=np.int64))
    assert sorted(c for _, c, _ in spread.placed) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert spread.decisions == 8
    # A lead of more than 200 x 1 / 10 = 20 points beats the whole Balance range: all go there.
    lead = _loop("cpu", np.zeros((4, 10)), variant="raw", form="balance-1")
    lead.step(2, np.array([50, 71, 50, 50], dtype=np.int64))
    assert {c for _, c, _ in lead.placed} == {1}


def test_the_in_flight_account_forgets_decisions_older_than_its_window() -> None:
    base = np.zeros((2, 12))
    # Balance remembers every live workload: cluster 0's earlier work keeps steering the next away.
    balance = _loop("cpu", base, variant="raw", form="balance-1")
    balance.place(1, 0, 4)
    balance.step(3, np.array([52, 50], dtype=np.int64))
    assert [c for _, c, _ in balance.placed[1:]][:4] == [1, 1, 1, 1]
    # A one-step window has forgotten them by step 3: the higher score takes the first arrival again.
    inflight = _loop("cpu", base, variant="raw", form="inflight-1-1")
    inflight.place(1, 0, 4)
    inflight.step(3, np.array([52, 50], dtype=np.int64))
    assert [c for _, c, _ in inflight.placed[1:]][:2] == [0, 1]


def test_setups_take_a_policys_own_spread_form_and_the_report_names_it() -> None:
    setups = cl.setups_for(["recipe-1h+balance-1", "reactive"], [3.0], ["1h"])
    scored = [(s.policy, s.form, s.label) for s in setups if s.scored]
    assert scored == [
        ("recipe-1h", "balance-1", "recipe-1h/raw+balance-1"),
        ("reactive", "exact", "reactive/raw"),
    ]
    assert [s.label for s in setups if not s.scored] == list(cl.LOOP_BASELINES)
    row = {"policy": "recipe-1h", "variant": "raw", "form": "inflight-12-1", "size": 3.0, "life": "1h"}
    row |= {"load_mean": 57.0, "load_p95": 64.0, "hot_share": 0.004, "slowdown": 2.4}
    row |= {"tie_share": 0.1, "changes_per_day": None}
    assert "| 1h | 3 % | recipe-1h/raw+inflight-12-1 | 57.0 / 64.0 | 0.4 % |" in report.closed_loop([row])


def test_steady_spread_forms_parse_and_refuse_an_in_flight_window() -> None:
    assert sp.Spread.parse("balance-3-steady7") == sp.Spread(3, None, 7)
    assert sp.Spread(3, None, 7).form == "balance-3-steady7"
    with pytest.raises(ValueError, match="Balance only"):
        sp.Spread(1, 12, 3)


def test_held_placements_move_their_workload_when_steady_is_outweighed_and_the_judge_follows() -> None:
    # 2 clusters, a 15 m life (3 steps, 8 arrivals a step): equal scores split the first step 4 / 4.
    def run(form: str) -> cl.Loop:
        loop = _loop("cpu", np.zeros((2, 12)), variant="raw", form=form, size=5.0)
        loop.step(2, np.array([50, 50], dtype=np.int64))
        assert sorted(c for _, c, _ in loop.placed) == [0, 0, 0, 0, 1, 1, 1, 1]
        loop.step(3, np.array([20, 80], dtype=np.int64))  # cluster 1 leads by 60 points: 600 of score
        return loop

    light, heavy = run("balance-3-steady1"), run("balance-3-steady9")
    # Steady 1 (100) loses to the lead until Balance, counting the moved ones, makes up the rest: three
    # of four move.  Steady 9 (900) outweighs the lead and Balance's whole range: none moves.
    assert light.moves == [(3, 0, 1, 2)] * 3
    assert heavy.moves == []
    for loop in (light, heavy):
        # the load moved with the workloads: nothing lost or doubled
        assert np.allclose(loop.added.sum(axis=0)[2:5], [40, 80, 80])
        weights = cl.live_weights(loop, 2)
        assert weights.sum(axis=0)[2:5].tolist() == [8, 16, 16]
    # from the move on, three of step 2's four workloads on cluster 0 live on cluster 1, load and all
    assert cl.live_weights(light, 2)[:, 2:5].tolist() == [[4, 1, 1], [4, 15, 15]]
    assert light.added[:, 2:5].tolist() == [[20, 5, 5], [20, 75, 75]]
    assert cl.live_weights(heavy, 2)[:, 2:5].tolist() == [[4, 4, 4], [4, 12, 12]]
