"""Alert rules pass promtool (syntax and their own unit tests); dashboard and rules use real metric names."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.samples.agent_names import agent_metric_names

MONITORING = Path(__file__).resolve().parents[3] / "samples" / "monitoring"
# The agent's metric names all start with dynamic_.
OURS = re.compile(r"\bdynamic_[a-zA-Z0-9_:]*")


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    assert binary, "promtool is not installed (Debian package 'prometheus')"
    return subprocess.run([binary, *args], cwd=MONITORING, capture_output=True, text=True, timeout=120)


def test_promtool_check_rules() -> None:
    result = promtool("check", "rules", "alert-rules.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 4 rules found" in result.stdout


def test_promtool_test_rules() -> None:
    result = promtool("test", "rules", "alert-rules.test.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_rejects_a_broken_rule(tmp_path: Path) -> None:
    # The check above can fail: a rule naming a label that is not a valid identifier is refused.
    bad = tmp_path / "bad.yaml"
    bad.write_text("groups: [{name: g, rules: [{alert: A, expr: 'sum by (1) (x)'}]}]\n")
    assert promtool("check", "rules", str(bad)).returncode != 0


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((MONITORING / "grafana-dashboard.json").read_text())
    return data


def dashboard_exprs() -> Iterator[str]:
    for panel in dashboard()["panels"]:
        for target in panel["targets"]:
            yield target["expr"]
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            yield variable["definition"]


def rule_exprs() -> Iterator[str]:
    for group in yaml.safe_load((MONITORING / "alert-rules.yaml").read_text())["groups"]:
        for rule in group["rules"]:
            yield rule["expr"]


def test_dashboard_covers_scores_freshness_and_latency() -> None:
    titles = " ".join(p["title"] for p in dashboard()["panels"]).lower()
    for topic in ("scores", "expires", "last success", "latency"):
        assert topic in titles
    assert all(p["targets"] for p in dashboard()["panels"])


@pytest.mark.parametrize("source", ["dashboard", "rules"])
def test_every_expression_names_metrics_the_agent_exports(source: str) -> None:
    exported = agent_metric_names()
    exprs = list(dashboard_exprs() if source == "dashboard" else rule_exprs())
    assert exprs
    for expr in exprs:
        names = set(OURS.findall(expr))
        assert names, f"{expr!r} names no agent metric"
        missing = names - exported
        assert not missing, f"{expr!r} names {sorted(missing)}, which the agent does not export"


def test_the_check_itself_catches_a_misspelt_metric() -> None:
    assert "dynamic_scoring_score_expires_seconds" not in agent_metric_names()
    assert "dynamic_scoring_score_expires_in_seconds" in agent_metric_names()
    assert "dynamic_scoring_stage_duration_seconds_bucket" in agent_metric_names()
