"""The informer against the hub's real kube-apiserver: list, watch, 410 relist, reconnect."""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamic_scoring.kube.api import Gone, KubeAPI
from dynamic_scoring.kube.informer import Informer, WatchEvent
from dynamic_scoring.kube.metrics import ControllerMetrics
from dynamic_scoring.kube.resources import CONFIGMAPS, Resource
from dynamic_scoring.runtime.backoff import Backoff
from e2e.controlplane import ControlPlane, compact_etcd
from e2e.procs import wait_until


def hub_api(cp: ControlPlane) -> KubeAPI:
    assert cp.hub is not None
    return KubeAPI(cp.hub.admin_kubeconfig)


def cm(namespace: str, name: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "labels": {"t": "1"}}, "data": data}


class Recorder:
    def __init__(self) -> None:
        self.events: list[WatchEvent] = []
        self.lock = threading.Lock()

    def __call__(self, event: WatchEvent) -> None:
        with self.lock:
            self.events.append(event)

    def seen(self, type_: str, name: str) -> WatchEvent | None:
        with self.lock:
            for e in self.events:
                if e.type == type_ and e.obj["metadata"]["name"] == name:
                    return e
        return None

    def names(self) -> list[tuple[str, str]]:
        with self.lock:
            return [(e.type, e.obj["metadata"]["name"]) for e in self.events]


def test_list_then_watch_adds_modifies_and_deletes(control_plane: ControlPlane, namespace: str) -> None:
    api = hub_api(control_plane)
    api.request("POST", CONFIGMAPS.path(namespace), body=cm(namespace, "before", a="1"))
    api.request("POST", CONFIGMAPS.path(namespace), body={"metadata": {"name": "unlabelled"}})
    informer = Informer(api, CONFIGMAPS, namespace=namespace, label_selector="t=1")
    rec = Recorder()
    informer.add_handler(rec)
    informer.start()
    try:
        assert informer.wait_synced(30)
        assert [(e.type, e.obj["metadata"]["name"]) for e in rec.events] == [("ADDED", "before")]
        listed = informer.get(f"{namespace}/before")
        assert listed is not None and listed["data"] == {"a": "1"}
        assert listed["kind"] == "ConfigMap" and listed["apiVersion"] == "v1"  # filled in for list items
        assert informer.get(f"{namespace}/unlabelled") is None  # the selector is applied

        api.request("POST", CONFIGMAPS.path(namespace), body=cm(namespace, "after", b="2"))
        wait_until(lambda: rec.seen("ADDED", "after"), timeout=15, what="ADDED after")
        api.request(
            "PATCH",
            CONFIGMAPS.path(namespace, "before"),
            body={"data": {"a": "changed"}},
            content_type="application/merge-patch+json",
        )
        modified = wait_until(lambda: rec.seen("MODIFIED", "before"), timeout=15, what="MODIFIED")
        assert modified.old is not None and modified.old["data"] == {"a": "1"}
        assert modified.obj["data"] == {"a": "changed"}
        api.request("DELETE", CONFIGMAPS.path(namespace, "after"))
        deleted = wait_until(lambda: rec.seen("DELETED", "after"), timeout=15, what="DELETED")
        assert deleted.old is not None
        assert informer.get(f"{namespace}/after") is None
        assert sorted(o["metadata"]["name"] for o in informer.list(namespace)) == ["before"]
        assert informer.list("elsewhere") == []
        assert informer.healthy and informer.errors == 0 and informer.relists == 0
    finally:
        informer.stop()
    assert informer._thread is not None and not informer._thread.is_alive()


PODTEMPLATES = Resource("", "v1", "podtemplates", "PodTemplate", namespaced=True)
"""Served without a watch cache on the test hub, so compacting etcd expires a version at once."""


def template(namespace: str, name: str, v: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": {"t": "1"}, "annotations": {"v": v}},
        "template": {"spec": {"containers": [{"name": "c", "image": "example.invalid/c"}]}},
    }


def test_a_watch_resumed_from_an_expired_version_relists_and_emits_only_the_difference(
    control_plane: ControlPlane, namespace: str
) -> None:
    api = hub_api(control_plane)
    for name in ("gone", "changed", "same"):
        api.request("POST", PODTEMPLATES.path(namespace), body=template(namespace, name, v="1"))
    metrics = ControllerMetrics()
    informer = Informer(api, PODTEMPLATES, namespace=namespace, label_selector="t=1", metrics=metrics)
    informer.start()
    assert informer.wait_synced(30)
    informer.stop()
    stopped_at = informer.resource_version
    assert stopped_at
    # the world moves on while the informer is stopped ...
    api.request("DELETE", PODTEMPLATES.path(namespace, "gone"))
    api.request(
        "PATCH",
        PODTEMPLATES.path(namespace, "changed"),
        body={"metadata": {"annotations": {"v": "2"}}},
        content_type="application/merge-patch+json",
    )
    api.request("POST", PODTEMPLATES.path(namespace), body=template(namespace, "new", v="1"))
    # ... until its version is no longer in the store's history (on a real hub: an outage longer
    # than the watch cache's window and etcd's compaction interval)
    assert control_plane.etcd is not None
    compact_etcd(control_plane.etcd.url)
    with pytest.raises(Gone):
        for _ in api.watch(
            PODTEMPLATES.path(namespace),
            {"resourceVersion": stopped_at, "timeoutSeconds": "5"},
            threading.Event(),
        ):
            pass
    assert informer.resource_version == stopped_at  # it resumes from there and meets 410
    rec = Recorder()
    informer.add_handler(rec)
    informer.start()
    try:
        wait_until(lambda: informer.relists == 1 and len(rec.events) >= 3, timeout=30, what="relist")
        assert sorted(rec.names()) == [("ADDED", "new"), ("DELETED", "gone"), ("MODIFIED", "changed")]
        changed = rec.seen("MODIFIED", "changed")
        assert changed is not None and changed.old is not None
        assert changed.old["metadata"]["annotations"] == {"v": "1"}
        assert sorted(informer.keys()) == sorted(f"{namespace}/{n}" for n in ("changed", "new", "same"))
        # counted just after `relists` moves, in the informer's thread
        wait_until(
            lambda: metrics.watch_relists_total.labels(informer.name)._value.get() == 1,
            timeout=10,
            what="dynamic_scoring_watch_relists_total 1",
        )
        # and it watches again from the relisted version
        api.request("POST", PODTEMPLATES.path(namespace), body=template(namespace, "later", v="1"))
        wait_until(lambda: rec.seen("ADDED", "later"), timeout=15, what="watch after relist")
        assert informer.errors == 0  # 410 is routine, not an error
    finally:
        informer.stop()


