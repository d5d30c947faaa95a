"""Flag validation of `dynamic-scoring-agent`, in process with click's CliRunner."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from dynamic_scoring.agent.cli import main
from dynamic_scoring.agent.options import AgentOptions


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


def _options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *flags: str) -> AgentOptions:
    """The one `AgentOptions` the command builds from `flags`, caught where it would start the agent."""
    seen: list[AgentOptions] = []

    async def run(hub: Path, managed: Path | None, options: AgentOptions) -> int:
        seen.append(options)
        return 0

    monkeypatch.setattr("dynamic_scoring.agent.cli.run_agent", run)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")
    args = ["--hub-kubeconfig", str(kubeconfig), "--cluster-name", "c1", "--addon-namespace", "ns", *flags]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    [options] = seen
    return options


def test_the_flags_become_one_options_value_with_the_rendered_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = _options(tmp_path, monkeypatch)
    assert (options.cluster_name, options.addon_namespace, options.addon_name) == (
        "c1",
        "ns",
        "dynamic-scoring",
    )
    assert (
        options.bind == AgentOptions("c1", "ns").bind == ("0.0.0.0", 8080) and options.lease_seconds == 60.0
    )
    assert options.otlp is None  # no receiver unless its address is given
    assert options.owner_deployment is None and not options.adopt_unlabelled_scores


def test_the_otlp_flags_reach_the_receiver_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token = tmp_path / "token"
    token.write_text("t")
    options = _options(
        tmp_path,
        monkeypatch,
        "--otlp-bind-address", "127.0.0.1:4318", "--otlp-max-series", "9",
        "--otlp-bearer-token-file", str(token), "--otlp-max-labels", "5",
        "--lease-renew-seconds", "7", "--owner-deployment", "agent",
    )  # fmt: skip
    assert options.otlp is not None
    assert options.otlp.bind == ("127.0.0.1", 4318) and options.otlp.max_series == 9
    assert options.otlp.access.bearer_token_file == token and options.otlp.label_limits.max_labels == 5
    assert options.lease_seconds == 7.0 and options.owner_deployment == "agent"
