"""A controller end to end on ConfigMaps: converge, retry with backoff, resync without writes."""

from __future__ import annotations

import itertools
import threading
import time

from prometheus_client import CollectorRegistry

from dynamic_scoring.kube.api import MERGE_PATCH, KubeAPI
from dynamic_scoring.kube.controller import Controller, ControllerManager
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.resources import CONFIGMAPS, split_key
from dynamic_scoring.kube.workqueue import WorkQueue
from dynamic_scoring.kube.writes import labelled
from e2e.controlplane import ControlPlane
from e2e.procs import wait_until

MIRROR = labelled({"role": "mirror"})


class Mirror:
    """Keeps `<name>-mirror` equal to each source ConfigMap labelled role=source.

    A source whose data has `fail: N` makes the first N reconciles of its key raise.
    """

    def __init__(self, manager: ControllerManager, namespace: str) -> None:
        self.sources = manager.informer(CONFIGMAPS, namespace=namespace, label_selector="role=source")
        self.mirrors = manager.informer(CONFIGMAPS, namespace=namespace, label_selector="role=mirror")
        self.writer = manager.writer("mirror")
        self.attempts: dict[str, list[float]] = {}
        self.lock = threading.Lock()

    def reconcile(self, key: str) -> None:
        with self.lock:
            tries = self.attempts.setdefault(key, [])
            tries.append(time.monotonic())
        namespace, name = split_key(key)
        source = self.sources.get(key)
        mirror_key = f"{namespace}/{name}-mirror"
        if source is None:
            if self.mirrors.get(mirror_key) is not None:
                self.writer.delete(
                    CONFIGMAPS, namespace, f"{name}-mirror", current=self.mirrors.get(mirror_key), owns=MIRROR
                )
            return
        data = source.get("data") or {}
        if len(tries) <= int(data.get("fail", "0")):
            raise RuntimeError(f"attempt {len(tries)} fails on purpose")
        desired: JSON = {
            "metadata": {"name": f"{name}-mirror", "namespace": namespace, "labels": {"role": "mirror"}},
            "data": data,
        }
        self.writer.ensure(CONFIGMAPS, desired, self.mirrors.get(mirror_key), owns=MIRROR)


def mirror_to_source(obj: JSON) -> list[str]:
    meta = obj["metadata"]
    return [f"{meta['namespace']}/{meta['name'].removesuffix('-mirror')}"]


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def source(namespace: str, name: str, **data: str) -> JSON:
    return {"metadata": {"name": name, "namespace": namespace, "labels": {"role": "source"}}, "data": data}


class Running:
    """A manager with the mirror controller, run in a thread for the length of a `with` block."""

    def __init__(
        self, api: KubeAPI, namespace: str, resync_seconds: float, unhealthy_after: float = 60.0
    ) -> None:
        self.registry = CollectorRegistry()
        self.manager = ControllerManager(
            api, metrics_registry=self.registry, watch_unhealthy_after=unhealthy_after
        )
        self.mirror = Mirror(self.manager, namespace)
        self.namespace = namespace
        self.controller = Controller(
            "mirror",
            self.mirror.reconcile,
            workers=2,
            resync_seconds=resync_seconds,
            queue=WorkQueue(base_delay=0.2, max_delay=5.0),
        )
        self.controller.watch(self.mirror.sources)
        self.controller.watch(self.mirror.mirrors, mirror_to_source)
        self.manager.add(self.controller)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.manager.run, args=(self.stop,), daemon=True)

    def __enter__(self) -> Running:
        self.thread.start()
        wait_until(self.manager.ready, timeout=30, what="manager ready")
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive()
        assert not self.manager.ready()
        assert all(i._thread is not None and not i._thread.is_alive() for i in self.manager.informers)

    def mirrored(self, name: str) -> JSON | None:
        return self.mirror.mirrors.get(f"{self.namespace}/{name}-mirror")

    def count(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, {"controller": "mirror", **labels}) or 0.0

    def writes(self) -> float:
        return sum(
            self.count("dynamic_scoring_controller_writes_total", verb=v, resource="configmaps")
            for v in ("create", "patch", "delete")
        )


def test_controller_converges_on_create_change_and_deletion_of_its_objects(
    api: KubeAPI, namespace: str
) -> None:
    api.request("POST", CONFIGMAPS.path(namespace), body=source(namespace, "one", x="1"))
    with Running(api, namespace, resync_seconds=0) as run:
        informer = run.manager.informer(CONFIGMAPS, namespace=namespace, label_selector="role=source")
        assert informer is run.mirror.sources  # one watch per resource and selector
        wait_until(lambda: run.mirrored("one"), timeout=15, what="mirror of an existing source")
        api.request("POST", CONFIGMAPS.path(namespace), body=source(namespace, "two", y="2"))
        wait_until(
            lambda: (m := run.mirrored("two")) and m["data"] == {"y": "2"}, timeout=15, what="new source"
        )
        api.request(
            "PATCH", CONFIGMAPS.path(namespace, "one"), body={"data": {"x": "9"}}, content_type=MERGE_PATCH
        )
        wait_until(lambda: (m := run.mirrored("one")) and m["data"] == {"x": "9"}, timeout=15, what="change")
        # a deleted mirror is recreated (the mirror informer maps it back to its source)
        first = run.mirrored("two")
        assert first is not None
        api.request("DELETE", CONFIGMAPS.path(namespace, "two-mirror"))
        wait_until(
            lambda: (m := run.mirrored("two")) and m["metadata"]["uid"] != first["metadata"]["uid"],
            timeout=15,
            what="mirror recreated (a new uid)",
        )
        # deleting a source removes its mirror
        api.request("DELETE", CONFIGMAPS.path(namespace, "one"))
        wait_until(lambda: run.mirrored("one") is None, timeout=15, what="mirror of a deleted source removed")
        # the counters move after each write returns, which the informer may have seen first
        wait_until(
            lambda: (
                run.count("dynamic_scoring_controller_writes_total", verb="create", resource="configmaps")
                == 3
                and run.count("dynamic_scoring_controller_writes_total", verb="patch", resource="configmaps")
                == 1
                and run.count("dynamic_scoring_controller_writes_total", verb="delete", resource="configmaps")
                == 1
                and run.count("dynamic_scoring_controller_reconcile_duration_seconds_count") > 0
            ),
            timeout=15,
            what="writes counted: 3 creates, 1 patch, 1 delete, and reconcile durations observed",
        )


