"""The agent as a real process: ConfigMap in, scores on the hub, Lease renewed, clean SIGTERM.

It runs against cluster2 of the local control plane with the least-privilege hub identity from
`templates/hub/agent-rbac.yaml.j2`, cluster2's real Prometheus (fed by the load exporter) and a
real scorer process.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import sys
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import jinja2
import yaml

from dynamic_scoring.kube.api import KubeAPI, NotFound
from e2e.controlplane import ControlPlane
from e2e.kube import Kubectl
from e2e.pki import write_kubeconfig
from e2e.procs import Proc, free_port, wait_until
from tests.component.harness import ScorerProcess

REPO = Path(__file__).resolve().parents[2]
NS = "open-cluster-management-agent-addon"
APS = "/apis/cluster.open-cluster-management.io/v1alpha1/namespaces/cluster2/addonplacementscores/{}"
QUERY = 'sum by (node, namespace, pod) (rate(container_cpu_usage_seconds_total{namespace="demo"}[30s]))'


def _hub_identity(cp: ControlPlane, tmp: Path) -> Path:
    assert cp.hub is not None and cp.tools is not None
    template = jinja2.Template((REPO / "templates/hub/agent-rbac.yaml.j2").read_text())
    Kubectl(cp.tools.kubectl, cp.hub.admin_kubeconfig).apply(
        template.render(
            cluster_name="cluster2", addon_name="dynamic-scoring", score_names=["cpu-load", "cpu-count"]
        )
    )
    group = "system:open-cluster-management:cluster:cluster2:addon:dynamic-scoring"
    cert = cp.hub.ca.issue(
        f"proc-agent-{uuid.uuid4().hex[:6]}",
        common_name=f"{group}:agent:proc",
        organizations=(group,),
        client=True,
    )
    return write_kubeconfig(
        tmp / "hub" / "kubeconfig", server=cp.hub.server, ca_pem=cp.hub.ca.cert_pem, user="agent", client=cert
    )


def _summary(score: str, endpoint: str, prometheus: str) -> dict[str, Any]:
    return {
        "name": f"scorer-{score}",
        "scoreName": score,
        "sourceType": "Prometheus",
        "sourceEndpoint": f"{prometheus}/api/v1/query_range",
        "sourceQuery": QUERY,
        "sourceRange": 60,
        "sourceStep": 5,
        "scoringEndpoint": endpoint,
        "scoringInterval": 5,
        "location": "Internal",
        "scoreDestination": "AddOnPlacementScore",
        "scoreDimensionFormat": "${namespace}-${pod}",
        "scoreNormalization": {"min": 0, "max": 2},
    }


def test_agent_process_scores_cluster_and_stops_cleanly(control_plane: ControlPlane, tmp_path: Path) -> None:
    assert control_plane.spoke2 is not None and control_plane.tools is not None
    spoke = Kubectl(control_plane.tools.kubectl, control_plane.spoke2.admin_kubeconfig)
    hub_admin = KubeAPI(control_plane.hub.admin_kubeconfig)  # type: ignore[union-attr]
    prometheus = control_plane.clusters["cluster2"].prometheus_url
    scorer = ScorerProcess("proc-scorer", tmp_path).start()
    port = free_port()
    agent = Proc(
        "agent",
        [
            str(Path(sys.executable).parent / "dynamic-scoring-agent"),
            f"--hub-kubeconfig={_hub_identity(control_plane, tmp_path)}",
            f"--managed-kubeconfig={control_plane.spoke2.admin_kubeconfig}",
            "--cluster-name=cluster2",
            f"--addon-namespace={NS}",
            f"--metrics-bind-address=127.0.0.1:{port}",
            "--lease-renew-seconds=2",
            "--allow-cidr=127.0.0.0/8",  # the test Prometheus and scorers listen on 127.0.0.1
        ],
        tmp_path / "agent.log",
    )
    try:
        agent.start()
        summaries = [
            _summary("cpu_load", scorer.url("/mean/scoring"), prometheus),
            _summary("cpu_count", scorer.url("/count/scoring"), prometheus),
        ]
        cm = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "dynamic-scoring-config", "namespace": NS},
            "data": {"summaries": json.dumps(summaries)},
        }
        spoke.apply(yaml.safe_dump(cm))

        def scores(name: str) -> dict[str, int] | None:
            try:
                status = hub_admin.request("GET", APS.format(name)).get("status") or {}
            except NotFound:
                return None
            items = {s["name"]: s["value"] for s in status.get("scores") or []}
            return items if len(items) >= 2 else None

        load = wait_until(
            lambda: scores("cpu-load"), timeout=90, what="cpu-load scores on the hub", proc=agent
        )
        # cluster2's demo pods use 1.2 and 1.6 cores; normalised from [0, 2] cores to [0, 100]
        assert set(load) >= {"demo-app-1", "demo-app-2"}
        assert 0 < load["demo-app-1"] < load["demo-app-2"] <= 100

        def condition_true() -> bool:
            status = hub_admin.request("GET", APS.format("cpu-load"))["status"]
            return bool(status["conditions"][0]["status"] == "True" and status["validUntil"])

        wait_until(
            condition_true,
            timeout=30,
            what="cpu-load's APS with conditions[0].status True and a validUntil",
            proc=agent,
        )

        def scrape(path: str) -> tuple[int, str]:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
                return int(resp.status), resp.read().decode()

        # one raw-score series per result, labelled with this cluster, the result's pod and the score name
        pattern = (
            r'^dynamic_score\{[^}]*ds_cluster="cluster2",[^}]*ds_pod="([^"]*)",ds_score_name="cpu_load"\} '
        )

        def exported() -> bool:
            text = scrape("/metrics")[1]
            return {"app-1", "app-2"} <= set(re.findall(pattern, text, re.M)) and (
                'dynamic_scoring_requests_total{score_name="cpu_load",status="success"}' in text
            )

        wait_until(
            exported,
            timeout=30,
            what="/metrics with dynamic_score series for ds_pod app-1 and app-2 of cpu_load and "
            "dynamic_scoring_requests_total{score_name=cpu_load,status=success}",
            proc=agent,
        )
        wait_until(lambda: scrape("/readyz")[0] == 200, timeout=30, what="/readyz 200", proc=agent)

        spoke_api = KubeAPI(control_plane.spoke2.admin_kubeconfig)
        lease = wait_until(
            lambda: spoke_api.request(
                "GET", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/dynamic-scoring"
            ),
            timeout=15,
            what="the agent's health Lease",
            proc=agent,
        )
        assert lease["spec"]["leaseDurationSeconds"] == 60

        # a scorer removed from the ConfigMap: its worker stops and its APS goes away
        cm["data"] = {"summaries": json.dumps(summaries[:1])}
        spoke.apply(yaml.safe_dump(cm))
        wait_until(lambda: scores("cpu-count") is None, timeout=30, what="cpu-count APS deleted", proc=agent)
        assert scores("cpu-load")

        # SIGTERM ends the process on its own, cleanly, within its shutdown budget
        agent.send_signal(signal.SIGTERM)
        # The agent bounds its own shutdown (SHUTDOWN_SECONDS, 4 s) and says so in its log when the
        # bound is exceeded (checked below); how long this thread waits is no measure of that.  The
        # 30 s wait has 26 s of margin over that budget for a loaded machine, and still fails an
        # agent that does not exit, or whose exit waits for a blocked thread (a watch long-poll
        # or the default executor's shutdown take minutes).
        code = agent.wait(timeout=30)
        assert code == 0  # exited by itself through its SIGTERM handler (a default SIGTERM is -15)
        log = agent.log_path.read_text(errors="replace")
        assert re.search(r" INFO dynamic_scoring\.agent: stopping$", log, re.M), log[-3000:]
        assert "shutdown did not finish within" not in log, log[-3000:]
    finally:
        agent.stop()
        scorer.stop()
        spoke.run("delete", "configmap", "dynamic-scoring-config", "-n", NS, "--ignore-not-found")
        for name in ("cpu-load", "cpu-count"):
            with contextlib.suppress(NotFound):
                hub_admin.request("DELETE", APS.format(name))
