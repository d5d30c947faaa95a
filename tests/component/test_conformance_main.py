"""``python -m dynamic_scoring.scorer.conformance URL``: the check for a base install, as a process."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from dynamic_scoring.scorer import ScorerApp, ScoreResult, ScoringRequest, result
from e2e.procs import free_port
from tests.component.harness import serving


def one_per_cluster(request: ScoringRequest) -> list[ScoreResult]:
    return [result(50)] if request.series else []


@pytest.fixture
def url() -> Iterator[str]:
    with serving(ScorerApp(one_per_cluster, name="x", query="up")) as base:
        yield base


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dynamic_scoring.scorer.conformance", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_it_prints_the_report_and_exits_by_the_verdict(url: str) -> None:
    done = run(url, "--no-large")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"scorer {url}\nchecks: healthz, config, token, scoring:empty")
    assert done.stdout.rstrip().endswith("conforms: 0 error(s), 0 warning(s)")


def test_bad_arguments_and_nothing_listening_are_said(url: str) -> None:
    wrong = run(url + "/config")
    assert wrong.returncode == 2 and f"give {url}" in wrong.stderr
    nobody = run(f"http://127.0.0.1:{free_port()}")
    assert nobody.returncode == 3 and "is the scorer running" in nobody.stderr
    assert run().returncode == 2  # argparse: the URL is required
