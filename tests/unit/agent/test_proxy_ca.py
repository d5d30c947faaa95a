"""The ADC's proxy CA verifies the proxy itself; the destinations trust it only with the admin's opt-in."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from dynamic_scoring.agent.cli import main as cli_main
from dynamic_scoring.agent.http import ClientPool, TLSMaterial
from dynamic_scoring.agent.options import AgentOptions
from dynamic_scoring.agent.proxy import ProxySettings, proxy_mounts, proxy_settings_from_env
from dynamic_scoring.agent.settings import AgentSettings
from e2e.pki import CertificateAuthority

PROXY_CA_NAME = "adc proxy CA"


@pytest.fixture(scope="module")
def proxy_ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return CertificateAuthority(tmp_path_factory.mktemp("proxy-ca"), PROXY_CA_NAME).cert_path


def trusts_proxy_ca(ctx: ssl.SSLContext | None) -> bool:
    assert ctx is not None
    return any(f"'{PROXY_CA_NAME}'" in str(cert.get("subject")) for cert in ctx.get_ca_certs())


def proxy_pool(client: httpx.AsyncClient, scheme: str) -> Any:
    """The httpcore proxy pool behind the client's mount for `scheme` (through ``TargetChecked``)."""
    mounts: dict[Any, Any] = client._mounts
    (transport,) = [t for pattern, t in mounts.items() if t is not None and pattern.pattern == f"{scheme}://"]
    return transport._inner._pool


def test_the_env_carries_the_ca_path_and_the_opt_in_into_the_proxy_settings(proxy_ca: Path) -> None:
    env = {"HTTPS_PROXY": "https://proxy:3129", "CA_BUNDLE_FILE_PATH": str(proxy_ca)}
    settings = proxy_settings_from_env(env)
    assert settings.ca_files == (proxy_ca,)
    assert settings.destination_ca_files == ()
    opted = proxy_settings_from_env(env, trust_ca_for_destinations=True)
    assert opted.destination_ca_files == (proxy_ca,)


@pytest.mark.anyio
async def test_without_the_opt_in_only_the_https_proxy_connection_trusts_the_proxy_ca(proxy_ca: Path) -> None:
    pool = ClientPool(
        proxies=ProxySettings(https="https://proxy:3129", http="http://plain:3128", ca_files=(proxy_ca,))
    )
    try:
        client = pool.client_for(None)
        https = proxy_pool(client, "https")
        assert trusts_proxy_ca(https._proxy_ssl_context)
        assert not trusts_proxy_ca(https._ssl_context)
        assert not trusts_proxy_ca(proxy_pool(client, "http")._ssl_context)
        # a client of an endpoint with TLS settings of its own starts from the same trust store
        custom = pool.client_for(TLSMaterial(insecure=True, origin="x"))
        assert not trusts_proxy_ca(proxy_pool(custom, "https")._ssl_context)
    finally:
        await pool.aclose()


@pytest.mark.anyio
async def test_with_the_opt_in_the_destinations_trust_the_proxy_ca_too(proxy_ca: Path) -> None:
    settings = ProxySettings(https="https://proxy:3129", ca_files=(proxy_ca,), ca_for_destinations=True)
    pool = ClientPool(proxies=settings)
    try:
        https = proxy_pool(pool.client_for(None), "https")
        assert trusts_proxy_ca(https._ssl_context)
        assert trusts_proxy_ca(https._proxy_ssl_context)
    finally:
        await pool.aclose()


def test_an_http_proxy_gets_no_proxy_context_and_no_ca_means_none(proxy_ca: Path) -> None:
    verify = ssl.create_default_context()
    proxy_ctx = ssl.create_default_context(cafile=str(proxy_ca))
    mounts = proxy_mounts(ProxySettings(http="http://p:3128"), verify, httpx.Limits(), proxy_verify=proxy_ctx)
    inner: Any = mounts["http://"]
    assert inner._inner._pool._proxy_ssl_context is None
    assert inner._inner._pool._ssl_context is verify


@pytest.mark.parametrize("flag", [False, True])
def test_the_agent_flag_decides_where_the_deployments_ca_bundle_is_trusted(
    flag: bool, proxy_ca: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, AgentSettings] = {}

    async def fake_run_agent(hub: Path, managed: Path | None, options: AgentOptions) -> int:
        seen["settings"] = options.settings
        return 0

    monkeypatch.setattr("dynamic_scoring.agent.cli.run_agent", fake_run_agent)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("{}")
    args = ["--hub-kubeconfig", str(kubeconfig), "--cluster-name", "c1", "--addon-namespace", "x"]
    result = CliRunner().invoke(
        cli_main,
        [*args, *(["--trust-proxy-ca-for-destinations"] if flag else [])],
        env={"HTTPS_PROXY": "https://proxy:3129", "CA_BUNDLE_FILE_PATH": str(proxy_ca)},
    )
    assert result.exit_code == 0, result.output
    settings = seen["settings"]
    assert proxy_ca not in settings.extra_ca_files  # never added to every destination directly
    assert settings.proxies.ca_files == (proxy_ca,)
    assert settings.proxies.destination_ca_files == ((proxy_ca,) if flag else ())
