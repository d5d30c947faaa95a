"""``dynamic-scoring scorer lint``: DynamicScorer files checked offline, by the hub's rules (CliRunner)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from dynamic_scoring.ctl.main import main

ROOT = Path(__file__).resolve().parents[3]
HEAD = "apiVersion: dynamic-scoring.open-cluster-management.io/v1alpha1\nkind: DynamicScorer\n"
GOOD = (
    HEAD + "metadata: {name: good, namespace: ns}\n"
    "spec:\n"
    "  scoring: {host: 'http://scorer:8000', params: {name: cpu}}\n"
    "  source: {host: 'http://prom:9090', params: {query: up, range: 300, step: 30}}\n"
)
BAD = (
    HEAD + "metadata: {name: bad}\n"
    "spec:\n"
    "  scoring: {host: 'http://<NODE_IP>:8000', params: {name: mem}}\n"
    "  source: {host: 'ftp://prom', params: {query: up, range: 60, step: 120}}\n"
    "  scoreDimensionFormats: ['${node}', '${node}']\n"
    "---\n"
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\n"
    "---\n" + HEAD + "metadata: {name: typed}\n"
    "spec: {timeoutSeconds: -1, location: Somewhere}\n"
)


def lint(tmp_path: Path, *texts: str, json_output: bool = True) -> tuple[int, Any]:
    paths = []
    for n, text in enumerate(texts):
        path = tmp_path / f"s{n}.yaml"
        path.write_text(text)
        paths.append(str(path))
    result = CliRunner().invoke(main, ["scorer", "lint", *paths, *(["-o", "json"] if json_output else [])])
    return result.exit_code, json.loads(result.stdout) if json_output else result.output


def rows(document: dict[str, Any]) -> list[tuple[int, str, str, str]]:
    return [(p["document"], p["severity"], p["field"], p["message"]) for p in document["problems"]]


def test_a_good_file_and_the_samples_pass(tmp_path: Path) -> None:
    code, document = lint(tmp_path, GOOD)
    assert code == 0 and document == {"ok": True, "scorers": 1, "problems": []}
    samples = [str(p) for p in sorted((ROOT / "samples" / "crs").glob("*.yaml"))]
    result = CliRunner().invoke(main, ["scorer", "lint", *samples])
    assert result.exit_code == 0, result.output
    assert "0 error(s)" in result.output


def test_every_problem_is_named_by_document_and_field(tmp_path: Path) -> None:
    code, document = lint(tmp_path, BAD)
    assert code == 1 and not document["ok"] and document["scorers"] == 2
    assert rows(document) == [
        (0, "error", "spec.source.host", "'ftp://prom' must start with http:// or https://"),
        (0, "error", "spec.source.params.step", "step 120s is larger than range 60s"),
        (
            0,
            "error",
            "spec.scoring.host",
            "'http://<node_ip>:8000': '<NODE_IP>' is not a valid host name or IP address "
            "(an unfilled placeholder?)",
        ),
        (
            0,
            "warning",
            "spec.scoreDimensionFormats[1]",
            "repeats entry 0: every result's two items get the same name (the later wins)",
        ),
        # the CRD's own schema first (what a strict apply refuses), then the hub's rules on the rest
        (2, "error", "spec.timeoutSeconds", "must be greater than 0 (is -1)"),
        (
            2,
            "error",
            "spec.location",
            "must be one of 'Internal', 'External', 'internal', 'external' (is 'Somewhere')",
        ),
        (
            2,
            "error",
            "spec.scoring.host",
            "required when configURL is not set or not usable (nowhere to send the series)",
        ),
    ]


def test_text_names_the_file_document_and_scorer(tmp_path: Path) -> None:
    code, text = lint(tmp_path, BAD, json_output=False)
    assert code == 1
    assert f"{tmp_path / 's0.yaml'}: document 2 typed\n  ERROR   spec.timeoutSeconds: must be" in text
    assert text.rstrip().endswith("2 DynamicScorer(s) in 1 file(s): 6 error(s), 1 warning(s)")


def test_scorers_publishing_one_score_name_conflict_across_files(tmp_path: Path) -> None:
    other = GOOD.replace("name: good, namespace: ns", "name: twin, namespace: ns").replace(
        "name: cpu", "name: CPU"
    )
    code, document = lint(tmp_path, GOOD, other)
    assert code == 1
    ((problem),) = document["problems"]
    assert problem["file"].endswith("s1.yaml") and problem["field"] == "spec.scoring.params.name"
    assert "both publish AddOnPlacementScore 'cpu'" in problem["message"]


def test_an_unknown_placeholder_is_an_error_naming_the_known_ones(tmp_path: Path) -> None:
    literal = GOOD.replace("spec:\n", "spec:\n  scoreDimensionFormat: '${cluster}-${nodes}'\n")
    code, document = lint(tmp_path, literal)
    assert code == 1 and not document["ok"]
    ((severity, field, message),) = [(p["severity"], p["field"], p["message"]) for p in document["problems"]]
    assert (severity, field) == ("error", "spec.scoreDimensionFormat")
    assert message.startswith("${nodes} is not a placeholder and stays literal in every item name")
    assert "ItemNameCollision" in message and "${node}" in message


def test_unknown_fields_are_errors_with_the_closest_name_and_the_rules_still_run(tmp_path: Path) -> None:
    typos = GOOD.replace("spec:\n", "spec:\n  sourse: {type: Prometheus}\n  stabilisation: {}\n").replace(
        "range: 300, step: 30", "range: 60, step: 120"
    )
    code, document = lint(tmp_path, typos)
    assert code == 1
    assert rows(document) == [
        (0, "error", "spec.sourse", "unknown field (not in the CRD); did you mean 'source'?"),
        (0, "error", "spec.stabilisation", "unknown field (not in the CRD); did you mean 'stabilization'?"),
        (0, "error", "spec.source.params.step", "step 120s is larger than range 60s"),  # same run
    ]


def test_bounds_and_types_come_from_the_crd(tmp_path: Path) -> None:
    wrong = GOOD.replace("range: 300, step: 30", "range: 0, step: '30'")
    code, document = lint(tmp_path, wrong)
    assert code == 1
    assert rows(document) == [
        (0, "error", "spec.source.params.range", "must be at least 1 (is 0)"),
        (0, "error", "spec.source.params.step", "must be of type integer, not string"),
    ]


def test_warnings_and_notes_alone_exit_0(tmp_path: Path) -> None:
    full = (
        HEAD + "metadata: {name: full}\n"
        "spec: {configSyncMode: Full, configURL: 'http://scorer:8000/config', source: {type: Prometheus}}\n"
    )
    code, document = lint(tmp_path, full)
    assert code == 0 and document["ok"]
    assert [(p["severity"], p["field"]) for p in document["problems"]] == [
        ("note", "spec.configSyncMode"),
        ("warning", "spec.source.host"),
    ]
    assert "/config must give source.host" in document["problems"][1]["message"]


def test_the_upstream_samples_pass_the_crd_schema(tmp_path: Path) -> None:
    upstream = [str(p) for p in sorted((ROOT / "samples" / "upstream").glob("*.yaml"))]
    result = CliRunner().invoke(main, ["scorer", "lint", *upstream, "-o", "json"])
    errors = [p for p in json.loads(result.stdout)["problems"] if p["severity"] == "error"]
    # the one error is upstream's own unfilled <node_ip> placeholder, a rule the hub enforces too
    assert [(e["name"], e["field"]) for e in errors] == [("sample-scorer", "spec.configURL")], errors


def test_a_list_from_kubectl_is_read_item_by_item(tmp_path: Path) -> None:
    listed = "apiVersion: v1\nkind: List\nitems:\n- " + "\n  ".join(BAD.split("---")[2].strip().splitlines())
    code, document = lint(tmp_path, listed)
    assert code == 1 and {(p["document"], p["item"]) for p in document["problems"]} == {(0, 0)}


def test_an_unreadable_file_exits_2_with_one_json_error(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("spec: [unclosed\n")
    for path in (tmp_path / "missing.yaml", tmp_path / "broken.yaml"):
        result = CliRunner().invoke(main, ["scorer", "lint", str(path), "-o", "json"])
        assert result.exit_code == 2
        error = json.loads(result.stdout)["error"]
        assert error["kind"] == "usage" and str(path) in error["message"]
    assert CliRunner().invoke(main, ["scorer", "lint"]).exit_code == 2
