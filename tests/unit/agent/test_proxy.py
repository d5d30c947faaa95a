import ssl

import httpx

from dynamic_scoring.agent.proxy import (
    ProxySettings,
    ca_bundle_from_env,
    proxy_mounts,
    proxy_settings_from_env,
)


def test_upper_case_wins_and_no_proxy_is_split() -> None:
    got = proxy_settings_from_env(
        {"HTTPS_PROXY": "http://p:3128", "https_proxy": "http://other:1", "no_proxy": " .svc, 10.0.0.1 ,"}
    )
    assert got == ProxySettings(http=None, https="http://p:3128", no_proxy=(".svc", "10.0.0.1"))


def test_nothing_set_means_no_mounts_and_star_disables() -> None:
    ctx = ssl.create_default_context()
    limits = httpx.Limits()
    assert proxy_mounts(proxy_settings_from_env({}), ctx, limits) == {}
    assert proxy_mounts(ProxySettings(http="http://p:1", no_proxy=("*",)), ctx, limits) == {}


def test_bypass_patterns() -> None:
    mounts = proxy_mounts(
        ProxySettings(https="http://p:1", no_proxy=(".cluster.local", "10.1.2.3", "10.0.0.0/8", "h:8080")),
        ssl.create_default_context(),
        httpx.Limits(),
    )
    assert set(mounts) == {"https://", "all://*cluster.local", "all://10.1.2.3", "all://*h"}
    assert mounts["all://10.1.2.3"] is None


def test_ca_bundle_path() -> None:
    assert [str(p) for p in ca_bundle_from_env({"CA_BUNDLE_FILE_PATH": "/etc/proxy/ca.crt"})] == [
        "/etc/proxy/ca.crt"
    ]
    assert ca_bundle_from_env({}) == ()
