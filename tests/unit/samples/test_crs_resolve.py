"""The sample DynamicScorers resolve, through the hub's own logic, to the summaries the agents need.

In Full mode the hub merges the scorer's ``/config`` (as the sample Deployment runs it) into the
spec; in None mode the spec alone must say the same.  Either way the agent must end up calling the
scorer's Service with the scorer's own query, window and interval.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamic_scoring.addon.registry.effective import resolve
from dynamic_scoring.addon.registry.models import DynamicScorer, parse_scorer
from dynamic_scoring.addon.registry.probe import check_config
from dynamic_scoring.samples.scorers import cost, cpu, gpu, latency, power, predict, seasonal
from dynamic_scoring.samples.scorers.prices import parse_table
from dynamic_scoring.samples.scorers.server import Defaults, build_parser, config_document

SAMPLES = Path(__file__).resolve().parents[3] / "samples"


def load(path: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((SAMPLES / path).read_text()) if d is not None]


def container_args(name: str) -> list[str]:
    [deployment] = [d for d in load("crs/sample-scorers.yaml") if d["kind"] == "Deployment"]
    [container] = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == name]
    args: list[str] = container["args"]
    return args


def served_config(defaults: Defaults, container: str) -> dict[str, Any]:
    """The /config the sample Deployment's container serves, through the hub's checks."""
    args = build_parser("x", defaults).parse_args(container_args(container))
    doc, problems = check_config(config_document(args, defaults.description))
    assert doc is not None and not problems, problems
    result: dict[str, Any] = json.loads(doc.model_dump_json())
    return result


def scorer(path: str, synced: dict[str, Any] | None = None, index: int = 0) -> DynamicScorer:
    obj = load(path)[index]
    if synced is not None:
        obj["status"] = {"lastSyncedConfig": synced}
    parsed = parse_scorer(obj)
    assert isinstance(parsed, DynamicScorer), parsed
    return parsed


def test_full_mode_scorer_resolves_to_the_scorers_own_config() -> None:
    resolution = resolve(scorer("crs/cpu-headroom-scorer.yaml", served_config(cpu.DEFAULTS, "cpu")))
    assert not resolution.problems and resolution.summary is not None, resolution
    s = resolution.summary
    assert s.score_name == "cpu_headroom"
    assert s.source_type == "Prometheus"
    assert s.source_endpoint == "http://prometheus-k8s.monitoring.svc:9090/api/v1/query_range"
    assert (s.source_query, s.source_range, s.source_step) == (cpu.DEFAULTS.query, 300, 15)
    assert s.scoring_endpoint == "http://sample-scorers.dynamic-scoring-samples.svc:8000/scoring"
    assert s.scoring_interval == 30
    assert s.score_dimension_format == "${scoreName}"
    assert (s.valid_for_seconds, s.timeout_seconds) == (120, 10)


def test_full_mode_waits_for_config_before_distributing() -> None:
    resolution = resolve(scorer("crs/cpu-headroom-scorer.yaml"))
    assert resolution.summary is None and resolution.pending


def test_none_mode_scorer_resolves_to_what_the_scorer_would_have_said() -> None:
    resolution = resolve(scorer("crs/cpu-forecast-scorer.yaml"))
    assert not resolution.problems and resolution.summary is not None, resolution
    s = resolution.summary
    served = served_config(predict.DEFAULTS, "predict")
    assert s.score_name == served["scoring"]["params"]["name"] == "cpu_forecast"
    assert (s.source_query, s.source_range, s.source_step) == (
        served["source"]["params"]["query"],
        served["source"]["params"]["range"],
        served["source"]["params"]["step"],
    )
    assert served["scoring"]["host"] == ""  # so the spec's (the sample Service) is the one used
    assert (
        s.scoring_endpoint
        == "http://sample-scorers.dynamic-scoring-samples.svc:8001" + served["scoring"]["path"]
    )
    assert s.scoring_interval == served["scoring"]["params"]["interval"]


@pytest.mark.parametrize(
    ("index", "name", "horizon"), [(0, "cpu_seasonal", 3_600), (1, "cpu_seasonal_4h", 14_400)]
)
def test_the_seasonal_scorers_resolve_to_a_day_and_an_hour_of_history_and_a_horizon(
    index: int, name: str, horizon: int
) -> None:
    resolution = resolve(scorer("crs/cpu-seasonal-scorer.yaml", index=index))
    assert not resolution.problems and resolution.summary is not None, resolution
    s = resolution.summary
    served = served_config(seasonal.DEFAULTS, "seasonal")
    assert served["scoring"]["params"]["name"] == "cpu_seasonal"
    assert s.score_name == name
    assert (s.source_query, s.source_range, s.source_step) == (
        served["source"]["params"]["query"],
        served["source"]["params"]["range"],
        served["source"]["params"]["step"],
    )
    assert s.source_range >= 86_400 + 3_600  # a season plus the level window, else it is only reactive
    assert s.scoring_params == {"horizon": horizon}  # the placed work's life, sent as params.horizon
    band = s.score_normalization  # the margin recipe: 10 published points are 3 points of load
    assert band is not None and (band.min, band.max, band.target_min, band.target_max) == (20, 80, -100, 100)
    assert s.scoring_endpoint == "http://sample-scorers.dynamic-scoring-samples.svc:8002/scoring"
    assert s.scoring_interval == served["scoring"]["params"]["interval"]


@pytest.mark.parametrize(
    ("index", "name", "params", "format_"),
    [
        (0, "gpu_free", {"gpus": 1}, "${scoreName}"),
        (1, "gpu_free_by_gpu", {"per": "gpu"}, "${node}-${device}"),
    ],
)
def test_the_gpu_scorers_resolve_to_the_dcgm_query_and_a_score_for_clusters_without_gpus(
    index: int, name: str, params: dict[str, Any], format_: str
) -> None:
    resolution = resolve(scorer("crs/gpu-free-scorer.yaml", index=index))
    assert not resolution.problems and resolution.summary is not None, resolution
    s = resolution.summary
    served = served_config(gpu.DEFAULTS, "gpu")
    assert served["scoring"]["params"]["name"] == "gpu_free"
    assert s.score_name == name
    assert (s.source_query, s.source_range, s.source_step) == (
        served["source"]["params"]["query"],
        served["source"]["params"]["range"],
        served["source"]["params"]["step"],
    )
    assert s.scoring_interval == served["scoring"]["params"]["interval"]
    assert s.scoring_params == params
    assert s.score_dimension_format == format_
    assert s.missing_data_score == -100  # below a cluster whose GPUs are all busy (0)
    assert s.scoring_endpoint == "http://sample-scorers.dynamic-scoring-samples.svc:8003/scoring"


def test_the_cost_scorer_resolves_to_its_query_and_the_sample_price_table_loads() -> None:
    resolution = resolve(scorer("crs/cost-scorer.yaml"))
    assert not resolution.problems and resolution.summary is not None, resolution
    s = resolution.summary
    args = container_args("cost")
    assert "--prices=/etc/prices/prices.json" in args
    parsed = build_parser("x", cost.DEFAULTS)
    parsed.add_argument("--prices")  # the cost scorer's own option
    config = config_document(parsed.parse_args(args), cost.DEFAULTS.description)
    assert s.score_name == config.name == "cost"
    assert (s.source_query, s.source_range, s.source_step) == (
        config.source.params.query,
        config.source.params.range,
        config.source.params.step,
    )
    assert s.scoring_params == {"room": 0.2, "horizon": 3600}
    assert s.scoring_endpoint == "http://sample-scorers.dynamic-scoring-samples.svc:8004/scoring"
    [configmap] = [d for d in load("crs/sample-scorers.yaml") if d["kind"] == "ConfigMap"]
    table = parse_table(json.loads(configmap["data"]["prices.json"]), "cost-prices")
    assert {"cluster1", "cluster2", "*"} <= set(table.root)
    [deployment] = [d for d in load("crs/sample-scorers.yaml") if d["kind"] == "Deployment"]
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["prices"]["configMap"]["name"] == configmap["metadata"]["name"]


@pytest.mark.parametrize(
    ("path", "index", "name", "params", "window"),
    [
        (
            "crs/power-scorer.yaml",
            0,
            "power_headroom",
            {"capWatts": {"cluster1": 2000, "*": 4000}},
            (300, 30),
        ),
        (
            "crs/power-scorer.yaml",
            1,
            "power_forecast",
            {"capWatts": {"cluster1": 2000, "*": 4000}, "horizon": 3600},
            (90_000, 300),  # a day and an hour: the seasonal forecast's history
        ),
        (
            "crs/latency-scorer.yaml",
            0,
            "user_latency",
            {
                "maxLatencyMs": 200,
                "weights": {"https://eu.users.example.com": 3, "https://us.users.example.com": 1},
            },
            (300, 30),
        ),
    ],
)
def test_the_power_and_latency_scorers_resolve_to_their_queries_and_params(
    path: str, index: int, name: str, params: dict[str, Any], window: tuple[int, int]
) -> None:
    resolution = resolve(scorer(path, index=index))
    assert not resolution.problems and resolution.summary is not None, resolution
    s = resolution.summary
    defaults = power.DEFAULTS if "power" in path else latency.DEFAULTS
    assert s.score_name == name
    assert s.source_query == defaults.query  # the scorer's own query, as /config publishes it
    assert (s.source_range, s.source_step) == window
    assert s.scoring_params == params
    port = 8005 if "power" in path else 8006
    assert s.scoring_endpoint == f"http://sample-scorers.dynamic-scoring-samples.svc:{port}/scoring"


@pytest.mark.parametrize(
    ("path", "container"),
    [
        ("crs/cpu-headroom-scorer.yaml", "cpu"),
        ("crs/cpu-forecast-scorer.yaml", "predict"),
        ("crs/cpu-seasonal-scorer.yaml", "seasonal"),
        ("crs/gpu-free-scorer.yaml", "gpu"),
        ("crs/cost-scorer.yaml", "cost"),
        ("crs/power-scorer.yaml", "power"),
        ("crs/latency-scorer.yaml", "latency"),
    ],
)
def test_config_urls_reach_the_sample_service_ports(path: str, container: str) -> None:
    [service] = [d for d in load("crs/sample-scorers.yaml") if d["kind"] == "Service"]
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    host = f"http://{service['metadata']['name']}.{service['metadata']['namespace']}.svc:{ports[container]}"
    for obj in load(path):
        assert obj["spec"]["configURL"] == f"{host}/config"
    # no --advertise-url: /config names no scoring host, so the agents call the configURL's origin
    # (ours and the upstream Go manager alike; upstream mishandles a scoring.host in /config)
    assert not [a for a in container_args(container) if a.startswith("--advertise-url")]


@pytest.mark.parametrize(
    "path", ["placement/gpu.yaml", "placement/cost.yaml", "placement/ai-ran.yaml", "placement/latency.yaml"]
)
def test_the_use_case_placements_read_scores_a_sample_dynamicscorer_publishes(path: str) -> None:
    published = {
        d["spec"]["scoring"].get("params", {}).get("name")  # Full-mode samples name it in /config
        for f in sorted((SAMPLES / "crs").glob("*.yaml"))
        for d in load(f"crs/{f.name}")
        if d["kind"] == "DynamicScorer"
    }
    [placement] = load(path)
    coordinates = [
        c["scoreCoordinate"]["addOn"] for c in placement["spec"]["prioritizerPolicy"]["configurations"]
    ]
    assert coordinates
    for addon in coordinates:
        assert addon["scoreName"] in published, addon
        # the agent names the AddOnPlacementScore after the score, "_" made "-"
        assert addon["resourceName"] == addon["scoreName"].replace("_", "-"), addon
