"""`why` and `status` argument handling and hub errors, through click's CliRunner (no hub needed)."""

from __future__ import annotations

import os
import signal
import socket
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from dynamic_scoring.ctl.main import main


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kubeconfig_to(tmp_path: Path, port: int) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: h, cluster: {{server: 'https://127.0.0.1:{port}'}}}}]\n"
        "users: [{name: u, user: {token: not-a-real-token}}]\n"
        "contexts: [{name: c, context: {cluster: h, user: u}}]\n"
    )
    return path


COMMANDS = [["why", "p", "-n", "ns"], ["status"]]


@pytest.mark.parametrize("args", COMMANDS)
def test_a_missing_default_kubeconfig_exits_3_with_a_hint(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nope"))
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 3
    assert f"kubeconfig {tmp_path / 'nope'} does not exist" in result.output and "hint:" in result.output


@pytest.mark.parametrize("args", COMMANDS)
def test_a_missing_kubeconfig_given_with_the_option_is_a_bad_argument(
    args: list[str], tmp_path: Path
) -> None:
    result = CliRunner().invoke(main, [*args, "--kubeconfig", str(tmp_path / "nope")])
    assert result.exit_code == 2, result.output
    assert "does not exist" in result.output and "hint: give --kubeconfig" in result.output


@pytest.mark.parametrize("args", COMMANDS)
def test_a_garbled_kubeconfig_given_exits_2_and_a_garbled_default_exits_3(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "bad"
    bad.write_text("this: [is not a kubeconfig")
    given = CliRunner().invoke(main, [*args, "--kubeconfig", str(bad)])
    assert given.exit_code == 2 and "is not usable" in given.output
    monkeypatch.setenv("KUBECONFIG", str(bad))
    default = CliRunner().invoke(main, args)
    assert default.exit_code == 3 and "is not usable" in default.output


@pytest.mark.parametrize("args", COMMANDS)
def test_an_unreachable_hub_exits_3_naming_the_request(args: list[str], tmp_path: Path) -> None:
    result = CliRunner().invoke(main, [*args, "--kubeconfig", str(kubeconfig_to(tmp_path, closed_port()))])
    assert result.exit_code == 3, result.output
    assert "error: could not" in result.output and "Connection refused" in result.output


def test_status_refuses_watch_with_json() -> None:
    result = CliRunner().invoke(main, ["status", "--watch", "-o", "json"])
    assert result.exit_code == 2 and "--watch redraws text" in result.output


def test_why_needs_a_placement() -> None:
    assert CliRunner().invoke(main, ["why"]).exit_code == 2


def test_status_watch_survives_an_unreachable_hub_and_stops_on_ctrl_c(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A live view that loses the hub says so on every redraw and keeps going until Ctrl-C (exit 0)."""
    redraws: list[float] = []

    def sleep(seconds: float) -> None:
        redraws.append(seconds)
        if len(redraws) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr("dynamic_scoring.ctl.status.time.sleep", sleep)
    kubeconfig = kubeconfig_to(tmp_path, closed_port())
    result = CliRunner().invoke(
        main, ["status", "--watch", "--interval", "0.5", "--kubeconfig", str(kubeconfig)]
    )
    assert result.exit_code == 0, result.output
    assert redraws == [0.5, 0.5]
    assert result.output.count("\x1b[H\x1b[J") == 2
    assert result.output.count("could not read the hub") == 2 and "retrying every 0.5s" in result.output


def test_status_watch_stops_on_sigterm_as_on_ctrl_c(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM (kill, systemd, the kubelet) ends the live view with exit 0, and the handler is put back."""
    before = signal.getsignal(signal.SIGTERM)
    redraws: list[float] = []

    def sleep(seconds: float) -> None:
        redraws.append(seconds)
        os.kill(os.getpid(), signal.SIGTERM)
        threading.Event().wait(5)  # the handler interrupts this; returning would mean SIGTERM was lost

    monkeypatch.setattr("dynamic_scoring.ctl.status.time.sleep", sleep)
    kubeconfig = kubeconfig_to(tmp_path, closed_port())
    result = CliRunner().invoke(
        main, ["status", "--watch", "--interval", "0.2", "--kubeconfig", str(kubeconfig)]
    )
    assert result.exit_code == 0, result.output
    assert redraws == [0.2]
    assert signal.getsignal(signal.SIGTERM) is before
