from __future__ import annotations

from dynamic_scoring.agent.metrics import AgentMetrics, truncate_label
from dynamic_scoring.contract.wire import ScoreResult


def lines(m: AgentMetrics, needle: str) -> list[str]:
    return [
        line for line in m.exposition().decode().splitlines() if needle in line and not line.startswith("#")
    ]


def test_label_values_are_cut_by_characters() -> None:
    value = "é" * 300
    assert truncate_label(value) == "é" * 256
    m = AgentMetrics(process_collectors=False)
    m.set_scores("c" * 300, "s", [ScoreResult(metric={"pod": value, "other": "x"}, score=1)])
    labels = {"ds_cluster": "c" * 300, "ds_node": "", "ds_device": "", "ds_namespace": "", "ds_app": "",
              "ds_pod": "é" * 256, "ds_container": "", "ds_meta": "", "ds_score_name": "s"}  # fmt: skip
    assert m.registry.get_sample_value("dynamic_score", labels) == 1


def test_vanished_tuples_are_removed_after_success_and_last_duplicate_wins() -> None:
    m = AgentMetrics(process_collectors=False)
    m.set_scores(
        "c", "s", [ScoreResult(metric={"pod": "a"}, score=1), ScoreResult(metric={"pod": "b"}, score=2)]
    )
    m.set_scores("c", "t", [ScoreResult(metric={"pod": "a"}, score=9)])
    m.set_scores(
        "c", "s", [ScoreResult(metric={"pod": "b"}, score=3), ScoreResult(metric={"pod": "b"}, score=4)]
    )
    got = lines(m, "dynamic_score{")
    assert len(got) == 2
    assert any('ds_pod="b"' in line and 'ds_score_name="s"' in line and line.endswith(" 4.0") for line in got)
    assert any('ds_score_name="t"' in line for line in got)


def test_upstream_names_and_no_created_series() -> None:
    m = AgentMetrics()
    m.count_cycle("s", success=True)
    m.add_stage_seconds("s", "fetch", 0.5, success=True)
    m.add_stage_seconds("s", "score", 0.25, success=False)
    text = m.exposition().decode()
    assert 'dynamic_scoring_requests_total{score_name="s",status="success"} 1.0' in text
    assert 'dynamic_scoring_fetch_seconds_total{score_name="s"} 0.5' in text
    assert "dynamic_scoring_perform_seconds_total{" not in text  # failed stages do not count there
    assert 'dynamic_scoring_stage_duration_seconds_count{score_name="s",stage="score"} 1.0' in text
    assert "_created" not in text
    assert "process_resident_memory_bytes" in text


def test_forget_removes_every_series_of_a_score_name() -> None:
    m = AgentMetrics(process_collectors=False, clock=lambda: 100.0)
    for name in ("gone", "kept"):
        m.set_scores("c", name, [ScoreResult(metric={"pod": "a"}, score=1)])
        m.count_cycle(name, success=False)
        m.count_failure(name, "fetch", "PrometheusTimeout")
        m.count_retry(name, "fetch")
        m.count_items(name, rejected=1, clamped=1)
        m.add_stage_seconds(name, "write", 0.1, success=True)
        m.set_freshness(name, 50.0, 130.0)
    assert (
        lines(m, 'score_name="kept"')[-1]
        == 'dynamic_scoring_score_expires_in_seconds{score_name="kept"} 30.0'
    )
    m.forget("gone")
    assert lines(m, '"gone"') == []
    assert len(lines(m, '"kept"')) > 10
