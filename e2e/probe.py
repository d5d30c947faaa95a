"""`dynamic-scoring-e2e-probe`: a tiny workload that proves what the process runner gives a pod.

It reads a file from a mounted Secret, asks the apiserver who it is (with the pod's
ServiceAccount, through in-cluster configuration), and publishes both, with its arguments and
the environment variables it was asked to report, in a ConfigMap named after its pod.  It serves
`/healthz` (readiness) and `/livez` (liveness); a request to `/fail` makes `/livez` answer 500
from then on, so a test can watch the runner restart it as the kubelet would.  The harness tests
use it; it is not part of the addon.
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import click

from dynamic_scoring.kube.api import Conflict, KubeAPI

_failing = threading.Event()


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/fail":
            _failing.set()
        status = {"/healthz": 200, "/fail": 200, "/livez": 500 if _failing.is_set() else 200}
        self.send_response(status.get(self.path, 404))
        self.end_headers()
        self.wfile.write(b"ok\n")

    def log_message(self, format: str, *args: object) -> None:
        return


@click.command(context_settings={"ignore_unknown_options": True})
@click.option("--secret-file", type=click.Path(path_type=Path), required=True, help="File to report.")
@click.option("--bind-address", default=":8080", show_default=True, help="host:port for the probes.")
@click.option("--pod-name", envvar="POD_NAME", required=True, help="Name of this pod (downward API).")
@click.option("--namespace", envvar="POD_NAMESPACE", required=True, help="Namespace of this pod.")
@click.option("--report-env", multiple=True, help="An environment variable to publish (repeatable).")
@click.argument("extra", nargs=-1, type=click.UNPROCESSED)
def main(
    secret_file: Path,
    bind_address: str,
    pod_name: str,
    namespace: str,
    report_env: tuple[str, ...],
    extra: tuple[str, ...],
) -> None:
    """Report the mounted secret, the ServiceAccount identity, args and env, then serve probes."""
    api = KubeAPI(None)  # in-cluster: the mounted token, KUBERNETES_SERVICE_HOST/PORT
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    who = api.request("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body=review)
    username = str(who["status"]["userInfo"]["username"])
    data = {
        "secret": secret_file.read_text(),
        "username": username,
        "started": str(time.time()),
        "argv": json.dumps(sys.argv[1:]),
        "env": json.dumps({name: os.environ.get(name) for name in report_env}),
    }
    name = f"probe-{pod_name}"
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}
    collection = f"/api/v1/namespaces/{namespace}/configmaps"
    try:
        api.request("POST", collection, body=body)
    except Conflict:
        api.request("PUT", f"{collection}/{name}", body=body)
    host, _, port = bind_address.rpartition(":")
    server = http.server.ThreadingHTTPServer((host or "127.0.0.1", int(port)), _Health)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"probe {pod_name} serving on {host}:{port} as {username}", flush=True)
    server.serve_forever()
    sys.exit(0)


if __name__ == "__main__":
    main()
