"""The scorer controller's probe on the real hub: refused addresses and hostile /config answers.

Issue 22, findings 6 and 7.  The scorer controller runs in-process against the session's real
kube-apiserver twice: once with the manager's defaults (which refuse loopback), once with the
development opt-out (``probe_allow_cidrs: 127.0.0.0/8``, the manager's ``--scorer-probe-allow-cidr``).
Scorers are real HTTP servers on loopback that record what they receive.  What is checked is what
the author of the DynamicScorer reads back: its status conditions and ``lastSyncedConfig``.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from dynamic_scoring.addon.controllers import HubContext
from dynamic_scoring.addon.controllers.registry.controller import scorer_controller
from dynamic_scoring.addon.registry.probe_settings import ProbeSettings
from dynamic_scoring.kube.api import KubeAPI
from dynamic_scoring.kube.controller import ControllerManager
from e2e.controlplane import ControlPlane
from e2e.kube import Client
from e2e.loopback import LoopbackServer, QuietHandler
from e2e.procs import wait_until
from tests.integration.test_registry_controllers import (
    condition,
    hub,  # noqa: F401  (the module's CRDs-installed hub fixture)
    make_scorer,
    scorer_obj,
    wait_for,
)


class Recording:
    """A scorer on loopback whose ``/config`` answer (body, content type) the test sets."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.body = b"{}"
        self.content_type = "application/json"
        outer = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                outer.paths.append(self.path)
                body = b"ok" if self.path == "/healthz" else outer.body
                self.reply(200, body, outer.content_type)

        self.loopback = LoopbackServer(Handler, name="probe-recording")
        self.url = self.loopback.url

    def stop(self) -> None:
        self.loopback.stop()


class Probing:
    """The scorer controller alone, in a namespace of its own, with the given settings."""

    def __init__(self, api: KubeAPI, namespace: str, allow_cidrs: tuple[str, ...] = ()) -> None:
        self.cm = ControllerManager(api, metrics_registry=CollectorRegistry())
        self.stop = threading.Event()
        probe = ProbeSettings.build(period=1.0, jitter=0.1, failure_threshold=2, allow_cidrs=allow_cidrs)
        ctx = HubContext(api, self.cm, namespace, "unused:0", resync_seconds=2.0, stop=self.stop, probe=probe)
        for controller in scorer_controller(ctx):
            self.cm.add(controller)
        self.thread = threading.Thread(target=self.cm.run, args=(self.stop,), daemon=True)
        self.thread.start()
        wait_until(self.cm.ready, timeout=60, what="scorer controller ready")

    def close(self) -> None:
        self.stop.set()
        self.thread.join(60)


def _namespace(client: Client) -> str:
    name = f"probe-{uuid.uuid4().hex[:6]}"
    client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


@pytest.fixture(scope="module")
def strict(control_plane: ControlPlane, hub: Client) -> Iterator[tuple[Probing, str]]:  # noqa: F811
    assert control_plane.hub is not None
    namespace = _namespace(hub)
    probing = Probing(KubeAPI(control_plane.hub.admin_kubeconfig), namespace)  # the manager's defaults
    yield probing, namespace
    probing.close()
    hub.delete("v1", "Namespace", namespace)


@pytest.fixture(scope="module")
def dev(control_plane: ControlPlane, hub: Client) -> Iterator[tuple[Probing, str]]:  # noqa: F811
    assert control_plane.hub is not None
    namespace = _namespace(hub)
    api = KubeAPI(control_plane.hub.admin_kubeconfig)
    probing = Probing(api, namespace, allow_cidrs=("127.0.0.0/8",))
    yield probing, namespace
    probing.close()
    hub.delete("v1", "Namespace", namespace)


@pytest.fixture
def scorer() -> Iterator[Recording]:
    s = Recording()
    yield s
    s.stop()


def full_mode(scorer: Recording, url: str | None = None) -> dict[str, Any]:
    return {
        "configURL": url or f"{scorer.url}/config",
        "configSyncMode": "Full",
        "scoring": {"host": scorer.url, "params": {"name": "probe_test", "interval": 30}},
        "probe": {"timeoutSeconds": 2},
    }


