"""The manager's option flags reach ManagerOptions (image allow list, proxy CA, MultiKueue order)."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from dynamic_scoring.addon.cli import main
from dynamic_scoring.addon.manager import ManagerOptions, crd_remedy
from dynamic_scoring.addon.render.image_allow import AGENT_IMAGE_ALLOW_ENV
from dynamic_scoring.addon.render.token_allow import (
    AGENT_MONITORING_ROLE_ALLOW_ENV,
    AGENT_TOKEN_DESTINATION_ALLOW_ENV,
    AgentTokenAllow,
)
from dynamic_scoring.kube.resources import MULTIKUEUE_CONFIGS


def test_an_allow_value_with_a_tag_is_refused_at_start() -> None:
    result = CliRunner().invoke(main, ["manager", "--agent-image-allow", "registry.example.com/team/agent:1"])
    assert result.exit_code == 2
    assert "--agent-image-allow" in result.output and "tag or digest" in result.output


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        # host:port also matches http://: the agent's token must never travel in clear text
        ("--agent-token-destination-allow", "thanos.example.com:9091", "must start with https://"),
        ("--agent-token-destination-allow", "http://thanos.example.com:9091", "must start with https://"),
        ("--agent-token-destination-allow", "https://thanos:99999", "cannot be read"),
        ("--agent-token-destination-allow", "https://*.0.0.1", "cannot be read"),
        ("--agent-token-audience-allow", "a" * 254, "253"),
        # the flag narrows the closed list of roles an ADC may bind; it cannot extend it
        ("--agent-monitoring-role-allow", "cluster-admin", "cluster-monitoring-view"),
    ],
)
def test_a_bad_token_allow_value_is_refused_at_start(flag: str, value: str, says: str) -> None:
    result = CliRunner().invoke(main, ["manager", flag, value])
    assert result.exit_code == 2
    assert flag in result.output and says in result.output


def options_from(monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str]) -> ManagerOptions:
    """The ManagerOptions `manager` builds from `args` and `env`, stopped before it serves."""
    seen: dict[str, ManagerOptions] = {}

    class FakeManager:
        def __init__(self, _api: Any, options: ManagerOptions) -> None:
            seen["options"] = options

        def serve(self) -> int:
            raise OSError("stopped before serving")

    monkeypatch.setattr("dynamic_scoring.addon.cli.Manager", FakeManager)
    monkeypatch.setattr("dynamic_scoring.addon.cli.build_api", lambda _kubeconfig: None)
    monkeypatch.setattr("dynamic_scoring.addon.cli.configure", lambda _level: None)
    result = CliRunner().invoke(main, ["manager", *args], env=env)
    assert "stopped before serving" in result.output
    return seen["options"]


def test_flags_and_env_list_reach_the_options(monkeypatch: pytest.MonkeyPatch) -> None:
    options = options_from(
        monkeypatch,
        ["--trust-proxy-ca-for-destinations", "--multikueue-order"],
        {AGENT_IMAGE_ALLOW_ENV: "mirror.example.com/ds, localhost:5000/"},
    )
    assert options.agent_image_allow == ("mirror.example.com/ds", "localhost:5000")
    assert options.trust_proxy_ca_for_destinations is True
    assert options.multikueue_order is True and ManagerOptions().multikueue_order is False
    assert (
        ManagerOptions().agent_image_allow == () and ManagerOptions().trust_proxy_ca_for_destinations is False
    )


@pytest.mark.parametrize(("value", "expected"), [("false", False), ("true", True)])
def test_the_multikueue_order_env_the_installs_set_is_read_as_a_boolean(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: bool
) -> None:
    options = options_from(monkeypatch, [], {"DYNAMIC_SCORING_MULTIKUEUE_ORDER": value})
    assert options.multikueue_order is expected


def test_the_dispatcher_flags_reach_the_options_and_need_the_order(monkeypatch: pytest.MonkeyPatch) -> None:
    options = options_from(
        monkeypatch,
        ["--multikueue-order", "--multikueue-dispatch-delay", "4.5"],
        {"DYNAMIC_SCORING_MULTIKUEUE_DISPATCH": "true"},
    )
    assert options.multikueue_dispatch is True and options.multikueue_dispatch_delay == 4.5
    assert ManagerOptions().multikueue_dispatch is False and ManagerOptions().multikueue_dispatch_delay == 10
    # the dispatcher reads the ordered configs: without them it would nominate nothing
    result = CliRunner().invoke(main, ["manager", "--multikueue-dispatch"])
    assert result.exit_code == 2 and "add --multikueue-order" in result.output
    result = CliRunner().invoke(main, ["manager", "--multikueue-order", "--multikueue-dispatch-delay", "0"])
    assert result.exit_code == 2 and "--multikueue-dispatch-delay" in result.output


def test_a_missing_kueue_crd_says_to_install_kueue_or_turn_the_option_off() -> None:
    remedy = crd_remedy(MULTIKUEUE_CONFIGS)
    assert "Kueue v0.19" in remedy and "--multikueue-order" in remedy


def test_the_token_allow_flags_and_env_lists_reach_the_options(monkeypatch: pytest.MonkeyPatch) -> None:
    options = options_from(
        monkeypatch,
        [
            "--agent-token-destination-allow",
            "https://thanos.example.com:9091",
            "--agent-token-audience-allow",
            "prometheus,thanos",
        ],
        {
            AGENT_TOKEN_DESTINATION_ALLOW_ENV: "https://ignored.example.com",  # the flag wins
            AGENT_MONITORING_ROLE_ALLOW_ENV: "cluster-monitoring-view",
        },
    )
    assert options.agent_token_allow == AgentTokenAllow(
        destinations=("https://thanos.example.com:9091",),
        audiences=("prometheus", "thanos"),
        monitoring_roles=("cluster-monitoring-view",),
    )
    env_only = options_from(
        monkeypatch,
        [],
        {AGENT_TOKEN_DESTINATION_ALLOW_ENV: "https://*.mon.example.com/t, https://[::1]:9091"},
    )
    assert env_only.agent_token_allow.destinations == ("https://*.mon.example.com/t", "https://[::1]:9091")


def test_by_default_the_manager_allows_no_token_destination(monkeypatch: pytest.MonkeyPatch) -> None:
    assert options_from(monkeypatch, [], {}).agent_token_allow == AgentTokenAllow()
    assert ManagerOptions().agent_token_allow == AgentTokenAllow()
