"""One resource the hub cannot list holds back only the controllers that use it.

Against the local control plane's hub kube-apiserver: a controller on a CRD that is not
installed (404) or on a resource its ServiceAccount may not list (403) waits, says why in
`/readyz`, the metrics and a log line, while a controller that does not need it reconciles;
installing the CRD or granting the list starts the waiting controller with no restart.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from dynamic_scoring.addon.controllers import HubContext
from dynamic_scoring.addon.manager import Manager, ManagerOptions
from dynamic_scoring.kube.api import KubeAPI, NotFound
from dynamic_scoring.kube.controller import Controller, ControllerManager
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.resources import (
    CONFIGMAPS,
    ROLE_BINDINGS,
    ROLES,
    SECRETS,
    SERVICE_ACCOUNTS,
    Resource,
)
from e2e.controlplane import ControlPlane
from e2e.pki import write_kubeconfig
from e2e.procs import wait_until

CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", namespaced=False
)


class Recorder:
    """A reconcile that remembers every key it was given (thread-safe)."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, key: str) -> None:
        with self.lock:
            self.keys.append(key)

    def seen(self, key: str) -> bool:
        with self.lock:
            return key in self.keys


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def widget_crd(group: str) -> JSON:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }


def established(api: KubeAPI, name: str) -> bool:
    crd = api.request("GET", CRDS.path(None, name))
    return any(
        c.get("type") == "Established" and c.get("status") == "True"
        for c in (crd.get("status") or {}).get("conditions") or []
    )


def test_a_missing_crd_holds_back_only_its_controller_and_readyz_names_it_until_it_is_installed(
    api: KubeAPI, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    group = f"partial-{uuid.uuid4().hex[:8]}.example.com"
    widgets = Resource(group, "v1", "widgets", "Widget", namespaced=True)
    watch_name = f"widgets.{group} ns={namespace}"
    crd = widget_crd(group)
    crd_name = crd["metadata"]["name"]
    plain, needs_crd = Recorder(), Recorder()

    def factory(ctx: HubContext) -> list[Controller]:
        configmaps = ctx.manager.informer(CONFIGMAPS, namespace=namespace)
        plain_controller = Controller("plain", plain, resync_seconds=0)
        plain_controller.watch(configmaps)
        crd_controller = Controller("needs-crd", needs_crd, resync_seconds=0)
        crd_controller.watch(ctx.manager.informer(widgets, namespace=namespace))
        crd_controller.watch(configmaps)  # synced, but the controller still waits for the widgets
        return [plain_controller, crd_controller]

    options = ManagerOptions(namespace=namespace, bind_address="127.0.0.1:0", leader_elect=False)
    manager = Manager(api, options, factories=[factory])
    port = manager.serve()
    stop = threading.Event()
    thread = threading.Thread(target=manager.run, args=(stop,), daemon=True)
    caplog.set_level(logging.WARNING, logger="dynamic_scoring.kube.informer")
    thread.start()
    try:
        api.request("POST", CONFIGMAPS.path(namespace), body={"metadata": {"name": "one"}})
        wait_until(
            lambda: plain.seen(f"{namespace}/one"),
            timeout=60,
            what="the controller not needing the CRD reconciles",
        )

        def not_ready_with_the_404() -> str | None:
            status, body = get(port, "/readyz")
            return body if status == 503 and "(404" in body else None

        body = wait_until(not_ready_with_the_404, timeout=30, what="/readyz 503 naming the 404")
        lines = body.splitlines()
        assert lines[0] == "leading; not ready:"
        assert f"controller needs-crd: waiting for {watch_name}" in lines
        assert not any(line.startswith("controller plain") for line in lines)
        widget_line = next(line for line in lines if line.startswith(f"watch {watch_name}: "))
        assert f"the apiserver does not serve {group}/v1 widgets (404" in widget_line
        remedy = "install the CustomResourceDefinition of Widget"  # the manager's, for a foreign group
        assert widget_line.endswith(remedy), widget_line
        assert get(port, "/healthz") == (200, "ok\n")  # liveness: a restart would not install a CRD
        waiting_metrics = [
            'dynamic_scoring_controller_running{controller="plain"} 1.0',
            'dynamic_scoring_controller_running{controller="needs-crd"} 0.0',
            f'dynamic_scoring_watch_synced{{resource="{watch_name}"}} 0.0',
            f'dynamic_scoring_watch_synced{{resource="configmaps ns={namespace}"}} 1.0',
        ]
        wait_until(
            lambda: all(line in get(port, "/metrics")[1] for line in waiting_metrics),
            timeout=30,
            what=f"/metrics with {waiting_metrics}",
        )
        assert needs_crd.keys == []  # its configmap key is queued, not reconciled on a half-filled world
        wait_until(
            lambda: any(
                r.levelno == logging.WARNING
                and f"list of {watch_name} failed" in r.getMessage()
                and r.getMessage().endswith(remedy)
                for r in caplog.records
            ),
            timeout=10,
            what="a WARNING naming the watch and the remedy",
        )

        api.request("POST", CRDS.path(), body=crd)
        wait_until(lambda: established(api, crd_name), timeout=30, what="CRD established")
        installed = time.monotonic()
        api.request(
            "POST",
            widgets.path(namespace),
            body={"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w1"}},
        )
        wait_until(
            lambda: needs_crd.seen(f"{namespace}/w1"), timeout=60, what="the waiting controller reconciles"
        )
        print(
            f"measured: the waiting controller reconciled {time.monotonic() - installed:.1f}s after the CRD"
        )
        wait_until(  # the key queued while it waited
            lambda: needs_crd.seen(f"{namespace}/one"), timeout=30, what="the queued key reconciled too"
        )
        wait_until(lambda: get(port, "/readyz") == (200, "leading\n"), timeout=30, what="ready")
        running_metrics = [
            'dynamic_scoring_controller_running{controller="needs-crd"} 1.0',
            f'dynamic_scoring_watch_synced{{resource="{watch_name}"}} 1.0',
        ]
        wait_until(
            lambda: all(line in get(port, "/metrics")[1] for line in running_metrics),
            timeout=30,
            what=f"/metrics with {running_metrics}",
        )
    finally:
        stop.set()
        thread.join(30)
        with contextlib.suppress(NotFound):
            api.request("DELETE", CRDS.path(None, crd_name))
    assert not thread.is_alive()
    assert manager.failure is None


