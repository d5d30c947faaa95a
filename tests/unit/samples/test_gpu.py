"""The GPU sample scorer in process: DCGM series grouped per GPU, the scarcer resource, the groups."""

from __future__ import annotations

from typing import Any

import pytest

from dynamic_scoring.samples.scorers import gpu
from dynamic_scoring.samples.scorers.server import build_parser, config_document
from dynamic_scoring.scorer import RequestError, ScoringRequest, Series

T0 = 1_800_000_000


def dcgm(metric: str, node: str, index: int, values: list[float], **extra: str) -> Series:
    """One DCGM exporter series with the exporter's own labels."""
    labels = {
        "__name__": metric,
        "Hostname": node,
        "gpu": str(index),
        "UUID": f"GPU-{node}-{index}",
        "device": f"nvidia{index}",
        "modelName": "NVIDIA A100-SXM4-40GB",
        "instance": "10.0.0.1:9400",
        "job": "nvidia-dcgm-exporter",
        **extra,
    }
    return Series(labels, [(T0 + 30 * i, v) for i, v in enumerate(values)])


def card(node: str, index: int, util: float, used: float, free: float) -> list[Series]:
    """The three series of one GPU, each constant over the window."""
    return [
        dcgm(gpu.UTIL, node, index, [util, util]),
        dcgm(gpu.FB_USED, node, index, [used, used]),
        dcgm(gpu.FB_FREE, node, index, [free, free]),
    ]


def scores(series: list[Series], **params: object) -> list[Any]:
    return [(r.metric, r.score) for r in gpu.score(ScoringRequest(series, dict(params)))]


def test_a_gpu_counts_free_by_its_scarcer_resource() -> None:
    # 20 % busy but 30 000 of 40 000 MiB used: memory is the limit, a quarter of the GPU is free.
    assert scores(card("n1", 0, 20, 30_000, 10_000)) == [({}, 25.0)]
    # 90 % busy with memory to spare: the cores are the limit.
    assert scores(card("n1", 0, 90, 1_000, 39_000)) == [({}, pytest.approx(10.0))]


def test_free_gpus_add_up_to_the_group_and_params_gpus_sets_a_full_score() -> None:
    fleet = card("n1", 0, 0, 0, 40_000) + card("n1", 1, 50, 0, 40_000) + card("n2", 0, 100, 0, 40_000)
    assert scores(fleet) == [({}, 100.0)]  # 1.5 GPUs free, one is enough
    assert scores(fleet, gpus=2) == [({}, 75.0)]
    assert scores(fleet, gpus=2, per="node") == [({"node": "n1"}, 75.0), ({"node": "n2"}, 0.0)]
    assert scores(fleet, per="gpu") == [
        ({"node": "n1", "device": "nvidia0"}, 100.0),
        ({"node": "n1", "device": "nvidia1"}, 50.0),
        ({"node": "n2", "device": "nvidia0"}, 0.0),
    ]


def test_one_gpu_seen_under_several_pods_is_one_gpu() -> None:
    # Pod mapping labels each series with the pod using the GPU; a new pod starts a new series.
    series = [
        dcgm(gpu.UTIL, "n1", 0, [100.0], pod="a"),
        Series({**dcgm(gpu.UTIL, "n1", 0, [], pod="b").labels}, [(T0 + 30, 0.0), (T0 + 60, 0.0)]),
    ]
    # mean over the GPU's times: 100, 0, 0 -> two thirds free
    assert scores(series) == [({}, pytest.approx(100 * 2 / 3))]


def test_a_gpu_with_only_one_kind_of_metric_is_rated_by_it() -> None:
    assert scores([dcgm(gpu.UTIL, "n1", 0, [40.0])]) == [({}, pytest.approx(60.0))]
    only_memory = [dcgm(gpu.FB_USED, "n1", 0, [10.0]), dcgm(gpu.FB_FREE, "n1", 0, [30.0])]
    assert scores(only_memory) == [({}, 75.0)]
    assert scores([dcgm(gpu.FB_USED, "n1", 0, [10.0])]) == []  # used without free says nothing


def test_out_of_range_readings_are_clamped() -> None:
    assert scores([dcgm(gpu.UTIL, "n1", 0, [130.0])]) == [({}, 0.0)]
    assert scores([dcgm(gpu.UTIL, "n1", 0, [-5.0])]) == [({}, 100.0)]


def test_no_series_scores_nothing_and_foreign_series_are_a_named_error() -> None:
    assert scores([]) == []
    foreign = Series({"__name__": "node_load1"}, [(T0, 1.0)])
    with pytest.raises(RequestError, match=r"no DCGM_FI_DEV_GPU_UTIL.*among 1.*metric names"):
        gpu.score(ScoringRequest([foreign]))
    # beside the GPU's series a foreign one is ignored
    assert scores([foreign, *card("n1", 0, 0, 0, 1)]) == [({}, 100.0)]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"gpus": 0}, "params.gpus"),
        ({"gpus": True}, "params.gpus"),
        ({"gpus": "2"}, "params.gpus"),
        ({"per": "rack"}, "params.per: expected one of cluster, node, gpu"),
        ({"horizon": -1}, "params.horizon"),
    ],
)
def test_bad_params_are_named(params: dict[str, object], message: str) -> None:
    with pytest.raises(RequestError, match=message):
        gpu.score(ScoringRequest(card("n1", 0, 0, 0, 1), params))


def test_a_horizon_scores_the_forecast_load() -> None:
    # Without a day of history the forecast is the recent level (the last hour's mean).
    series = [dcgm(gpu.UTIL, "n1", 0, [0.0] * 80 + [50.0] * 140)]  # 30 s apart: the last hour is 50 %
    assert scores(series) == [({}, pytest.approx(100 - 50 * 140 / 220))]
    assert scores(series, horizon=3600) == [({}, pytest.approx(50.0))]


def test_config_names_the_dcgm_query_and_takes_no_capacity() -> None:
    parser = build_parser("gpu", gpu.DEFAULTS)
    args = parser.parse_args([])
    assert not hasattr(args, "capacity_cores")
    config = config_document(args, gpu.DEFAULTS.description)
    assert config.name == "gpu_free"
    assert config.source.params.query == (
        '{__name__=~"DCGM_FI_DEV_GPU_UTIL|DCGM_FI_DEV_FB_USED|DCGM_FI_DEV_FB_FREE"}'
    )
    assert (config.source.params.range, config.source.params.step, config.scoring.params.interval) == (
        300,
        30,
        30,
    )


@pytest.mark.parametrize("argv", [["--gpus", "0"], ["--per", "rack"]])
def test_bad_options_stop_at_start(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        gpu.main(argv)
    assert stopped.value.code == 2
