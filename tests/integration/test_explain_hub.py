"""``dynamic-scoring explain`` reading the DynamicScorer and the current AddOnPlacementScore from the hub.

The scorer is a real HTTP process on loopback (the component tier's ``scorer_app.py``); the hub is
the session control plane.  The AddOnPlacementScore is shaped directly, as the agent writes it,
with an expired ``validUntil`` and an item the scorer no longer returns, so the comparison has
every kind of row; the test also checks that explain wrote nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dynamic_scoring.ctl.main import main
from dynamic_scoring.outbound.addresses import AGENT_ALLOW_CIDRS_ENV
from dynamic_scoring.outbound.secret_binding import ALLOWED_HOSTS_ANNOTATION, destination
from e2e.controlplane import ControlPlane
from e2e.kube import Client
from e2e.procs import wait_until
from tests.component.harness import ScorerProcess


@pytest.fixture(autouse=True)
def _loopback_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """``explain`` applies the agent's address policy; this test's scorers listen on 127.0.0.1."""
    monkeypatch.setenv(AGENT_ALLOW_CIDRS_ENV, "127.0.0.0/8")


REPO = Path(__file__).resolve().parents[2]
DS_V1A1 = "dynamic-scoring.open-cluster-management.io/v1alpha1"
APS_V1A1 = "cluster.open-cluster-management.io/v1alpha1"


@pytest.fixture(scope="module")
def hub(control_plane: ControlPlane) -> Client:
    assert control_plane.hub is not None
    client = Client(control_plane.hub.admin_kubeconfig, timeout=15)
    client.apply_yaml((REPO / "manifests" / "crds" / "dynamicscorers.yaml").read_text())

    def served() -> bool:
        try:
            client.items(DS_V1A1, "DynamicScorer", "default")
        except Exception:
            return False
        return True

    wait_until(served, timeout=30, what="the DynamicScorer CRD served")
    return client


@pytest.fixture
def spaces(hub: Client) -> Iterator[tuple[str, str]]:
    """A namespace for the DynamicScorer and one standing in for the cluster's, removed afterwards."""
    tag = uuid.uuid4().hex[:6]
    ns, cluster = f"ex-{tag}-ds", f"ex-{tag}-c1"
    for name in (ns, cluster):
        hub.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield ns, cluster
    for name in (ns, cluster):
        hub.delete("v1", "Namespace", name)


@pytest.fixture
def static_scorer(tmp_path: Path) -> Iterator[ScorerProcess]:
    proc = ScorerProcess("explain-scorer", tmp_path).start()
    yield proc
    proc.stop()


def test_explain_by_name_compares_with_the_score_on_the_hub_and_writes_nothing(
    control_plane: ControlPlane, hub: Client, static_scorer: ScorerProcess, spaces: tuple[str, str]
) -> None:
    assert control_plane.hub is not None
    ns, cluster = spaces
    try:
        spec: dict[str, Any] = {
            "configSyncMode": "None",
            "scoreDimensionFormat": "${app}-${device}",
            "scoring": {"host": static_scorer.base, "path": "/static/scoring", "params": {"name": "gpu_fit"}},
        }
        scorer_obj = {
            "apiVersion": DS_V1A1,
            "kind": "DynamicScorer",
            "metadata": {"name": "gpu", "namespace": ns},
        }
        hub.apply({**scorer_obj, "spec": spec})
        aps = hub.apply(
            {
                "apiVersion": APS_V1A1,
                "kind": "AddOnPlacementScore",
                "metadata": {"name": "gpu-fit", "namespace": cluster},
            }
        )
        expired = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
        aps = hub.patch_status(
            aps,
            {
                "validUntil": expired,
                "scores": [{"name": "app01-all", "value": 70}, {"name": "old", "value": 5}],
            },
        )
        before = aps["metadata"]["resourceVersion"]

        kubeconfig = str(control_plane.hub.admin_kubeconfig)
        result = CliRunner().invoke(
            main, ["explain", "gpu", "-n", ns, "--cluster", cluster, "--kubeconfig", kubeconfig, "-o", "json"]
        )
        assert result.exit_code == 0, result.output
        doc = json.loads(result.output)["addOnPlacementScore"]
        assert doc["hubRead"] is True and doc["hubExpired"] is True and doc["hubValidUntil"] == expired
        rows = {r["name"]: (r["hub"], r["wouldWrite"], r["change"]) for r in doc["items"]}
        assert rows == {
            "app01-all": (70, 80, "changed"),
            "app02-all": (None, 80, "new"),
            "app01-3g.48gb": (None, 60, "new"),
            "app02-3g.48gb": (None, 55, "new"),
            "old": (5, None, "gone"),
        }
        text = CliRunner().invoke(
            main, ["explain", "gpu", "-n", ns, "--cluster", cluster, "--kubeconfig", kubeconfig]
        )
        assert "expired: Placement ignores these scores" in text.output, text.output
        after = hub.get(APS_V1A1, "AddOnPlacementScore", "gpu-fit", cluster)
        assert after["metadata"]["resourceVersion"] == before

        # A failing scorer: the agent would write only the condition, and the hub's scores stay.
        spec["scoring"]["path"] = "/status/500/scoring"
        hub.apply({**scorer_obj, "spec": spec})
        failed = CliRunner().invoke(
            main, ["explain", "gpu", "-n", ns, "--cluster", cluster, "--kubeconfig", kubeconfig, "-o", "json"]
        )
        assert failed.exit_code == 1, failed.output
        kept = json.loads(failed.output)
        assert kept["failed"]["stage"] == "score" and kept["failed"]["reason"] == "ScorerHTTPError"
        assert kept["addOnPlacementScore"]["conditionOnly"]["reason"] == "ScorerHTTPError"
        assert [(r["name"], r["hub"], r["change"]) for r in kept["addOnPlacementScore"]["items"]] == [
            ("app01-all", 70, "kept"),
            ("old", 5, "kept"),
        ]

        # A referenced Secret not given by --token-file is read from the cluster, as the agent reads it.
        key, token = uuid.uuid4().hex, f"tok-{uuid.uuid4().hex}"
        static_scorer.expect(key, {"Authorization": f"Bearer {token}"})
        secret: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "scorer-token", "namespace": ns},
            "stringData": {"token": token},
        }
        hub.apply(secret)
        auth = {"tokenSecretRef": {"name": "scorer-token", "key": "token"}}
        hub.apply(
            {
                "apiVersion": DS_V1A1,
                "kind": "DynamicScorer",
                "metadata": {"name": "authd", "namespace": ns},
                "spec": {
                    "scoring": {"host": static_scorer.base, "path": f"/auth/{key}/scoring", "auth": auth}
                },
            }
        )
        args = ["explain", "authd", "-n", ns, "--cluster", cluster, "--kubeconfig", kubeconfig]
        from_cluster = [*args, "--cluster-kubeconfig", kubeconfig, "--secret-namespace", ns]
        # Not bound to the scorer's host: refused as the agent refuses it, and nothing is sent.
        unbound = CliRunner().invoke(main, from_cluster)
        assert unbound.exit_code == 1, unbound.output
        assert "SecretNotBound" in unbound.output and ALLOWED_HOSTS_ANNOTATION in unbound.output
        assert static_scorer.requests(f"/auth/{key}/") == [] and token not in unbound.output
        secret["metadata"]["annotations"] = {ALLOWED_HOSTS_ANNOTATION: destination(static_scorer.base).entry}
        hub.apply(secret)
        read = CliRunner().invoke(main, from_cluster)
        assert read.exit_code == 0, read.output
        assert "1 result(s)" in read.output and token not in read.output

        missing = CliRunner().invoke(
            main, ["explain", "nope", "-n", ns, "--cluster", cluster, "--kubeconfig", kubeconfig]
        )
        assert missing.exit_code == 1 and f"DynamicScorer {ns}/nope not found" in missing.output
    finally:
        hub.delete(DS_V1A1, "DynamicScorer", "gpu", ns)
        hub.delete(DS_V1A1, "DynamicScorer", "authd", ns)
        hub.delete(APS_V1A1, "AddOnPlacementScore", "gpu-fit", cluster)


