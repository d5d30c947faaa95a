"""Benchmark of the hub controller core against a real kube-apiserver.

    python -m bench.hub.core --kubeconfig <hub admin kubeconfig> [--counts 1000,3500]

For each count it creates that many ConfigMaps (about 1 KB each) in a fresh namespace, then, each
in a child process so that resident memory is its own:

* ``ours``: `Informer` first list (paged) until synced; the process's RSS growth; a second relist
  (what a 410 costs: the diff must emit nothing); a `Writer.ensure` pass with every object already
  as desired (requests sent must be 0);
* ``upstream``: `kubernetes.informer.SharedInformer` over `CoreV1Api.list_namespaced_config_map`
  (generated models) until its cache holds every object, and its RSS growth.

Prints one JSON line per measurement.  The namespace is deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from dynamic_scoring.kube.api import KubeAPI
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.resources import CONFIGMAPS, NAMESPACES


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise KeyError("VmRSS")


def desired(namespace: str, i: int) -> JSON:
    return {
        "metadata": {"name": f"cm-{i:05d}", "namespace": namespace, "labels": {"bench": "hub-core"}},
        "data": {"payload": "x" * 900, "index": str(i)},
    }


def populate(api: KubeAPI, namespace: str, count: int) -> float:
    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(
            pool.map(
                lambda i: api.request("POST", CONFIGMAPS.path(namespace), body=desired(namespace, i)),
                range(count),
            )
        )
    return time.monotonic() - started


def measure_ours(kubeconfig: Path, namespace: str, count: int) -> dict[str, Any]:
    from dynamic_scoring.kube.informer import Informer
    from dynamic_scoring.kube.writes import Writer

    class Counting(KubeAPI):
        sent = 0

        def request(self, method: str, path: str, **kw: Any) -> JSON:
            Counting.sent += 1
            return super().request(method, path, **kw)

    api = Counting(kubeconfig)
    before = rss_kib()
    informer = Informer(api, CONFIGMAPS, namespace=namespace, label_selector="bench=hub-core")
    started = time.monotonic()
    informer.start()
    assert informer.wait_synced(300)
    synced = time.monotonic() - started
    assert len(informer) == count, len(informer)
    rss_growth = rss_kib() - before
    informer.stop()
    events: list[object] = []
    informer.add_handler(events.append)
    started = time.monotonic()
    informer._relist()
    relist = time.monotonic() - started
    writer = Writer(api, "bench")
    Counting.sent = 0
    started = time.monotonic()
    for i in range(count):
        want = desired(namespace, i)
        current = informer.get(f"{namespace}/{want['metadata']['name']}")
        writer.ensure(CONFIGMAPS, want, current, owns=lambda _obj: True)  # the bench's own namespace
    noop = time.monotonic() - started
    return {
        "mode": "ours",
        "objects": count,
        "first_sync_s": round(synced, 3),
        "rss_growth_mib": round(rss_growth / 1024, 1),
        "relist_s": round(relist, 3),
        "relist_events": len(events),
        "noop_ensure_pass_s": round(noop, 3),
        "noop_ensure_requests": Counting.sent,
    }


def measure_upstream(kubeconfig: Path, namespace: str, count: int) -> dict[str, Any]:
    import logging

    from kubernetes import client, config
    from kubernetes.informer import SharedInformer

    logging.getLogger("kubernetes").setLevel(logging.ERROR)
    api_client = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
    core = client.CoreV1Api(api_client)
    before = rss_kib()
    informer = SharedInformer(
        core.list_namespaced_config_map, namespace=namespace, label_selector="bench=hub-core"
    )  # type: ignore[no-untyped-call]
    started = time.monotonic()
    informer.start()  # type: ignore[no-untyped-call]
    while len(informer.cache.list()) < count:
        time.sleep(0.01)
        if time.monotonic() - started > 300:
            raise TimeoutError("upstream informer did not fill its cache")
    synced = time.monotonic() - started
    rss_growth = rss_kib() - before
    informer._stop_event.set()  # its stop() waits for the next event of an idle watch
    return {
        "mode": "upstream",
        "objects": count,
        "first_sync_s": round(synced, 3),
        "rss_growth_mib": round(rss_growth / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--counts", default="1000,3500")
    parser.add_argument("--measure", choices=("ours", "upstream"), help=argparse.SUPPRESS)
    parser.add_argument("--namespace", help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        fn = measure_ours if args.measure == "ours" else measure_upstream
        print(json.dumps(fn(args.kubeconfig, args.namespace, args.count)), flush=True)
        os._exit(0)  # the upstream informer's daemon thread is still inside a blocking read
    api = KubeAPI(args.kubeconfig)
    for count in (int(c) for c in args.counts.split(",")):
        namespace = f"bench-hub-core-{uuid.uuid4().hex[:6]}"
        api.request("POST", NAMESPACES.path(), body={"metadata": {"name": namespace}})
        try:
            created = populate(api, namespace, count)
            print(
                json.dumps({"mode": "populate", "objects": count, "seconds": round(created, 1)}), flush=True
            )
            for mode in ("ours", "upstream"):
                subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "bench.hub.core",
                        "--kubeconfig",
                        str(args.kubeconfig),
                        "--measure",
                        mode,
                        "--namespace",
                        namespace,
                        "--count",
                        str(count),
                    ],
                    check=True,
                )
        finally:
            api.request("DELETE", NAMESPACES.path(None, namespace))


if __name__ == "__main__":
    main()