def test_a_forbidden_list_holds_back_only_its_controller_until_list_and_watch_are_granted(
    control_plane: ControlPlane, api: KubeAPI, namespace: str, tmp_path: Path
) -> None:
    hub = control_plane.hub
    assert hub is not None
    account = "partial-reader"
    api.request("POST", SERVICE_ACCOUNTS.path(namespace), body={"metadata": {"name": account}})

    def grant(resource: str) -> None:
        name = f"read-{resource}"
        rule = {"apiGroups": [""], "resources": [resource], "verbs": ["get", "list", "watch"]}
        api.request("POST", ROLES.path(namespace), body={"metadata": {"name": name}, "rules": [rule]})
        api.request(
            "POST",
            ROLE_BINDINGS.path(namespace),
            body={
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
            },
        )

    grant("configmaps")
    token = api.request(
        "POST",
        SERVICE_ACCOUNTS.path(namespace, account, "token"),
        body={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 600},
        },
    )["status"]["token"]
    kubeconfig = write_kubeconfig(
        tmp_path / "reader.kubeconfig",
        server=hub.server,
        ca_pem=hub.ca.cert_pem,
        user=account,
        token=str(token),
    )
    registry = CollectorRegistry()
    manager = ControllerManager(KubeAPI(kubeconfig), metrics_registry=registry)
    plain, needs_secrets = Recorder(), Recorder()
    configmaps = manager.informer(CONFIGMAPS, namespace=namespace)
    secrets = manager.informer(SECRETS, namespace=namespace)
    plain_controller = Controller("plain", plain, resync_seconds=0)
    plain_controller.watch(configmaps)
    secret_controller = Controller("needs-secrets", needs_secrets, resync_seconds=0)
    secret_controller.watch(secrets)
    manager.add(plain_controller)
    manager.add(secret_controller)

    def sample(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    stop = threading.Event()
    thread = threading.Thread(target=manager.run, args=(stop,), daemon=True)
    thread.start()
    try:
        api.request("POST", CONFIGMAPS.path(namespace), body={"metadata": {"name": "one"}})
        wait_until(
            lambda: plain.seen(f"{namespace}/one"), timeout=60, what="the allowed controller reconciles"
        )
        wait_until(lambda: secrets.problem and "403" in secrets.problem, timeout=30, what="the 403 recorded")
        expected_problems = [
            f"controller needs-secrets: waiting for secrets ns={namespace}",
            f"watch secrets ns={namespace}: not synced: list failed: 403 forbidden; "
            f"grant list and watch on secrets in namespace {namespace} to this identity",
        ]
        wait_until(
            lambda: all(p in manager.problems() for p in expected_problems),
            timeout=30,
            what=f"the problems {expected_problems}",
        )
        assert not manager.ready()
        assert manager.running("plain") and not manager.running("needs-secrets")
        assert sample("dynamic_scoring_controller_running", controller="needs-secrets") == 0.0
        assert sample("dynamic_scoring_watch_synced", resource=f"secrets ns={namespace}") == 0.0
        assert (sample("dynamic_scoring_watch_errors_total", resource=f"secrets ns={namespace}") or 0) >= 1
        assert needs_secrets.keys == []

        grant("secrets")
        api.request(
            "POST", SECRETS.path(namespace), body={"metadata": {"name": "s1"}, "stringData": {"k": "v"}}
        )
        wait_until(
            lambda: needs_secrets.seen(f"{namespace}/s1"), timeout=60, what="the controller runs once granted"
        )
        wait_until(manager.ready, timeout=30, what="ready once every controller runs")
        wait_until(
            lambda: (
                sample("dynamic_scoring_controller_running", controller="needs-secrets") == 1.0
                and sample("dynamic_scoring_watch_synced", resource=f"secrets ns={namespace}") == 1.0
            ),
            timeout=30,
            what="dynamic_scoring_controller_running{needs-secrets} 1.0 and watch_synced{secrets} 1.0",
        )
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive()
    assert not manager.ready() and not manager.running("plain")
