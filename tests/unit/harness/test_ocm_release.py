"""Choosing the OCM release the harness runs, and wiring v1.3.1's webhooks to loopback URLs."""

from __future__ import annotations

import pytest
import yaml

from e2e.ocm_webhooks import HOOKS, configurations, render_crd
from e2e.procs import _proc_net_address
from e2e.tools import DEFAULT_OCM_VERSION, OCM_VERSION_ENV, RELEASES, ToolsError, ocm_release

CRD_TEMPLATE = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: managedclusteraddons.addon.open-cluster-management.io
spec:
  conversion:
    strategy: Webhook
    webhook:
      clientConfig:
        caBundle: {{ .AddonAPIServiceCABundle }}
        service:
          name: cluster-manager-addon-webhook
          namespace: {{ .ClusterManagerNamespace }}
          path: /convert
          port: 9443
      conversionReviewVersions:
      - v1
      - v1beta1
  group: addon.open-cluster-management.io
"""


def test_the_release_comes_from_the_argument_then_the_environment_then_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(OCM_VERSION_ENV, raising=False)
    assert ocm_release().version == DEFAULT_OCM_VERSION
    monkeypatch.setenv(OCM_VERSION_ENV, "v1.2.1")
    assert ocm_release().version == "v1.2.1"
    assert ocm_release("v1.3.1").version == "v1.3.1"


def test_an_unknown_release_names_the_ones_there_are(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(OCM_VERSION_ENV, "v9.9.9")
    with pytest.raises(ToolsError) as refused:
        ocm_release()
    assert "v9.9.9" in str(refused.value) and all(v in str(refused.value) for v in RELEASES)


def test_only_the_newer_release_runs_webhooks() -> None:
    assert RELEASES["v1.3.1"].webhooks and RELEASES["v1.3.1"].components == ("ocm13",)
    assert not RELEASES["v1.2.1"].webhooks


def test_the_conversion_webhook_is_called_at_a_url_with_the_hub_ca() -> None:
    doc = yaml.safe_load(render_crd(CRD_TEMPLATE, "https://127.0.0.1:1234/convert", "Q0E="))
    webhook = doc["spec"]["conversion"]["webhook"]
    assert webhook["clientConfig"] == {"url": "https://127.0.0.1:1234/convert", "caBundle": "Q0E="}
    assert webhook["conversionReviewVersions"] == ["v1", "v1beta1"]


def test_a_crd_without_conversion_is_left_as_it_is() -> None:
    plain = "apiVersion: v1\nkind: CustomResourceDefinition\nmetadata: {name: x}\nspec: {}\n"
    assert yaml.safe_load(render_crd(plain, "https://127.0.0.1:1/convert", "Q0E=")) == yaml.safe_load(plain)


def test_a_placeholder_the_harness_does_not_know_is_refused() -> None:
    with pytest.raises(ValueError, match="AddonWebhookPort"):
        render_crd(
            CRD_TEMPLATE.replace("9443", "{{ .AddonWebhookPort }}"), "https://127.0.0.1:1/convert", "Q0E="
        )


def test_every_admission_webhook_points_at_its_server_on_loopback() -> None:
    urls = {"registration": "https://127.0.0.1:1001", "work": "https://127.0.0.1:1002"}
    configs = configurations(urls, "Q0E=")
    assert len(configs) == len(HOOKS) == 4
    by_name = {c["metadata"]["name"]: c["webhooks"][0] for c in configs}
    mutator = by_name["managedclustermutators.admission.cluster.open-cluster-management.io"]
    assert mutator["clientConfig"]["url"] == (
        "https://127.0.0.1:1001/mutate-cluster-open-cluster-management-io-v1-managedcluster"
    )
    work = by_name["manifestworkvalidators.admission.work.open-cluster-management.io"]
    assert work["clientConfig"]["url"].startswith("https://127.0.0.1:1002/")
    for hook in by_name.values():
        assert hook["failurePolicy"] == "Fail" and hook["clientConfig"]["caBundle"] == "Q0E="
        assert "service" not in hook["clientConfig"]


@pytest.mark.parametrize(
    ("hex_addr", "text"),
    [
        ("0100007F", "127.0.0.1"),
        ("00000000", "0.0.0.0"),
        ("00000000000000000000000001000000", "::1"),
        ("0000000000000000FFFF00000100007F", "127.0.0.1"),  # IPv4-mapped, as a dual-stack socket shows it
        ("00000000000000000000000000000000", "::"),
    ],
)
def test_proc_net_addresses_read_as_text(hex_addr: str, text: str) -> None:
    assert _proc_net_address(hex_addr) == text
