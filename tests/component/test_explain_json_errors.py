"""``explain -o json`` ends with one JSON document, whatever went wrong (a real scorer on loopback)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner, Result

from dynamic_scoring.ctl.main import main
from dynamic_scoring.outbound.addresses import AGENT_ALLOW_CIDRS_ENV
from tests.component.harness import ScorerProcess
from tests.component.test_explain import scorer_file, unreachable_hub_kubeconfig


def explain(tmp_path: Path, base: str, *extra: str) -> Result:
    spec = {
        "scoring": {"host": base, "path": "/static/scoring"},
        "scoreDimensionFormat": "${scoreName}-${app}-${device}",  # the static answer's items apart
    }
    path = scorer_file(tmp_path, spec)
    env = {"KUBECONFIG": str(tmp_path / "no-kubeconfig"), AGENT_ALLOW_CIDRS_ENV: "127.0.0.0/8"}
    args = ["explain", "cpu", "--cluster", "cluster1", "--file", str(path), "-o", "json", *extra]
    return CliRunner().invoke(main, args, env=env)


def test_an_unreachable_hub_gives_the_cycle_document_alone_with_its_hub_error(
    scorer: ScorerProcess, tmp_path: Path
) -> None:
    kubeconfig = unreachable_hub_kubeconfig(tmp_path)
    result = explain(tmp_path, scorer.base, "--kubeconfig", str(kubeconfig))
    assert result.exit_code == 3, result.output
    assert result.stderr == ""
    document = json.loads(result.stdout)  # one document: the cycle, not the cycle then an error
    assert "error" not in document
    assert document["hubError"].startswith("could not read AddOnPlacementScore cluster1/cpu")


def test_a_missing_kubeconfig_given_is_a_json_usage_error(scorer: ScorerProcess, tmp_path: Path) -> None:
    result = explain(tmp_path, scorer.base, "--kubeconfig", str(tmp_path / "nope"))
    assert result.exit_code == 2 and result.stderr == ""
    error = json.loads(result.stdout)["error"]
    assert (error["kind"], error["code"]) == ("usage", 2) and "does not exist" in error["message"]
