"""Scorer parameters, the stated missing-data score, masked pairs and several dimension formats.

Every test runs the agent's real worker against the session's real Prometheus and a real scoring
API process on loopback; what the scorer received is read back from that process.
"""

from __future__ import annotations

import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from dynamic_scoring.agent.memory import MemoryPublisher
from dynamic_scoring.agent.ports import ScoreItem
from dynamic_scoring.agent.supervisor import Supervisor
from e2e.procs import Proc, free_port, wait_until
from tests.component.conftest import GAUGE, PromFixture
from tests.component.harness import ScorerProcess, published, summary

pytestmark = pytest.mark.anyio

NORMALISE = {"min": 0, "max": 2}
NO_SUCH_SERIES = f'{GAUGE}{{namespace="no-such-namespace"}}'


def run_key() -> str:
    return f"run={uuid.uuid4().hex}"


async def test_scoring_params_reach_the_scorer_beside_the_series(
    supervisor: Supervisor, publisher: MemoryPublisher, prometheus: PromFixture, scorer: ScorerProcess
) -> None:
    key = run_key()
    s = summary(
        "cpu_predictor",
        scorer.url(f"/mean/scoring?{key}"),
        sourceType="Prometheus",
        sourceEndpoint=prometheus.query_range_url,
        sourceQuery=GAUGE,
        sourceRange=600,
        sourceStep=60,
        scoreDimensionFormat="${pod}",
        scoringParams={"model": "linear_regression", "horizon": 3600},
    )
    await supervisor.apply([s])
    first = (await published(publisher, "cpu_predictor"))[0]
    assert first.condition.reason == "Scored", first.condition
    mine = [r for r in scorer.requests("/mean/scoring") if r["query"] == key]
    assert mine[0]["params"] == {"model": "linear_regression", "horizon": 3600}
    assert sorted(m["pod"] for m in mine[0]["series"]) == ["db-1", "web-1", "web-2"]  # data unchanged


async def test_no_series_writes_the_missing_data_score_without_calling_the_scorer(
    supervisor: Supervisor, publisher: MemoryPublisher, prometheus: PromFixture, scorer: ScorerProcess
) -> None:
    key = run_key()
    common = {
        "sourceType": "Prometheus",
        "sourceEndpoint": prometheus.query_range_url,
        "sourceQuery": NO_SUCH_SERIES,
        "sourceRange": 600,
        "sourceStep": 60,
        "scoreDimensionFormat": "${node}",
    }
    stated = summary("gpu_free", scorer.url(f"/mean/scoring?{key}"), missingDataScore=-100, **common)
    silent = summary("gpu_silent", scorer.url(f"/mean/scoring?{key}-silent"), **common)
    await supervisor.apply([stated, silent])

    first = (await published(publisher, "gpu_free"))[0]
    assert first.items == [ScoreItem("gpu_free", -100)]  # no labels: the score name is the item
    assert (first.condition.status, first.condition.reason) == ("True", "NoData")
    assert "no series" in first.condition.message and "-100" in first.condition.message
    assert first.valid_until is not None
    assert [r for r in scorer.requests("/mean/scoring") if r["query"] == key] == []

    # Without a stated score the same empty source writes nothing, which Placement reads as 0.
    other = (await published(publisher, "gpu_silent"))[0]
    assert (other.items, other.condition.reason) == ([], "Scored")


async def test_a_masked_pair_writes_its_default_without_querying_or_scoring(
    supervisor: Supervisor, publisher: MemoryPublisher, scorer: ScorerProcess
) -> None:
    key = uuid.uuid4().hex
    s = summary(
        "masked_cpu",
        scorer.url(f"/mean/scoring?run={key}"),
        sourceType="Prometheus",
        sourceEndpoint=scorer.url(f"/prom/{key}/api/v1/query_range"),
        sourceQuery="up",
        sourceRange=600,
        sourceStep=60,
        scoreDimensionFormats=["${cluster}-${scoreName}", "${pod}"],
        masked=True,
        missingDataScore=-50,
    )
    await supervisor.apply([s])
    first = (await published(publisher, "masked_cpu"))[0]
    assert first.items == [ScoreItem("cluster1-masked_cpu", -50), ScoreItem("masked_cpu", -50)]
    assert (first.condition.status, first.condition.reason) == ("True", "Masked")
    assert scorer.requests(f"/prom/{key}") == []
    assert [r for r in scorer.requests("/mean/scoring") if r["query"] == f"run={key}"] == []


async def test_several_formats_yield_one_item_each(
    supervisor: Supervisor, publisher: MemoryPublisher, prometheus: PromFixture, scorer: ScorerProcess
) -> None:
    key = run_key()
    s = summary(
        "cpu_formats",
        scorer.url(f"/mean/scoring?{key}"),
        sourceType="Prometheus",
        sourceEndpoint=prometheus.query_range_url,
        sourceQuery=GAUGE,
        sourceRange=600,
        sourceStep=60,
        scoreDimensionFormats=["${pod}", "${namespace}/${pod}"],
        scoreNormalization=NORMALISE,
    )
    await supervisor.apply([s])
    first = (await published(publisher, "cpu_formats"))[0]
    assert first.items == [
        ScoreItem("db-1", 50),
        ScoreItem("team-a/web-1", 25),
        ScoreItem("team-a/web-2", 75),
        ScoreItem("team-b/db-1", 50),
        ScoreItem("web-1", 25),
        ScoreItem("web-2", 75),
    ]
    assert first.condition.reason == "Scored", first.condition


