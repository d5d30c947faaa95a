"""How every command ends with an error: one JSON document under ``-o json``, the documented exit codes.

Through click's CliRunner, with nothing listening where a hub or a scorer would be.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from dynamic_scoring.ctl.main import main


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def unreachable_kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: h, cluster: {{server: 'https://127.0.0.1:{closed_port()}'}}}}]\n"
        "users: [{name: u, user: {token: not-a-real-token}}]\n"
        "contexts: [{name: c, context: {cluster: h, user: u}}]\n"
    )
    return path


def error_of(result: Result) -> dict[str, Any]:
    """The one JSON document on stdout (nothing on stderr), and its ``error`` object."""
    assert result.stderr == "", result.stderr
    document = json.loads(result.stdout)
    assert list(document) == ["error"]
    error: dict[str, Any] = document["error"]
    assert list(error) == ["code", "kind", "message", "hint"]
    assert error["code"] == result.exit_code
    return error


def test_an_unreachable_hub_is_a_json_error_with_code_3(tmp_path: Path) -> None:
    kubeconfig = unreachable_kubeconfig(tmp_path)
    for args in (["why", "p", "-n", "ns"], ["status"]):
        error = error_of(CliRunner().invoke(main, [*args, "--kubeconfig", str(kubeconfig), "-o", "json"]))
        assert error["code"] == 3 and error["kind"] == "unreachable"
        assert error["message"].startswith("could not ") and "Connection refused" in error["message"]
        assert error["hint"]


def test_a_missing_kubeconfig_is_a_json_error_2_when_given_and_3_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    given = error_of(
        CliRunner().invoke(main, ["status", "-o", "json", "--kubeconfig", str(tmp_path / "nope")])
    )
    assert (given["code"], given["kind"]) == (2, "usage") and "does not exist" in given["message"]
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nope"))
    default = error_of(CliRunner().invoke(main, ["status", "-o", "json"]))
    assert (default["code"], default["kind"]) == (3, "unreachable") and "does not exist" in default["message"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # click's usage errors, whether raised before or after -o is read
        (["why", "--bogus", "-o", "json"], "No such option '--bogus'"),
        (["why", "-o", "json"], "Missing argument 'PLACEMENT'"),
        (["why", "p", "--output=json", "--bogus"], "No such option '--bogus'"),
        (["status", "--watch", "-o", "json"], "--watch redraws text"),
        # ours
        (["scorer", "validate", "ftp://x", "-o", "json"], "not an http(s) URL"),
        (
            ["explain", "s", "--cluster", "c", "--file", "/nonexistent/s.yaml", "-o", "json"],
            "/nonexistent/s.yaml",
        ),
    ],
)
def test_bad_arguments_are_a_json_error_with_code_2(args: list[str], message: str) -> None:
    error = error_of(CliRunner().invoke(main, args))
    assert (error["code"], error["kind"]) == (2, "usage")
    assert message in error["message"]


def test_an_unreachable_scorer_is_a_json_error_with_code_3() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    error = error_of(CliRunner().invoke(main, ["scorer", "validate", url, "-o", "json"]))
    assert (error["code"], error["kind"]) == (3, "unreachable")
    assert "Connection refused" in error["message"] and "scorer running" in error["hint"]


def test_text_mode_keeps_errors_on_stderr(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["status", "--kubeconfig", str(tmp_path / "nope")])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("error: kubeconfig ") and "\nhint: " in result.stderr
    usage = CliRunner().invoke(main, ["why", "--bogus"])
    assert usage.exit_code == 2 and "Error: No such option '--bogus'" in usage.stderr


def test_a_file_named_json_is_not_mistaken_for_json_output(tmp_path: Path) -> None:
    """``record -o FILE`` names a file: its errors stay text even when the file is called json."""
    result = CliRunner().invoke(main, ["record", "--bogus", "-o", "json"])
    assert result.exit_code == 2 and result.stdout == "" and "No such option" in result.stderr