def good_config(scorer: Recording, **extra: Any) -> dict[str, Any]:
    return {
        "name": "probe-test",
        "source": {"type": "Prometheus", "host": "http://prom.example:9090", "params": {"query": "up"}},
        "scoring": {"host": scorer.url, "params": {"name": "probe_test", "interval": 30}},
        **extra,
    }


def test_a_loopback_scorer_is_refused_by_default_and_nothing_reaches_it(
    hub: Client,  # noqa: F811
    strict: tuple[Probing, str],
    scorer: Recording,
) -> None:
    _, namespace = strict
    for name, url in (("plain", scorer.url), ("numeric", scorer.url.replace("127.0.0.1", "2130706433"))):
        make_scorer(hub, namespace, name, full_mode(scorer, f"{url}/config"))

        def inactive(n: str = name) -> dict[str, Any] | None:
            found = condition(scorer_obj(hub, namespace, n), "Healthy")
            return found if found.get("status") == "False" else None

        healthy = wait_for(inactive, f"{name} Inactive")
        assert (healthy["status"], healthy["reason"]) == ("False", "AddressNotAllowed"), healthy
        assert "loopback address" in healthy["message"] and "Errno" not in healthy["message"]
        assert "lastSyncedConfig" not in (scorer_obj(hub, namespace, name).get("status") or {})
    assert scorer.paths == []


def test_metadata_stays_refused_with_the_loopback_opt_out(
    hub: Client,  # noqa: F811
    dev: tuple[Probing, str],
    scorer: Recording,
) -> None:
    _, namespace = dev
    make_scorer(hub, namespace, "metadata", full_mode(scorer, "http://169.254.169.254/latest/meta-data/"))
    healthy = wait_for(
        lambda: (
            (c := condition(scorer_obj(hub, namespace, "metadata"), "Healthy")).get("status") == "False" and c
        ),
        "Inactive",
    )
    assert (healthy["status"], healthy["reason"]) == ("False", "AddressNotAllowed"), healthy
    assert "metadata address" in healthy["message"]


def test_with_the_opt_out_only_known_bounded_fields_reach_last_synced_config(
    hub: Client,  # noqa: F811
    dev: tuple[Probing, str],
    scorer: Recording,
) -> None:
    _, namespace = dev
    doc = good_config(scorer, internal={"token": "leaked"})
    doc["scoring"]["params"]["model"] = "m1"  # the scorer's own parameter: kept, it is the contract
    scorer.body = json.dumps(doc).encode()
    make_scorer(hub, namespace, "synced", full_mode(scorer))

    def synced() -> dict[str, Any] | None:
        status = scorer_obj(hub, namespace, "synced").get("status") or {}
        return status.get("lastSyncedConfig")

    stored = wait_for(synced, "lastSyncedConfig written")
    assert stored["scoring"]["params"] == {"name": "probe_test", "interval": 30, "model": "m1"}
    assert "internal" not in stored and "leaked" not in json.dumps(stored)
    assert "/healthz" in scorer.paths and "/config" in scorer.paths

    # a lying answer: HTML. The last good document stays, the condition says why, no body quoted
    scorer.content_type, scorer.body = "text/html", b"<html>internal admin page</html>"
    synced_condition = wait_for(
        lambda: (
            (c := condition(scorer_obj(hub, namespace, "synced"), "ConfigSynced")).get("status") == "False"
            and c
        ),
        "ConfigSynced False",
    )
    assert synced_condition["reason"] == "InvalidContentType", synced_condition
    assert "internal admin" not in synced_condition["message"]
    assert synced() == stored

    # free-form params past the bound: refused, not stored
    big = good_config(scorer)
    big["scoring"]["params"].update({f"k{i}": i for i in range(100)})
    scorer.content_type, scorer.body = "application/json", json.dumps(big).encode()
    synced_condition = wait_for(
        lambda: (
            (c := condition(scorer_obj(hub, namespace, "synced"), "ConfigSynced")).get("reason")
            == "InvalidSchema"
            and c
        ),
        "ConfigSynced InvalidSchema",
    )
    assert "scoring.params: 100 keys, at most 64" in synced_condition["message"]
    assert synced() == stored