class CuttableProxy:
    """A loopback TCP proxy to the apiserver whose connections a test can cut."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.up = threading.Event()
        self.up.set()
        self.conns: list[socket.socket] = []
        self.lock = threading.Lock()
        self.closed = False
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.up.is_set():
                client.close()
                continue
            self.accepted += 1
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.conns += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self, refuse: bool) -> None:
        """Close every open connection; with `refuse`, also turn new ones away until `restore`."""
        if refuse:
            self.up.clear()
        with self.lock:
            conns, self.conns = self.conns, []
        for s in conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def restore(self) -> None:
        self.up.set()

    def close(self) -> None:
        self.closed = True
        self.cut(refuse=True)
        self.listener.close()


def proxied_kubeconfig(kubeconfig: Path, port: int, out: Path) -> Path:
    doc = yaml.safe_load(kubeconfig.read_text())
    for cluster in doc["clusters"]:
        server = cluster["cluster"]["server"]
        assert server.startswith("https://127.0.0.1:"), server  # the certificate names the IP, not the port
        cluster["cluster"]["server"] = f"https://127.0.0.1:{port}"
    out.write_text(yaml.safe_dump(doc))
    return out


def test_watch_reconnects_after_the_stream_is_cut_and_reports_unhealthy_meanwhile(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    assert control_plane.hub is not None
    kubeconfig = control_plane.hub.admin_kubeconfig
    server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    host, port = server.removeprefix("https://").rsplit(":", 1)
    proxy = CuttableProxy((host, int(port)))
    api = hub_api(control_plane)
    via_proxy = KubeAPI(proxied_kubeconfig(kubeconfig, proxy.port, tmp_path / "proxied"), timeout=5)
    metrics = ControllerMetrics()
    informer = Informer(
        via_proxy,
        CONFIGMAPS,
        namespace=namespace,
        label_selector="t=1",  # not the namespace's kube-root-ca.crt
        metrics=metrics,
        unhealthy_after=1.0,
        backoff=Backoff(0.1, 0.5),
    )
    rec = Recorder()
    informer.add_handler(rec)
    informer.start()
    try:
        assert informer.wait_synced(30)
        api.request("POST", CONFIGMAPS.path(namespace), body=cm(namespace, "one"))
        wait_until(lambda: rec.seen("ADDED", "one"), timeout=15, what="first event through the proxy")

        # a cut with immediate reconnect: the watch resumes from its version, no relist
        proxy.cut(refuse=False)
        api.request("POST", CONFIGMAPS.path(namespace), body=cm(namespace, "two"))
        wait_until(lambda: rec.seen("ADDED", "two"), timeout=15, what="event after a cut")
        assert informer.relists == 0

        # an outage: the informer counts errors, turns unhealthy, and recovers when the path is back
        proxy.cut(refuse=True)
        wait_until(lambda: not informer.healthy, timeout=15, what="unhealthy during the outage")
        assert informer.errors >= 1
        # the informer keeps failing (and counting) while the path is refused: wait for a moment
        # when the metric and the attribute agree
        wait_until(
            lambda: metrics.watch_errors_total.labels(informer.name)._value.get() == informer.errors,
            timeout=10,
            what="dynamic_scoring_watch_errors_total equal to informer.errors",
        )
        api.request("POST", CONFIGMAPS.path(namespace), body=cm(namespace, "three"))
        api.request("DELETE", CONFIGMAPS.path(namespace, "one"))
        proxy.restore()
        wait_until(
            lambda: rec.seen("ADDED", "three") and rec.seen("DELETED", "one"), timeout=30, what="catch-up"
        )
        wait_until(lambda: informer.healthy, timeout=15, what="healthy again")
        assert sorted(informer.keys()) == [f"{namespace}/three", f"{namespace}/two"]
        assert [n for t, n in rec.names() if t == "ADDED"].count("two") == 1  # nothing replayed twice
    finally:
        informer.stop()
        proxy.close()


def test_list_all_follows_continue_across_pages_with_the_selector_kept(
    control_plane: ControlPlane, namespace: str
) -> None:
    api = hub_api(control_plane)
    for i in range(7):
        api.request("POST", CONFIGMAPS.path(namespace), body=cm(namespace, f"paged-{i}"))
    api.request("POST", CONFIGMAPS.path(namespace), body={"metadata": {"name": "unlabelled"}})
    items, version = api.list_all(CONFIGMAPS.path(namespace), {"labelSelector": "t=1"}, page_size=2)
    assert sorted(o["metadata"]["name"] for o in items) == [f"paged-{i}" for i in range(7)]
    assert version.isdigit()
