"""``dynamic-scoring scorer validate`` against real scorers on loopback: the samples pass, broken ones don't.

The samples run as processes (``python -m dynamic_scoring.samples.scorers.<name>``), as users run
them.  Each broken scorer is a real stdlib HTTP server in this process that gets one thing wrong; its
test asserts the finding that names it, and a well-behaved server of the same kind yields none (so the
tests can fail).
"""

from __future__ import annotations

import json
import math
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dynamic_scoring.ctl.main import main
from dynamic_scoring.scorer.conformance import (
    BODY_EXCERPT_CHARS,
    MAX_LISTED_RESULTS,
    Checker,
    Finding,
    Report,
)
from e2e.procs import Proc, free_port, wait_until
from tests.component.harness import ScorerPKI

ROOT = Path(__file__).resolve().parents[2]

GOOD_CONFIG: dict[str, Any] = {
    "name": "broken",
    "description": "",
    "source": {
        "type": "Prometheus",
        "host": "",
        "path": "/api/v1/query_range",
        "params": {"query": "up", "range": 300, "step": 15},
    },
    "scoring": {"host": "", "path": "/scoring", "params": {"name": "broken", "interval": 30}},
}

Answer = tuple[int, bytes]


def per_series(data: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"metric": s["metric"], "score": 50.0} for s in data]


def answer(results: list[dict[str, Any]]) -> Answer:
    return 200, json.dumps({"results": results}).encode()


@dataclass
class Behaviour:
    """What the fake scorer does; the defaults are a scorer that conforms."""

    healthz: int = 200
    max_body: int | None = None  # larger scoring requests get a 500 (read, not decoded)
    config: bytes = json.dumps(GOOD_CONFIG).encode()
    score: Callable[[list[dict[str, Any]], str | None], Answer] = field(
        default=lambda data, auth: answer(per_series(data))
    )


class FakeScorer:
    """A real HTTP server on 127.0.0.1 answering as ``behaviour`` says."""

    def __init__(self, behaviour: Behaviour, tls: ssl.SSLContext | None = None) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path == "/healthz":
                    self._send(behaviour.healthz, b"ok")
                elif self.path == "/config":
                    self._send(200, behaviour.config)
                else:
                    self._send(404, b"")

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if behaviour.max_body is not None and len(body) > behaviour.max_body:
                    self._send(500, b"out of memory")
                    return
                data = json.loads(body)["data"]
                self._send(*behaviour.score(data, self.headers.get("Authorization")))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        scheme = "https" if tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeScorer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


POD_FORMAT = "${scoreName}-${pod}"
"""The fakes answer one result per series; the inputs' series differ by pod."""


def run(behaviour: Behaviour, **options: Any) -> Report:
    options = {"large": False, "repeats": 1, "timeout": 5.0, "dimension_format": POD_FORMAT, **options}
    with FakeScorer(behaviour) as fake:
        return Checker(fake.url, **options).run()


def findings(report: Report) -> list[tuple[str, str, str]]:
    return [(f.check, f.severity, f.seen) for f in report.findings]


def test_a_conforming_fake_has_no_findings() -> None:
    report = run(Behaviour())
    assert report.findings == [] and report.ok
    assert [lat.input for lat in report.latency] == ["empty", "small", "non-finite"]


def slow(data: list[dict[str, Any]], auth: str | None) -> Answer:
    # 30 s against the check's 0.5 s: the client would need 29.5 s of scheduling delay to see the
    # answer before its timeout (a daemon thread of the fake, it never holds the test up)
    if data:
        time.sleep(30)
    return answer(per_series(data))


def rejects_non_finite(data: list[dict[str, Any]]) -> Answer:
    # Like a scorer that calls float() and then chokes on the NaN Prometheus sent.
    values = [float(v) for s in data for _, v in s["values"]]
    if not all(math.isfinite(v) for v in values):
        return 500, b"ValueError: math domain error"
    return answer(per_series(data))


def needs_token(data: list[dict[str, Any]], auth: str | None) -> Answer:
    return (401, b"") if auth != "Bearer tok" else answer(per_series(data))