def test_a_failing_reconcile_is_retried_with_growing_delays_until_it_converges(
    api: KubeAPI, namespace: str
) -> None:
    with Running(api, namespace, resync_seconds=0) as run:
        api.request("POST", CONFIGMAPS.path(namespace), body=source(namespace, "flaky", fail="3"))
        wait_until(lambda: run.mirrored("flaky"), timeout=30, what="flaky converges")
        key = f"{namespace}/flaky"
        times = run.mirror.attempts[key][:4]  # a fifth may follow: the new mirror's event
        assert len(times) == 4
        gaps = [b - a for a, b in itertools.pairwise(times)]
        for i, gap in enumerate(gaps):  # 0.2 s, 0.4 s, 0.8 s: the queue adds no jitter below these
            assert gap >= 0.2 * 2**i * 0.95, gaps
        assert run.count("dynamic_scoring_controller_reconcile_total", result="error") == 3
        wait_until(lambda: run.controller.queue.num_requeues(key) == 0, timeout=10, what="backoff forgotten")


def test_a_resync_of_a_converged_world_reconciles_every_key_and_writes_nothing(
    api: KubeAPI, namespace: str
) -> None:
    for name in ("a", "b", "c"):
        api.request("POST", CONFIGMAPS.path(namespace), body=source(namespace, name, v=name))
    with Running(api, namespace, resync_seconds=1.0) as run:
        wait_until(lambda: all(run.mirrored(n) for n in "abc"), timeout=15, what="converged")
        wait_until(lambda: run.writes() == 3, timeout=15, what="the 3 creates counted")
        writes = run.writes()
        ok = run.count("dynamic_scoring_controller_reconcile_total", result="success")
        wait_until(
            lambda: run.count("dynamic_scoring_controller_reconcile_total", result="success") >= ok + 3 * 3,
            timeout=15,
            what="three resyncs of three sources",
        )
        assert run.writes() == writes
        assert run.count("dynamic_scoring_controller_queue_depth") >= 0


def test_the_manager_survives_a_hub_apiserver_crash_and_restart(
    control_plane: ControlPlane, api: KubeAPI, namespace: str
) -> None:
    api.request("POST", CONFIGMAPS.path(namespace), body=source(namespace, "a", v="1"))
    with Running(api, namespace, resync_seconds=0, unhealthy_after=2.0) as run:
        wait_until(lambda: run.mirrored("a"), timeout=15, what="converged before the crash")
        control_plane.stop_component("hub-apiserver", kill=True)
        try:
            wait_until(
                lambda: not run.manager.ready(), timeout=30, what="not ready while the apiserver is down"
            )
            wait_until(
                lambda: any("failing for more than 2s" in p for p in run.manager.problems()),
                timeout=30,
                what="a problem 'failing for more than 2s'",
            )
        finally:
            control_plane.start_component("hub-apiserver")
        wait_until(run.manager.ready, timeout=90, what="ready again after the restart")
        api.request("POST", CONFIGMAPS.path(namespace), body=source(namespace, "b", v="1"))
        api.request(
            "PATCH", CONFIGMAPS.path(namespace, "a"), body={"data": {"v": "2"}}, content_type=MERGE_PATCH
        )
        wait_until(lambda: run.mirrored("b"), timeout=60, what="a source created after the restart")
        wait_until(lambda: (m := run.mirrored("a")) and m["data"] == {"v": "2"}, timeout=60, what="a change")
        wait_until(
            lambda: (
                run.count("dynamic_scoring_controller_writes_total", verb="create", resource="configmaps")
                == 2
            ),
            timeout=15,
            what="the 2 creates counted",
        )

        def errors() -> float:
            return sum(
                run.registry.get_sample_value("dynamic_scoring_watch_errors_total", {"resource": i.name})
                or 0.0
                for i in run.manager.informers
            )

        # each informer counted its failures; none was raised
        wait_until(lambda: errors() >= 2, timeout=15, what="at least 2 watch errors counted")
        mirrors = api.request("GET", CONFIGMAPS.path(namespace), query={"labelSelector": "role=mirror"})
        assert sorted(m["metadata"]["name"] for m in mirrors["items"]) == ["a-mirror", "b-mirror"]
