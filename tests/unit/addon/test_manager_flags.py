"""The manager's option flags reach ManagerOptions (image allow list, proxy CA, MultiKueue order)."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from dynamic_scoring.addon.cli import main
from dynamic_scoring.addon.manager import ManagerOptions
from dynamic_scoring.addon.render.image_allow import AGENT_IMAGE_ALLOW_ENV


def test_an_allow_value_with_a_tag_is_refused_at_start() -> None:
    result = CliRunner().invoke(main, ["manager", "--agent-image-allow", "registry.example.com/team/agent:1"])
    assert result.exit_code == 2
    assert "--agent-image-allow" in result.output and "tag or digest" in result.output


def test_flags_and_env_list_reach_the_options(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, ManagerOptions] = {}

    class StopError(OSError):
        pass

    class FakeManager:
        def __init__(self, _api: Any, options: ManagerOptions) -> None:
            seen["options"] = options

        def serve(self) -> int:
            raise StopError("stopped before serving")

    monkeypatch.setattr("dynamic_scoring.addon.cli.Manager", FakeManager)
    monkeypatch.setattr("dynamic_scoring.addon.cli.build_api", lambda _kubeconfig: None)
    monkeypatch.setattr("dynamic_scoring.addon.cli.configure", lambda _level: None)
    result = CliRunner().invoke(
        main,
        ["manager", "--trust-proxy-ca-for-destinations", "--multikueue-order"],
        env={AGENT_IMAGE_ALLOW_ENV: "mirror.example.com/ds, localhost:5000/"},
    )
    assert "stopped before serving" in result.output
    options = seen["options"]
    assert options.agent_image_allow == ("mirror.example.com/ds", "localhost:5000")
    assert options.trust_proxy_ca_for_destinations is True
    assert options.multikueue_order is True and ManagerOptions().multikueue_order is False
    assert (
        ManagerOptions().agent_image_allow == () and ManagerOptions().trust_proxy_ca_for_destinations is False
    )