async def test_a_format_two_results_render_alike_fails_the_cycle_naming_it(
    supervisor: Supervisor, publisher: MemoryPublisher, prometheus: PromFixture, scorer: ScorerProcess
) -> None:
    key = run_key()
    s = summary(
        "cpu_formats_clash",
        scorer.url(f"/mean/scoring?{key}"),
        sourceType="Prometheus",
        sourceEndpoint=prometheus.query_range_url,
        sourceQuery=GAUGE,
        sourceRange=600,
        sourceStep=60,
        scoreDimensionFormats=["${pod}", "${namespace}"],
        scoreNormalization=NORMALISE,
    )
    await supervisor.apply([s])
    first = (await published(publisher, "cpu_formats_clash"))[0]
    # two pods render team-a: neither is that item's value, so nothing is published
    assert first.items is None
    assert (first.condition.status, first.condition.reason) == ("False", "ItemNameCollision")
    message = first.condition.message
    assert '2 results render to item "team-a" under format "${namespace}": they differ in pod=web-' in message
    assert 'change "${namespace}" in scoreDimensionFormats, e.g. to "${namespace}-${pod}"' in message


@pytest.fixture(scope="module")
def predictor(component_dir: Path) -> Iterator[str]:
    """The prediction sample (``-m dynamic_scoring.samples.scorers.predict``): 100 cores, 30 s interval."""
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "dynamic_scoring.samples.scorers.predict",
        "--port",
        str(port),
        "--capacity-cores",
        "100",
    ]
    root = Path(__file__).resolve().parents[2]
    proc = Proc("sample-predict-params", argv, component_dir / "sample-predict-params.log", cwd=root)
    proc.start()
    base = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    try:
        wait_until(healthy, timeout=30, what="the prediction sample's /healthz", proc=proc)
        yield base
    finally:
        proc.stop()


async def test_the_blogs_cpu_predictor_forecasts_at_the_horizon_its_params_name(
    supervisor: Supervisor, publisher: MemoryPublisher, scorer: ScorerProcess, predictor: str
) -> None:
    # The test scorer's fake Prometheus answers one series, 2 then 4 cores a minute apart: a slope of
    # 1/30 core per second.  Forecast at horizon h: 4 + h/30 cores; score 100 * (1 - load / 100).
    key = uuid.uuid4().hex
    common = {
        "sourceType": "Prometheus",
        "sourceEndpoint": scorer.url(f"/prom/{key}/api/v1/query_range"),
        "sourceQuery": "load",
        "sourceRange": 600,
        "sourceStep": 60,
        "scoreDimensionFormat": "${pod}",
    }
    blog = summary(
        "cpu_predictor",
        f"{predictor}/scoring",
        scoringParams={"model": "linear_regression", "horizon": 600},
        **common,
    )
    plain = summary("cpu_predictor_default", f"{predictor}/scoring", **common)
    wrong = summary("cpu_predictor_lstm", f"{predictor}/scoring", scoringParams={"model": "lstm"}, **common)
    await supervisor.apply([blog, plain, wrong])

    first = (await published(publisher, "cpu_predictor"))[0]
    assert first.items == [ScoreItem("from-fake-source", 76)], first.condition  # 4 + 600/30 = 24 cores
    other = (await published(publisher, "cpu_predictor_default"))[0]
    assert other.items == [ScoreItem("from-fake-source", 95)], other.condition  # one interval: 5 cores
    refused = (await published(publisher, "cpu_predictor_lstm"))[0]
    assert refused.items is None and refused.condition.status == "False"
    # The status only: a scorer's answer body never reaches the hub (its text is the scorer's, not ours)
    assert "HTTP 400" in refused.condition.message and "params.model" not in refused.condition.message


async def test_no_series_with_a_failed_source_names_the_failed_source(
    supervisor: Supervisor, publisher: MemoryPublisher, prometheus: PromFixture, scorer: ScorerProcess
) -> None:
    closed = f"http://127.0.0.1:{free_port()}/api/v1/query_range"
    s = summary(
        "gpu_partial",
        scorer.url(f"/mean/scoring?{run_key()}"),
        sources=[
            {
                "name": "empty",
                "endpoint": prometheus.query_range_url,
                "queries": [NO_SUCH_SERIES],
                "range": 600,
                "step": 60,
            },
            {"name": "down", "endpoint": closed, "queries": ["up"], "range": 600, "step": 60},
        ],
        onSourceError="ScoreWithAvailable",
        missingDataScore=-100,
    )
    await supervisor.apply([s])
    first = (await published(publisher, "gpu_partial"))[0]
    assert first.items == [ScoreItem("gpu_partial", -100)], first.condition
    assert first.condition.reason == "NoData"
    assert "failed: down" in first.condition.message
