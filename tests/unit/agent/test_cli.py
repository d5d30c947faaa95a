"""Flag validation of `dynamic-scoring-agent`, in process with click's CliRunner."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from dynamic_scoring.agent.cli import main


def test_help_lists_upstream_flags() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for flag in (
        "--hub-kubeconfig",
        "--managed-kubeconfig",
        "--cluster-name",
        "--addon-namespace",
        "--addon-name",
    ):
        assert flag in result.output


def test_invalid_cluster_name_is_a_usage_error(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")
    result = CliRunner().invoke(
        main,
        ["--hub-kubeconfig", str(kubeconfig), "--cluster-name", "Not_A_Namespace", "--addon-namespace", "x"],
    )
    assert result.exit_code == 2
    assert "not a valid cluster (namespace) name" in result.output


def test_missing_hub_kubeconfig_says_what_to_check(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["--hub-kubeconfig", str(tmp_path / "nope"), "--cluster-name", "cluster1", "--addon-namespace", "x"],
    )
    assert result.exit_code == 1
    assert "dynamic-scoring-hub-kubeconfig" in result.output and "ManagedClusterAddOn" in result.output


def test_bad_bind_address(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")
    result = CliRunner().invoke(
        main,
        [
            "--hub-kubeconfig", str(kubeconfig), "--cluster-name", "c1", "--addon-namespace", "x",
            "--metrics-bind-address", "8080",
        ],
    )  # fmt: skip
    assert result.exit_code == 2 and "expected host:port" in result.output


def test_bad_allow_cidr_names_the_flag_and_the_variable(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")
    args = ["--hub-kubeconfig", str(kubeconfig), "--cluster-name", "c1", "--addon-namespace", "x"]
    flag = CliRunner().invoke(main, [*args, "--allow-cidr", "127.0.0.0/8,nope"])
    assert flag.exit_code == 2 and "'nope' is not an IP network" in flag.output
    assert "DYNAMIC_SCORING_AGENT_ALLOW_CIDRS" in flag.output
    env = CliRunner().invoke(main, args, env={"DYNAMIC_SCORING_AGENT_ALLOW_CIDRS": "127.0.0.0/33"})
    assert env.exit_code == 2 and "'127.0.0.0/33' is not an IP network" in env.output


def test_own_token_flags_come_together_and_destinations_must_be_readable(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")
    args = ["--hub-kubeconfig", str(kubeconfig), "--cluster-name", "c1", "--addon-namespace", "x"]
    alone = CliRunner().invoke(main, [*args, "--service-account-token-destinations", "prom.example.com"])
    assert alone.exit_code == 2 and "need --service-account-token-file" in alone.output
    token = ["--service-account-token-file", str(tmp_path / "token")]
    empty = CliRunner().invoke(main, [*args, *token])
    assert empty.exit_code == 2 and "no destination" in empty.output
    bad = CliRunner().invoke(main, [*args, *token, "--service-account-token-destinations", "prom:99999"])
    assert bad.exit_code == 2 and "unreadable destination entries: 'prom:99999'" in bad.output
