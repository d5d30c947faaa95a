"""``scorer validate`` and ``check_app`` send the ``params`` the agent would, over real HTTP on loopback.

The scorer is the pattern the scorer guide teaches: it needs a parameter and refuses a request without
it with ``RequestError`` (HTTP 400).  Without the parameter every scoring check fails and the fix says
to give it; with it (``--param``, a DynamicScorer file, ``params=``, or published in ``/config``) the
scorer conforms.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dynamic_scoring.ctl.main import main
from dynamic_scoring.scorer import RequestError, ScorerApp, ScoreResult, ScoringRequest, result
from dynamic_scoring.scorer.testing import check_app
from tests.component.harness import serving

POD_FORMAT = "${scoreName}-${pod}"
SCORER = """\
apiVersion: dynamic-scoring.open-cluster-management.io/v1alpha1
kind: DynamicScorer
metadata: {{name: horizon}}
spec:
  configSyncMode: {mode}
  scoring: {{host: 'http://127.0.0.1:1', params: {{name: horizon{extra}}}}}
  source: {{host: 'http://127.0.0.1:2', params: {{query: up}}}}
"""


def needs_horizon(request: ScoringRequest) -> list[ScoreResult]:
    horizon = request.params.get("horizon")
    if not isinstance(horizon, int):
        raise RequestError("params.horizon: give the forecast horizon in seconds")
    return [result(50, pod=s.label("pod")) for s in request.series]


def app(**published: Any) -> ScorerApp:
    return ScorerApp(needs_horizon, name="horizon", query="up", params=published)


@pytest.fixture
def url() -> Iterator[str]:
    with serving(app()) as base:
        yield base


def validate(*args: str) -> tuple[int, str]:
    done = CliRunner().invoke(
        main, ["scorer", "validate", *args, "--no-large", "--dimension-format", POD_FORMAT]
    )
    return done.exit_code, done.output


def test_without_its_parameter_every_scoring_check_fails_and_the_fix_names_params() -> None:
    report = check_app(app(), large=False, dimension_format=POD_FORMAT)
    assert not report.ok and report.params is None
    fixes = {f.fix for f in report.errors}
    (fix,) = fixes
    assert fix.startswith("the scorer refused the request's params (none were sent)")
    assert "--param KEY=JSON" in fix and "--params-from FILE" in fix


def test_check_app_sends_the_params_it_is_given() -> None:
    report = check_app(app(), large=True, dimension_format=POD_FORMAT, params={"horizon": 3600})
    assert report.ok, report.text()
    assert report.params == {"horizon": 3600}
    assert [lat.input for lat in report.latency] == ["empty", "small", "non-finite", "large"]


def test_what_config_publishes_is_sent_as_a_full_mode_hub_sends_it() -> None:
    report = check_app(app(horizon=7200), large=False, dimension_format=POD_FORMAT)
    assert report.ok and report.params == {"horizon": 7200}
    # and it wins over the spec's key, key by key, as the hub merges them
    both = check_app(
        app(horizon=7200), large=False, dimension_format=POD_FORMAT, params={"horizon": 1, "x": 1}
    )
    assert both.params == {"horizon": 7200, "x": 1}


def test_validate_sends_param_options_and_a_dynamicscorers_params(url: str, tmp_path: Path) -> None:
    code, output = validate(url)
    assert code == 1 and "the scorer refused the request's params (none were sent)" in output
    code, output = validate(url, "--param", "horizon=3600")
    assert code == 0, output
    assert 'params sent: {"horizon": 3600}' in output
    code, output = validate(url, "--param", "horizon=soon")  # a bare word is a string: refused
    assert code == 1 and "(sent: horizon)" in output
    scorer = tmp_path / "scorer.yaml"
    scorer.write_text(SCORER.format(mode="None", extra=", horizon: 3600"))
    code, output = validate(url, "--params-from", str(scorer), "-o", "json")
    assert code == 0 and json.loads(output)["params"] == {"horizon": 3600}


def test_a_none_mode_scorer_does_not_get_what_config_publishes(tmp_path: Path) -> None:
    with serving(app(horizon=7200)) as base:
        full, none = tmp_path / "full.yaml", tmp_path / "none.yaml"
        full.write_text(SCORER.format(mode="Full", extra=""))
        none.write_text(SCORER.format(mode="None", extra=""))
        assert validate(base, "--params-from", str(full))[0] == 0
        code, output = validate(base, "--params-from", str(none))
        assert code == 1 and "(none were sent)" in output


def test_bad_arguments_say_what_to_give(url: str, tmp_path: Path) -> None:
    code, output = validate(url + "/config")
    assert code == 2 and f"is the /config endpoint, not the scorer's base URL: give {url}" in output
    code, output = validate(url + "/scoring/")
    assert code == 2 and f"give {url}" in output
    code, output = validate(url, "--param", "name=x")
    assert code == 2 and "params name: the agent reads these and never sends them" in output
    code, output = validate(url, "--param", "horizon")
    assert code == 2 and "expected KEY=JSON" in output
    two = tmp_path / "two.yaml"
    two.write_text(SCORER.format(mode="None", extra="") + "---\n" + SCORER.format(mode="None", extra=""))
    code, output = validate(url, "--params-from", str(two))
    assert code == 2 and "holds 2 DynamicScorers" in output