BROKEN: dict[str, tuple[Behaviour, dict[str, Any], tuple[str, str, str]]] = {
    "healthz 503": (Behaviour(healthz=503), {}, ("healthz", "error", "GET /healthz answered HTTP 503: ok")),
    "config types": (
        Behaviour(
            config=json.dumps({**GOOD_CONFIG, "scoring": {"params": {"name": 7, "interval": "30"}}}).encode()
        ),
        {},
        ("config", "error", "/config scoring.params.name: Input should be a valid string"),
    ),
    "config not json": (
        Behaviour(config=b"<html>"),
        {},
        ("config", "error", "GET /config: the body is not JSON"),
    ),
    "config no score name": (
        Behaviour(config=json.dumps({**GOOD_CONFIG, "scoring": {"path": "/scoring"}}).encode()),
        {},
        ("config", "error", "scoring.params.name is empty"),
    ),
    "nan score": (
        Behaviour(score=lambda d, a: (200, b'{"results": [{"metric": {"pod": "p"}, "score": NaN}]}')),
        {},
        ("scoring:empty", "error", "empty input (0 series): results[0] {pod=p} score is nan"),
    ),
    "non-json": (
        Behaviour(score=lambda d, a: (200, b"<html>oops</html>")),
        {},
        ("scoring:empty", "error", "empty input (0 series): the answer is not JSON"),
    ),
    "label object": (
        Behaviour(score=lambda d, a: answer([{"metric": {"pod": {"name": "p"}}, "score": 1}])),
        {},
        (
            "scoring:empty",
            "error",
            'empty input (0 series): results[0] {pod={"name": "p"}} metric.pod is a dict',
        ),
    ),
    "label numbers": (
        Behaviour(score=lambda d, a: answer([{"metric": {"pod": i}, "score": 1} for i in range(len(d))])),
        {},
        ("scoring:small", "warning", "small input (3 series): label(s) pod are not strings"),
    ),
    "no dimension labels": (
        Behaviour(score=lambda d, a: answer([{"metric": {"job": "x"}, "score": 1} for _ in d])),
        {},
        (
            "scoring:small",
            "warning",
            "small input (3 series): 3 results with the same dimension labels "
            "(node, namespace, pod, container, device, app, meta)",
        ),
    ),
    "scores too large for one AddOnPlacementScore": (
        # 6,000 items of 240-character names: about 1.6 MB, over the agent's default 1,420,000 bytes
        Behaviour(
            score=lambda d, a: answer(
                [{"metric": {"pod": f"{i:05d}" + "p" * 235}, "score": 1} for i in range(6000)]
            )
        ),
        {},
        (
            "scoring:empty",
            "error",
            "empty input (0 series): 6000 results, about 1590001 bytes as an AddOnPlacementScore",
        ),
    ),
    "non-finite input": (
        Behaviour(score=lambda d, a: rejects_non_finite(d)),
        {},
        (
            "scoring:non-finite",
            "error",
            "POST /scoring with non-finite input (3 series) answered HTTP 500: ValueError: math domain error",
        ),
    ),
    "slow": (
        Behaviour(score=slow),
        {"timeout": 0.5},
        ("scoring:small", "error", "POST /scoring with small input (3 series): no answer within 0.5s"),
    ),
    "ignores the token": (
        Behaviour(),
        {"token": "tok"},
        ("token", "error", "POST /scoring without a token answered 200"),
    ),
    "needs a token not given": (
        Behaviour(score=needs_token),
        {},
        ("token", "error", "POST /scoring without a token answered HTTP 401"),
    ),
    "500 on large input": (
        Behaviour(max_body=1 << 20),
        {"large": True},
        (
            "scoring:large",
            "error",
            "POST /scoring with large input (10000 series) answered HTTP 500: out of memory",
        ),
    ),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_each_broken_scorer_gets_its_finding(case: str) -> None:
    behaviour, options, expected = BROKEN[case]
    report = run(behaviour, **options)
    assert expected in findings(report), findings(report)
    assert report.ok == (expected[1] == "warning")
    assert all(f.fix for f in report.findings)


def by_check(report: Report, check: str) -> list[Finding]:
    return [f for f in report.findings if f.check == check]


def test_every_bad_result_of_an_answer_is_listed_with_its_index_and_labels() -> None:
    def mixed(data: list[dict[str, Any]], auth: str | None) -> Answer:
        body = (
            '{"results": [{"metric": {"pod": "a"}, "score": 1}, {"metric": {"pod": "b"}, "score": NaN},'
            ' {"metric": {"pod": "c"}, "score": 2}, {"metric": {"pod": "d"}, "score": "7"},'
            ' {"metric": {"pod": "e", "node": ["n"]}, "score": 3}, 5]}'
        )
        return 200, body.encode()

    errors = [(f.index, f.labels, f.seen) for f in by_check(run(Behaviour(score=mixed)), "scoring:empty")]
    size = "empty input (0 series)"
    assert errors == [
        (1, {"pod": "b"}, f"{size}: results[1] {{pod=b}} score is nan"),
        (3, {"pod": "d"}, f"{size}: results[3] {{pod=d}} score is a str"),
        (4, {"pod": "e", "node": '["n"]'}, f'{size}: results[4] {{pod=e, node=["n"]}} metric.node is a list'),
        (5, None, f"{size}: results[5] is a JSON int, not an object"),
    ]


def test_bad_results_past_the_limit_are_counted_in_one_finding() -> None:
    def all_nan(data: list[dict[str, Any]], auth: str | None) -> Answer:
        rows = ", ".join(
            f'{{"metric": {{"pod": "p{i}"}}, "score": NaN}}' for i in range(MAX_LISTED_RESULTS + 7)
        )
        return 200, f'{{"results": [{rows}]}}'.encode()

    found = by_check(run(Behaviour(score=all_nan)), "scoring:empty")
    assert [f.index for f in found] == [*range(MAX_LISTED_RESULTS), None]
    assert found[-1].seen == "empty input (0 series): 7 more problem(s) in 7 more result(s)"


@pytest.mark.parametrize(
    ("status", "hint"),
    [
        (404, "nothing answers POST /scoring: check the base URL and the path (--scoring-path"),
        (405, "the scorer does not take POST at /scoring"),
        (500, "the scorer failed on its own: see its logs for the error behind HTTP 500; an empty data list"),
        (503, "the scorer failed on its own: see its logs for the error behind HTTP 503"),
        (401, "the scorer refused the credentials: give the token the agent sends (--token-file)"),
        (400, "the scorer refused a well-formed request"),
    ],
)
def test_a_failing_answer_shows_its_status_a_bounded_body_and_a_hint_for_that_status(
    status: int, hint: str
) -> None:
    body = "Traceback: boom tok-secret " + "x" * 300  # the token echoed back is not shown
    report = run(
        Behaviour(score=lambda d, a: (status, body.encode()) if a == "Bearer tok-secret" else (401, b"")),
        token="tok-secret",
    )
    (finding,) = by_check(report, "scoring:empty")
    prefix = f"POST /scoring with empty input (0 series) answered HTTP {status}: Traceback: boom *** x"
    assert finding.seen.startswith(prefix) and finding.seen.endswith("x…")
    assert len(finding.seen) == len(prefix) - len("Traceback: boom *** x") + BODY_EXCERPT_CHARS + 1
    assert "tok-secret" not in finding.seen
    assert finding.fix.startswith(hint)
    if status in (401, 404, 405):  # not the NaN/Inf hint it used to be for every status
        assert "NaN" not in finding.fix


def test_a_500_on_the_non_finite_input_names_prometheus_non_finite_strings() -> None:
    (finding,) = by_check(run(Behaviour(score=lambda d, a: rejects_non_finite(d))), "scoring:non-finite")
    assert "see its logs" in finding.fix and '"NaN", "+Inf", "-Inf" strings' in finding.fix


def test_results_one_item_name_would_merge_get_a_warning_naming_the_ignored_labels() -> None:
    report = run(Behaviour(), dimension_format=None)
    assert report.ok
    (warning,) = report.warnings
    assert warning.seen == (
        "small input (3 series): results with different labels render to 1 item name(s) under "
        "scoreDimensionFormat '${scoreName}' (the default); it ignores node, namespace, pod"
    )
    assert 'scoreDimensionFormat: "${scoreName}-${node}"' in warning.fix
    # a format that names a label the results differ in: no warning; one that does not: warned again
    assert run(Behaviour(), dimension_format="${scoreName}-${node}").warnings == []
    (still,) = run(Behaviour(), dimension_format="${container}").warnings
    assert "under scoreDimensionFormat '${container}'; it ignores node, namespace, pod" in still.seen


def test_a_label_mapping_is_checked_as_the_agent_applies_it() -> None:
    # ${container} reads the pod label, in which the results differ: their names are apart.
    assert (
        run(Behaviour(), dimension_format="${container}", dimension_labels={"container": "pod"}).warnings
        == []
    )
    bad = CliRunner().invoke(
        main, ["scorer", "validate", "http://127.0.0.1:9", "--dimension-label", "host=x"]
    )
    assert bad.exit_code == 2 and "'host' is not a label placeholder" in bad.output
    shape = CliRunner().invoke(
        main, ["scorer", "validate", "http://127.0.0.1:9", "--dimension-label", "node"]
    )
    assert shape.exit_code == 2 and "expected PLACEHOLDER=LABEL" in shape.output


def test_the_format_published_in_config_is_the_one_checked() -> None:
    params = {"name": "broken", "interval": 30, "scoreDimensionFormat": "${scoreName}-${pod}"}
    config = json.dumps({**GOOD_CONFIG, "scoring": {"path": "/scoring", "params": params}}).encode()
    assert run(Behaviour(config=config), dimension_format=None).findings == []
    params["scoreDimensionFormat"] = "${scoreName}"
    config = json.dumps({**GOOD_CONFIG, "scoring": {"path": "/scoring", "params": params}}).encode()
    (warning,) = run(Behaviour(config=config), dimension_format=None).warnings
    assert "'${scoreName}' (published in /config)" in warning.seen


def test_validate_shows_warnings_and_every_bad_result_in_text_and_json() -> None:
    def two_nan(data: list[dict[str, Any]], auth: str | None) -> Answer:
        if not data:
            return answer([])
        return (
            200,
            b'{"results": [{"metric": {"pod": "a"}, "score": NaN}, {"metric": {"pod": "b"}, "score": NaN}]}',
        )

    runner = CliRunner()
    with FakeScorer(Behaviour()) as fake:
        text = runner.invoke(main, ["scorer", "validate", fake.url, "--no-large"])
        assert text.exit_code == 0, text.output  # a warning is not a failure
        assert "WARNING [scoring:small] small input (3 series): results with different labels" in text.output
        assert "conforms: 0 error(s), 1 warning(s)" in text.output
        doc = json.loads(
            runner.invoke(main, ["scorer", "validate", fake.url, "--no-large", "-o", "json"]).stdout
        )
        assert doc["ok"] and [f["severity"] for f in doc["findings"]] == ["warning"]
        named = runner.invoke(
            main, ["scorer", "validate", fake.url, "--no-large", "--dimension-format", "${scoreName}-${pod}"]
        )
        assert named.exit_code == 0 and "conforms: 0 error(s), 0 warning(s)" in named.output
    with FakeScorer(Behaviour(score=two_nan)) as fake:
        bad = runner.invoke(main, ["scorer", "validate", fake.url, "--no-large", "-o", "json"])
        assert bad.exit_code == 1
        found = json.loads(bad.stdout)["findings"]
        assert [(f["check"], f["index"], f["labels"]) for f in found if f["severity"] == "error"] == [
            ("scoring:small", 0, {"pod": "a"}),
            ("scoring:small", 1, {"pod": "b"}),
            ("scoring:non-finite", 0, {"pod": "a"}),
            ("scoring:non-finite", 1, {"pod": "b"}),
        ]


def test_a_token_the_scorer_checks_passes() -> None:
    assert run(Behaviour(score=needs_token), token="tok").findings == []


# -- the samples, as processes, through the CLI ------------------------------------------------------


@pytest.fixture(scope="module")
def samples(component_dir: Path) -> Iterator[dict[str, str]]:
    (component_dir / "validate-token").write_text("sample-token\n")
    procs: dict[str, tuple[Proc, int]] = {}
    for module, extra in (("cpu", []), ("predict", ["--token-file", str(component_dir / "validate-token")])):
        port = free_port()
        argv = [
            sys.executable,
            "-m",
            f"dynamic_scoring.samples.scorers.{module}",
            "--port",
            str(port),
            *extra,
        ]
        procs[module] = (
            Proc(f"validate-{module}", argv, component_dir / f"validate-{module}.log", cwd=ROOT),
            port,
        )
    try:
        for proc, port in procs.values():
            proc.start()
            wait_until(lambda p=port: _healthy(p), timeout=30, what="/healthz", proc=proc)  # type: ignore[misc]
        yield {m: f"http://127.0.0.1:{port}" for m, (_, port) in procs.items()}
    finally:
        for proc, _ in procs.values():
            proc.stop()


def _healthy(port: int) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def test_validate_passes_the_cpu_sample_with_the_large_input(samples: dict[str, str]) -> None:
    result = CliRunner().invoke(main, ["scorer", "validate", samples["cpu"], "-o", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["ok"] and report["config"]["name"] == "cpu_headroom"
    # 10,000 per-series results fit in one AddOnPlacementScore (they were over the old 4,096 count).
    # The sample passes each series' labels through: validate's per-pod inputs get one item name
    # under the default format, which is said (its real query gives one series per cluster).
    (warning,) = report["findings"]
    assert warning["severity"] == "warning" and "'${scoreName}' (the default)" in warning["seen"]
    sizes = {lat["input"]: lat for lat in report["latency"]}
    assert sizes["large"]["series"] == 10_000 and sizes["small"]["requests"] == 5
    assert all(lat["p50"] <= lat["max"] for lat in report["latency"])


def test_validate_checks_the_predict_samples_token(samples: dict[str, str], component_dir: Path) -> None:
    token = component_dir / "validate-token"
    ok = CliRunner().invoke(
        main,
        [
            *("scorer", "validate", samples["predict"], "--token-file", str(token), "--no-large"),
            *("--dimension-format", POD_FORMAT),
        ],
    )
    assert ok.exit_code == 0, ok.output
    assert "conforms: 0 error(s), 0 warning(s)" in ok.output and "latency (seconds):" in ok.output
    assert "sample-token" not in ok.output
    without = CliRunner().invoke(main, ["scorer", "validate", samples["predict"], "--no-large"])
    assert without.exit_code == 1
    assert "ERROR   [token] POST /scoring without a token answered HTTP 401" in without.output
    assert "fix: pass the token the agent will send (--token-file)" in without.output
    assert "[scoring:" not in without.output  # refused: the scoring checks are skipped, not failed one by one


def test_validate_exit_codes_for_arguments_and_an_unreachable_scorer(tmp_path: Path) -> None:
    runner = CliRunner()
    unreachable = runner.invoke(main, ["scorer", "validate", f"http://127.0.0.1:{free_port()}"])
    assert unreachable.exit_code == 3 and "Connection refused" in unreachable.output
    assert runner.invoke(main, ["scorer", "validate", "ftp://x"]).exit_code == 2
    (tmp_path / "empty").write_text("\n")
    empty = runner.invoke(
        main, ["scorer", "validate", "http://127.0.0.1:1", "--token-file", str(tmp_path / "empty")]
    )
    assert empty.exit_code == 2 and "empty" in empty.output
    assert runner.invoke(main, ["scorer", "validate"]).exit_code == 2
    assert runner.invoke(main, ["scorer", "validate", "http://x", "-o", "yaml"]).exit_code == 2


def test_an_https_scorer_is_verified_against_the_given_ca_only(pki: ScorerPKI) -> None:
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(pki.server.cert_path, pki.server.key_path)
    runner = CliRunner()
    with FakeScorer(Behaviour(), tls) as fake:
        untrusted = runner.invoke(main, ["scorer", "validate", fake.url, "--no-large"])
        assert untrusted.exit_code == 3 and "CERTIFICATE_VERIFY_FAILED" in untrusted.output
        stranger = runner.invoke(
            main, ["scorer", "validate", fake.url, "--no-large", "--ca-file", str(pki.stranger.cert_path)]
        )
        assert stranger.exit_code == 3
        trusted = runner.invoke(
            main,
            [
                *("scorer", "validate", fake.url, "--no-large", "--ca-file", str(pki.ca.cert_path)),
                *("--dimension-format", POD_FORMAT),
            ],
        )
        assert trusted.exit_code == 0, trusted.output
        assert "conforms: 0 error(s), 0 warning(s)" in trusted.output
