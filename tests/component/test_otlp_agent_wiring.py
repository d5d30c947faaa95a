"""``--otlp-bind-address`` wires one store into the receiver, the supervisor and ``/metrics``.

``build_agent`` connects to nothing until it serves, so a kubeconfig naming an unreachable server is
enough to check the wiring; the receiver is a real one on loopback.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from dynamic_scoring.agent.cli import build_agent, main
from dynamic_scoring.agent.options import AgentOptions, OtlpOptions
from dynamic_scoring.agent.settings import AgentSettings
from dynamic_scoring.agent.source.otlp.access import ReceiverAccess
from dynamic_scoring.agent.source.otlp.store import LabelLimits
from dynamic_scoring.kube.api import KubeAPI
from tests.component.conftest import LOOPBACK
from tests.component.harness import summary

pytestmark = pytest.mark.anyio

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


async def test_the_flag_starts_a_receiver_whose_store_follows_the_running_scorers(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(KUBECONFIG)
    api = KubeAPI(config)
    options = AgentOptions(
        cluster_name="cluster1",
        addon_namespace="ns",
        bind=("127.0.0.1", 0),
        settings=AgentSettings(address_policy=LOOPBACK),
        otlp=OtlpOptions(("127.0.0.1", 0), max_series=7),
    )
    agent = build_agent(api, api, options)
    assert agent.otlp is not None
    agent.otlp.start()
    try:
        s = summary(
            "wired",
            "http://127.0.0.1:9/score",
            sourceType="OpenTelemetry",
            sourceQuery="temp",
            sourceRange=60,
            sourceStep=10,
            scoreDestination="None",
        )
        await agent.supervisor.apply([s])
        point = {"timeUnixNano": str(time.time_ns()), "asDouble": 21.5}
        body = {
            "resourceMetrics": [
                {"scopeMetrics": [{"metrics": [{"name": "temp", "gauge": {"dataPoints": [point]}}]}]}
            ]
        }
        answer = httpx.post(f"http://127.0.0.1:{agent.otlp.port}/v1/metrics", json=body, timeout=10)
        assert answer.status_code == 200
        assert agent.otlp.store.series_held == 1  # selected because the supervisor told the store
        text = agent.supervisor.metrics.exposition().decode()
        assert "dynamic_scoring_otlp_series_held 1.0" in text
        assert "dynamic_scoring_otlp_series_limit 7.0" in text
        await agent.supervisor.apply([])  # the scorer goes: nothing selects its series any more
        assert agent.otlp.store.series_held == 0
    finally:
        await agent.supervisor.close()
        agent.otlp.stop()
        agent.server.stop()


def test_a_bad_otlp_bind_address_is_a_usage_error(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(KUBECONFIG)
    result = CliRunner().invoke(
        main,
        [
            "--hub-kubeconfig",
            str(config),
            "--cluster-name",
            "c1",
            "--addon-namespace",
            "x",
            "--otlp-bind-address",
            "4318",
        ],
    )
    assert result.exit_code == 2
    assert "--otlp-bind-address" in result.output


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--otlp-client-ca-file", "/x/ca.crt"], "client certificates need TLS"),
        (["--otlp-tls-cert-file", "/x/tls.crt"], "a TLS certificate and its key go together"),
    ],
)
def test_incomplete_otlp_tls_flags_are_a_usage_error(tmp_path: Path, flags: list[str], message: str) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(KUBECONFIG)
    result = CliRunner().invoke(
        main,
        [
            "--hub-kubeconfig",
            str(config),
            "--cluster-name",
            "c1",
            "--addon-namespace",
            "x",
            "--otlp-bind-address",
            "127.0.0.1:0",
            *flags,
        ],
    )
    assert result.exit_code == 2
    assert message in result.output


async def test_the_access_and_label_flags_reach_the_receiver_and_its_store(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(KUBECONFIG)
    token = tmp_path / "token"
    token.write_text("t0k3n")
    api = KubeAPI(config)
    otlp = OtlpOptions(
        ("127.0.0.1", 0),
        access=ReceiverAccess(bearer_token_file=token),
        label_limits=LabelLimits(max_labels=3),
    )
    options = AgentOptions(
        cluster_name="cluster1",
        addon_namespace="ns",
        bind=("127.0.0.1", 0),
        settings=AgentSettings(address_policy=LOOPBACK),
        otlp=otlp,
    )
    agent = build_agent(api, api, options)
    assert agent.otlp is not None
    agent.otlp.start()
    try:
        url = f"http://127.0.0.1:{agent.otlp.port}/v1/metrics"
        assert httpx.post(url, json={"resourceMetrics": []}, timeout=10).status_code == 401
        ok = httpx.post(
            url, json={"resourceMetrics": []}, headers={"Authorization": "Bearer t0k3n"}, timeout=10
        )
        assert ok.status_code == 200
        assert agent.otlp.store.label_limits.max_labels == 3
    finally:
        await agent.supervisor.close()
        agent.otlp.stop()
        agent.server.stop()
