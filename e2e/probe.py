"""`dynamic-scoring-e2e-probe`: a tiny workload that proves what the process runner gives a pod.

It reads a file from a mounted Secret, asks the apiserver who it is (with the pod's
ServiceAccount, through in-cluster configuration), and publishes both in a ConfigMap named
after its pod; it serves `/healthz` for the readiness probe.  The harness tests use it; it is
not part of the addon.
"""

from __future__ import annotations

import http.server
import json
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, cast

import click
from kubernetes import client, config


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/healthz" else 404)
        self.end_headers()
        self.wfile.write(b"ok\n")

    def log_message(self, format: str, *args: object) -> None:
        return


@click.command()
@click.option("--secret-file", type=click.Path(path_type=Path), required=True, help="File to report.")
@click.option("--bind-address", default=":8080", show_default=True, help="host:port for /healthz.")
@click.option("--pod-name", envvar="POD_NAME", required=True, help="Name of this pod (downward API).")
@click.option("--namespace", envvar="POD_NAMESPACE", required=True, help="Namespace of this pod.")
def main(secret_file: Path, bind_address: str, pod_name: str, namespace: str) -> None:
    """Report the mounted secret and the ServiceAccount identity, then serve /healthz."""
    config.load_incluster_config()  # type: ignore[no-untyped-call]
    api = client.ApiClient()
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    who = client.AuthenticationV1Api(api).create_self_subject_review(
        cast(Any, review), _preload_content=False
    )
    username = str(json.loads(cast(Any, who).data)["status"]["userInfo"]["username"])
    data = {"secret": secret_file.read_text(), "username": username, "started": str(time.time())}
    core = client.CoreV1Api(api)
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"probe-{pod_name}"), data=data)
    try:
        core.create_namespaced_config_map(namespace, body)
    except client.ApiException as exc:
        if exc.status != 409:
            raise
        core.replace_namespaced_config_map(f"probe-{pod_name}", namespace, body)
    host, _, port = bind_address.rpartition(":")
    server = http.server.ThreadingHTTPServer((host or "127.0.0.1", int(port)), _Health)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"probe {pod_name} serving on {host}:{port} as {username}", flush=True)
    server.serve_forever()
    sys.exit(0)
