"""kube-rbac-proxy's config document and command line, as e2e/rbacproxy.py writes them."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from e2e.pki import CertificateAuthority
from e2e.procs import Proc
from e2e.rbacproxy import RESOURCE_ATTRIBUTE_KEYS, RbacProxy, authorization_config, proxy_argv


def test_every_request_is_authorized_as_the_given_resource_attributes() -> None:
    attrs = {"namespace": "monitoring", "apiVersion": "v1", "resource": "namespaces"}
    assert authorization_config(attrs) == {"authorization": {"resourceAttributes": attrs}}


def test_a_verb_is_refused_because_the_proxy_takes_it_from_the_http_method() -> None:
    with pytest.raises(ValueError, match="HTTP method") as refused:
        authorization_config({"resource": "namespaces", "verb": "get"})
    assert all(key in str(refused.value) for key in RESOURCE_ATTRIBUTE_KEYS)


def test_an_unknown_attribute_is_refused_rather_than_ignored() -> None:
    with pytest.raises(ValueError, match="resourcce"):
        authorization_config({"resourcce": "namespaces"})


def _argv(*, upstream: str = "http://127.0.0.1:9090", audiences: tuple[str, ...] = ()) -> list[str]:
    return proxy_argv(
        Path("/bin/kube-rbac-proxy"),
        port=4443,
        upstream=upstream,
        kubeconfig=Path("/k/admin.kubeconfig"),
        config_file=Path("/w/krp.yaml"),
        cert_file=Path("/w/tls.crt"),
        key_file=Path("/w/tls.key"),
        audiences=audiences,
    )


def test_it_listens_on_loopback_with_tls_and_asks_the_given_apiserver() -> None:
    argv = _argv()
    assert argv[0] == "/bin/kube-rbac-proxy"
    assert "--secure-listen-address=127.0.0.1:4443" in argv
    assert "--upstream=http://127.0.0.1:9090" in argv
    assert "--kubeconfig=/k/admin.kubeconfig" in argv
    assert "--config-file=/w/krp.yaml" in argv
    assert {"--tls-cert-file=/w/tls.crt", "--tls-private-key-file=/w/tls.key"} <= set(argv)
    assert not any(a.startswith(("--auth-token-audiences", "--allow-paths", "--ignore-paths")) for a in argv)


def test_audiences_are_required_only_when_given() -> None:
    assert "--auth-token-audiences=prometheus,thanos" in _argv(audiences=("prometheus", "thanos"))


def test_the_upstream_must_be_an_http_url() -> None:
    with pytest.raises(ValueError, match="upstream"):
        _argv(upstream="127.0.0.1:9090")


def test_a_client_trusts_the_proxys_own_ca(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path / "pki", "kube-rbac-proxy-ca")
    never_started = Proc("kube-rbac-proxy", ["true"], tmp_path / "log")
    proxy = RbacProxy("https://127.0.0.1:1", ca.cert_pem, ca.cert_path, never_started)
    context = proxy.ssl_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert [c["subject"] for c in context.get_ca_certs()] == [((("commonName", "kube-rbac-proxy-ca"),),)]
    assert proxy.ca_path.read_bytes() == proxy.ca_pem
    with proxy:  # stopping one that never started is a no-op
        pass
