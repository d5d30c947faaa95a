"""A system install namespace end to end: refused on the MCA, and the running agent is left alone.

The installation is the addon lifecycle story's own fixture (`kubectl apply -k manifests/`, two
manager replicas, `clusteradm addon enable` on cluster1 and cluster2, the delivered agents running).
Pointing cluster1's ManagedClusterAddOn at `kube-system` must not move the agent there: the manager
reports `ManifestApplied=False` naming the field and the namespace, with a Warning Event, the deploy
work stays as it was, the agent keeps running, and `status.namespace` (where the klusterlet keeps the
agent's hub kubeconfig) does not move.  Pointing it back clears the condition.
"""

from __future__ import annotations

from typing import Any

from e2e.procs import wait_until
from e2e.tests.test_addon_lifecycle import (  # the lifecycle story's installation, reused as is
    ADDON,
    ADDON_V1A1,
    CLUSTERS,
    INSTALL_NS,
    Env,
    conditions,
    env,
    status_of,
)

__all__ = ["env"]  # the fixture, imported so this module gets its own installation


def set_install_namespace(env: Env, cluster: str, namespace: str) -> None:
    env.hub.api.request(
        "PATCH",
        env.hub.resource(ADDON_V1A1, "ManagedClusterAddOn").path(cluster, ADDON),
        body={"spec": {"installNamespace": namespace}},
        content_type="application/merge-patch+json",
    )


def test_kube_system_is_refused_and_the_running_agent_stays_where_it_is(env: Env) -> None:
    cluster = "cluster1"
    wait_until(
        lambda: (
            all(status_of(env.mca(c), "ManifestApplied") == "True" for c in CLUSTERS)
            and env.agent_pod(cluster) is not None
        ),
        timeout=120,
        what="the addon applied on both clusters and cluster1's agent running",
    )
    before = env.work(cluster)
    assert before is not None
    pod = env.agent_pod(cluster)
    assert pod is not None
    set_install_namespace(env, cluster, "kube-system")
    try:

        def refused() -> dict[str, Any] | None:
            applied = conditions(env.mca(cluster)).get("ManifestApplied", {})
            message = str(applied.get("message", ""))
            if applied.get("status") == "False" and "'kube-system'" in message:
                return applied
            return None

        applied = wait_until(refused, timeout=60, what="ManifestApplied=False naming kube-system")
        assert "ManagedClusterAddOn spec.installNamespace" in applied["message"]
        wait_until(
            lambda: any(
                "kube-system" in e["message"] for e in env.events(cluster, "InstallNamespaceNotAllowed")
            ),
            timeout=30,
            what="the InstallNamespaceNotAllowed Event",
        )
        work = env.work(cluster)
        assert work is not None and work["metadata"]["generation"] == before["metadata"]["generation"]
        assert (env.mca(cluster) or {})["status"]["namespace"] == INSTALL_NS
        now = env.agent_pod(cluster)
        assert now is not None and (now["pod"], now["pid"]) == (pod["pod"], pod["pid"]), "the agent moved"
        assert status_of(env.mca("cluster2"), "ManifestApplied") == "True"
    finally:
        set_install_namespace(env, cluster, INSTALL_NS)
    wait_until(
        lambda: status_of(env.mca(cluster), "ManifestApplied") == "True",
        timeout=60,
        what="ManifestApplied=True again in the default namespace",
    )