def test_explain_shows_what_stabilization_would_publish_from_the_scores_on_the_hub(
    control_plane: ControlPlane, hub: Client, static_scorer: ScorerProcess, spaces: tuple[str, str]
) -> None:
    """One cycle has no history: explain starts the windows from the hub's values, as a starting agent.

    The static scorer answers app01-all 80, app02-all 80, app01-3g.48gb 60, app02-3g.48gb 55.
    """
    assert control_plane.hub is not None
    ns, cluster = spaces
    try:
        hub.apply(
            {
                "apiVersion": DS_V1A1,
                "kind": "DynamicScorer",
                "metadata": {"name": "gpu", "namespace": ns},
                "spec": {
                    "configSyncMode": "None",
                    "scoreDimensionFormat": "${app}-${device}",
                    "scoring": {
                        "host": static_scorer.base,
                        "path": "/static/scoring",
                        "params": {"name": "gpu_fit"},
                    },
                    "stabilization": {"tolerance": 3, "riseWindowSeconds": 300},
                },
            }
        )
        aps = hub.apply(
            {
                "apiVersion": APS_V1A1,
                "kind": "AddOnPlacementScore",
                "metadata": {"name": "gpu-fit", "namespace": cluster},
            }
        )
        valid = (dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
        scores = {"app01-all": 70, "app02-all": 90, "app01-3g.48gb": 59}
        hub.patch_status(
            aps, {"validUntil": valid, "scores": [{"name": k, "value": v} for k, v in scores.items()]}
        )
        kubeconfig = str(control_plane.hub.admin_kubeconfig)
        args = ["explain", "gpu", "-n", ns, "--cluster", cluster, "--kubeconfig", kubeconfig]
        result = CliRunner().invoke(main, [*args, "-o", "json"])
        assert result.exit_code == 0, result.output
        rows = {r["name"]: r for r in json.loads(result.output)["addOnPlacementScore"]["items"]}
        # a rise is held for its window: the hub's 70 stays, the raw 80 is said
        assert (rows["app01-all"]["wouldWrite"], rows["app01-all"]["raw"]) == (70, 80)
        assert rows["app01-all"]["stabilization"] == "rising, held 0 of 300 s"
        # a fall goes out at once (fallWindowSeconds 0)
        assert rows["app02-all"]["wouldWrite"] == 80 and "stabilization" not in rows["app02-all"]
        # inside the tolerance: not published
        assert (rows["app01-3g.48gb"]["wouldWrite"], rows["app01-3g.48gb"]["change"]) == (59, "same")
        assert rows["app01-3g.48gb"]["stabilization"] == "within tolerance (raw 60, published 59)"
        # a new item is published as it is
        assert rows["app02-3g.48gb"]["wouldWrite"] == 55 and "stabilization" not in rows["app02-3g.48gb"]
        text = CliRunner().invoke(main, args)
        assert "(raw 80: rising, held 0 of 300 s, by stabilization)" in text.output, text.output
    finally:
        hub.delete(DS_V1A1, "DynamicScorer", "gpu", ns)
        hub.delete(APS_V1A1, "AddOnPlacementScore", "gpu-fit", cluster)
