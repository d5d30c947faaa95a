"""A stand-in for the kubelet, for this project's image only: Deployments become local processes.

There is no kubelet and no container runtime here, so a Deployment never runs.  The runner
watches the given clusters for Deployments whose container image is this project's image and
runs that container's `command`/`args` as a local process, using the console scripts installed
next to this Python.  That is how the hub manager (installed from `manifests/`) and each
cluster's agent (installed by our ManifestWork) run in tests, from the very manifests users
install.

What a pod would get, and how the runner provides it:

* **Volumes** (Secret, ConfigMap, projected ServiceAccount token, emptyDir) are written to disk
  and bind-mounted at their `mountPath` inside a private mount namespace (`unshare --mount`), so
  paths in the manifests are used unchanged.  Secret and ConfigMap contents are re-synced while
  the process runs, as the kubelet does (certificate rotation relies on it).
* **Identity**: the pod's ServiceAccount token comes from the TokenRequest API and is mounted at
  `/var/run/secrets/kubernetes.io/serviceaccount` with `ca.crt` and `namespace`;
  `KUBERNETES_SERVICE_HOST/PORT` point at the cluster's apiserver, so in-cluster configuration
  works as it would in a pod.
* **Ports**: there is one network namespace, so two replicas (or two clusters' agents) cannot both
  bind 8080.  Each declared `containerPort` gets a free loopback port, and `:<containerPort>` in
  args and env values is rewritten to `127.0.0.1:<port>`.  Manifests must therefore pass their
  bind addresses explicitly (which they should anyway, to match the declared ports).
* **Status**: `replicas`, `updatedReplicas`, `readyReplicas`, `availableReplicas`,
  `observedGeneration` and the `Available`/`Progressing` conditions follow what runs; readiness
  comes from an httpGet/tcpSocket readinessProbe, or from the process being up.
* **Lifecycle**: a crashed process restarts with exponential backoff (1 s doubling to 60 s, reset
  after 60 s of running); a changed pod template restarts it; scale to zero or deletion stops it.

The runner writes `<state-dir>/pods.json` (pids, restarts, port mappings) for tests and status.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import click
from kubernetes import client, config
from kubernetes.client import ApiException

from e2e.procs import free_port, kill_group

log = logging.getLogger("e2e.runner")

DEFAULT_IMAGE_PATTERN = r"(^|/)dynamic-scoring(:[^/]*|@sha256:[0-9a-f]+)?$"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_SECONDS = 3600
SYNC_SECONDS = 1.0
BACKOFF_MAX = 60.0


def raw(call: Callable[..., object], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Call a generated API method and return the JSON object, skipping model deserialisation."""
    resp = call(*args, _preload_content=False, **kwargs)
    return cast(dict[str, Any], json.loads(cast(Any, resp).data))


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class Cluster:
    """One cluster the runner serves: its API clients and apiserver address."""

    name: str
    kubeconfig: Path
    api: client.ApiClient = field(init=False)

    def __post_init__(self) -> None:
        self.api = config.new_client_from_config(config_file=str(self.kubeconfig))  # type: ignore[no-untyped-call]
        host = self.api.configuration.host  # https://127.0.0.1:PORT
        self.host, _, port = host.removeprefix("https://").partition(":")
        self.port = int(port or 443)
        self.ca_file = self.api.configuration.ssl_ca_cert
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)


def template_hash(template: dict[str, Any]) -> str:
    """A stable hash of the pod template: a change means the pod must be replaced."""
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]


class Replica:
    """One 'pod' of a Deployment: materialised volumes plus the process that runs the container."""

    def __init__(
        self, cluster: Cluster, deploy: dict[str, Any], index: int, state_dir: Path, scripts: Path
    ) -> None:
        meta = deploy["metadata"]
        self.cluster = cluster
        self.namespace: str = meta["namespace"]
        self.deployment: str = meta["name"]
        self.template: dict[str, Any] = deploy["spec"]["template"]
        self.hash = template_hash(self.template)
        self.index = index
        self.pod_name = f"{self.deployment}-{self.hash[:8]}-{index}"
        self.dir = state_dir / cluster.name / self.namespace / self.pod_name
        self.scripts = scripts
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self.restarts = 0
        self.backoff = 1.0
        self.next_start = 0.0
        self.ports: dict[int, int] = {}
        self.ready = False
        self.waiting_reason = ""
        self.token_expiry = 0.0
        self.synced_versions: dict[str, str] = {}

    @property
    def spec(self) -> dict[str, Any]:
        """The pod spec."""
        spec: dict[str, Any] = self.template.get("spec", {})
        return spec

    @property
    def container(self) -> dict[str, Any]:
        """The first container (the one with this project's image)."""
        return dict(self.spec["containers"][0])

    # ------------------------------------------------------------------ volumes
    def _secret(self, name: str) -> dict[str, bytes] | None:
        try:
            s = raw(self.cluster.core.read_namespaced_secret, name, self.namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        self.synced_versions[f"secret/{name}"] = s["metadata"]["resourceVersion"]
        return {k: base64.b64decode(v) for k, v in (s.get("data") or {}).items()}

    def _configmap(self, name: str) -> dict[str, bytes] | None:
        try:
            cm = raw(self.cluster.core.read_namespaced_config_map, name, self.namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        self.synced_versions[f"configmap/{name}"] = cm["metadata"]["resourceVersion"]
        data = {k: str(v).encode() for k, v in (cm.get("data") or {}).items()}
        data.update({k: base64.b64decode(v) for k, v in (cm.get("binaryData") or {}).items()})
        return data

    def _token(self) -> bytes:
        sa = self.spec.get("serviceAccountName") or "default"
        body = {"spec": {"audiences": [], "expirationSeconds": TOKEN_SECONDS}}
        resp = raw(self.cluster.core.create_namespaced_service_account_token, sa, self.namespace, body)
        self.token_expiry = time.time() + TOKEN_SECONDS
        return str(resp["status"]["token"]).encode()

    @staticmethod
    def _write_files(target: Path, files: dict[str, bytes], mode: int = 0o644) -> None:
        """Replace a directory's files atomically per file (readers never see half a file)."""
        target.mkdir(parents=True, exist_ok=True)
        for key, value in files.items():
            path = target / key
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_bytes(value)
            tmp.chmod(mode)
            tmp.replace(path)
        for existing in target.iterdir():
            if existing.is_file() and existing.name not in files and not existing.name.startswith("."):
                existing.unlink()

    @staticmethod
    def _select(data: dict[str, bytes], items: list[dict[str, Any]] | None) -> dict[str, bytes]:
        if not items:
            return data
        return {i["path"]: data[i["key"]] for i in items if i["key"] in data}

    def materialise(self) -> str:
        """Write every volume to disk; returns why the pod cannot start yet ('' when it can)."""
        vols = self.dir / "volumes"
        for vol in self.spec.get("volumes", []):
            name = vol["name"]
            target = vols / name
            if "secret" in vol:
                src = vol["secret"]
                data = self._secret(src["secretName"])
                if data is None:
                    if src.get("optional"):
                        data = {}
                    else:
                        return f'secret "{src["secretName"]}" not found'
                self._write_files(target, self._select(data, src.get("items")), 0o600)
            elif "configMap" in vol:
                src = vol["configMap"]
                data = self._configmap(src["name"])
                if data is None:
                    if src.get("optional"):
                        data = {}
                    else:
                        return f'configmap "{src["name"]}" not found'
                self._write_files(target, self._select(data, src.get("items")))
            elif "emptyDir" in vol:
                target.mkdir(parents=True, exist_ok=True)
            elif "projected" in vol:
                files: dict[str, bytes] = {}
                for source in vol["projected"].get("sources", []):
                    if "serviceAccountToken" in source:
                        files[source["serviceAccountToken"]["path"]] = self._token()
                    elif "secret" in source:
                        d = self._secret(source["secret"]["name"]) or {}
                        files.update(self._select(d, source["secret"].get("items")))
                    elif "configMap" in source:
                        d = self._configmap(source["configMap"]["name"]) or {}
                        files.update(self._select(d, source["configMap"].get("items")))
                self._write_files(target, files, 0o600)
            else:
                return f"volume {name}: only secret, configMap, projected and emptyDir are supported"
        if self.spec.get("automountServiceAccountToken", True):
            ca = Path(self.cluster.ca_file).read_bytes() if self.cluster.ca_file else b""
            self._write_files(
                vols / "_serviceaccount",
                {"token": self._token(), "ca.crt": ca, "namespace": self.namespace.encode()},
                0o600,
            )
        return ""

    def resync_volumes(self) -> bool:
        """Refresh Secret/ConfigMap volumes and tokens; True if anything changed."""
        changed = False
        for key, version in list(self.synced_versions.items()):
            kind, _, name = key.partition("/")
            read = (
                self.cluster.core.read_namespaced_secret
                if kind == "secret"
                else self.cluster.core.read_namespaced_config_map
            )
            try:
                obj = raw(read, name, self.namespace)
            except ApiException:
                continue
            if obj["metadata"]["resourceVersion"] != version:
                changed = True
        if changed or time.time() > self.token_expiry - TOKEN_SECONDS * 0.2:
            self.materialise()
        return changed

    # ------------------------------------------------------------------ process
    def _env(self) -> dict[str, str]:
        env = {
            "PATH": f"{self.scripts}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.dir),
            "PYTHONUNBUFFERED": "1",
            "KUBERNETES_SERVICE_HOST": self.cluster.host,
            "KUBERNETES_SERVICE_PORT": str(self.cluster.port),
            "HOSTNAME": self.pod_name,
        }
        fields = {
            "metadata.name": self.pod_name,
            "metadata.namespace": self.namespace,
            "spec.serviceAccountName": self.spec.get("serviceAccountName") or "default",
            "spec.nodeName": "e2e-node",
            "status.podIP": "127.0.0.1",
            "status.hostIP": "127.0.0.1",
        }
        for src in self.container.get("envFrom", []):
            prefix = src.get("prefix", "")
            if "secretRef" in src:
                data = self._secret(src["secretRef"]["name"]) or {}
            else:
                data = self._configmap(src["configMapRef"]["name"]) or {}
            env.update({prefix + k: v.decode() for k, v in data.items()})
        for var in self.container.get("env", []):
            if "value" in var:
                env[var["name"]] = str(var["value"])
                continue
            ref = var.get("valueFrom", {})
            if "fieldRef" in ref:
                env[var["name"]] = fields.get(ref["fieldRef"]["fieldPath"], "")
            elif "secretKeyRef" in ref:
                data = self._secret(ref["secretKeyRef"]["name"]) or {}
                if ref["secretKeyRef"]["key"] in data:
                    env[var["name"]] = data[ref["secretKeyRef"]["key"]].decode()
            elif "configMapKeyRef" in ref:
                data = self._configmap(ref["configMapKeyRef"]["name"]) or {}
                if ref["configMapKeyRef"]["key"] in data:
                    env[var["name"]] = data[ref["configMapKeyRef"]["key"]].decode()
        return {k: self._rewrite(v) for k, v in env.items()}

    def _rewrite(self, value: str) -> str:
        for container_port, host_port in self.ports.items():
            value = re.sub(
                rf"(^|[\s=])(?:0\.0\.0\.0|\[::\]|localhost|127\.0\.0\.1)?:{container_port}\b",
                rf"\g<1>127.0.0.1:{host_port}",
                value,
            )
        return value

    def _mounts(self) -> list[tuple[str, str, bool]]:
        mounts = []
        vols = self.dir / "volumes"
        for m in self.container.get("volumeMounts", []):
            src = vols / m["name"]
            if m.get("subPath"):
                src = src / m["subPath"]
            mounts.append((str(src), m["mountPath"], bool(m.get("readOnly"))))
        if self.spec.get("automountServiceAccountToken", True):
            mounts.append((str(vols / "_serviceaccount"), SA_DIR, True))
        return mounts

    def start(self) -> None:
        """Start the container's process inside a private mount namespace."""
        self.ports = {
            int(p["containerPort"]): free_port()
            for p in self.container.get("ports", [])
            if "containerPort" in p
        }
        argv = [*self.container.get("command", []), *self.container.get("args", [])]
        if not argv:
            raise ValueError("container has neither command nor args; this image has no entrypoint")
        argv = [self._rewrite(a) for a in argv]
        spec = {"mounts": self._mounts(), "argv": argv, "cwd": self.container.get("workingDir", "")}
        spec_path = self.dir / "pod.json"
        spec_path.write_text(json.dumps(spec))
        log_path = self.dir / "container.log"
        with log_path.open("ab") as out:
            out.write(f"--- {_now()} start {argv}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                [
                    "unshare",
                    "--mount",
                    "--propagation",
                    "private",
                    sys.executable,
                    "-m",
                    "e2e.runner",
                    "exec-pod",
                    str(spec_path),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self._env(),
                start_new_session=True,
            )
        self.started_at = time.monotonic()
        self.ready = False
        log.info(
            "started %s/%s/%s pid %s ports %s",
            self.cluster.name,
            self.namespace,
            self.pod_name,
            self.proc.pid,
            self.ports,
        )

    def stop(self, timeout: float = 10) -> None:
        """Stop the process (TERM, then KILL after the grace period)."""
        if self.proc is not None and self.proc.poll() is None:
            grace = float(self.spec.get("terminationGracePeriodSeconds", timeout))
            kill_group(self.proc.pid, min(grace, timeout))
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(2)
        self.proc = None
        self.ready = False

    def probe(self) -> bool:
        """Readiness as the kubelet would judge it."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        probe = self.container.get("readinessProbe")
        if not probe:
            return time.monotonic() - self.started_at >= 1.0
        if time.monotonic() - self.started_at < float(probe.get("initialDelaySeconds", 0)):
            return False
        try:
            if "httpGet" in probe:
                port = self.ports.get(int(probe["httpGet"]["port"]), int(probe["httpGet"]["port"]))
                url = f"http://127.0.0.1:{port}{probe['httpGet'].get('path', '/')}"
                with urllib.request.urlopen(url, timeout=float(probe.get("timeoutSeconds", 1))) as r:
                    return bool(200 <= r.status < 400)
            if "tcpSocket" in probe:
                port = self.ports.get(int(probe["tcpSocket"]["port"]), int(probe["tcpSocket"]["port"]))
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    return True
        except OSError:
            return False
        return True  # exec probes are not supported; a running process counts as ready

    def tick(self) -> None:
        """Advance the replica's state machine: wait for volumes, start, restart, probe."""
        now = time.monotonic()
        if self.proc is not None and self.proc.poll() is not None:
            code = self.proc.returncode
            ran = now - self.started_at
            self.backoff = 1.0 if ran > 60 else min(self.backoff * 2, BACKOFF_MAX)
            self.next_start = now + self.backoff
            self.restarts += 1
            self.proc = None
            self.ready = False
            self.waiting_reason = f"CrashLoopBackOff: exited with {code}"
            log.warning(
                "%s/%s exited with %s after %.1fs; restart in %.0fs",
                self.namespace,
                self.pod_name,
                code,
                ran,
                self.backoff,
            )
        if self.proc is None:
            if now < self.next_start:
                return
            reason = self.materialise()
            if reason:
                self.waiting_reason = f"ContainerCreating: {reason}"
                self.next_start = now + 2
                return
            self.waiting_reason = ""
            self.start()
            return
        self.resync_volumes()
        self.ready = self.probe()

    def describe(self) -> dict[str, Any]:
        """A row of pods.json."""
        return {
            "cluster": self.cluster.name,
            "namespace": self.namespace,
            "deployment": self.deployment,
            "pod": self.pod_name,
            "pid": self.proc.pid if self.proc else None,
            "ready": self.ready,
            "restarts": self.restarts,
            "ports": {str(k): v for k, v in self.ports.items()},
            "waiting": self.waiting_reason,
            "log": str(self.dir / "container.log"),
        }


class Runner:
    """Reconciles matching Deployments of every cluster into Replicas, once per SYNC_SECONDS."""

    def __init__(self, clusters: list[Cluster], state_dir: Path, image_pattern: str) -> None:
        self.clusters = clusters
        self.state_dir = state_dir
        self.image = re.compile(image_pattern)
        self.scripts = Path(sys.executable).parent
        self.replicas: dict[tuple[str, str, str], list[Replica]] = {}
        self.stop_event = threading.Event()
        self._last_status: dict[tuple[str, str, str], dict[str, Any]] = {}

    def _matches(self, deploy: dict[str, Any]) -> bool:
        containers = deploy["spec"]["template"].get("spec", {}).get("containers", [])
        return bool(containers) and bool(self.image.search(containers[0].get("image", "")))

    def sync_once(self) -> None:
        """One pass over every cluster."""
        seen: set[tuple[str, str, str]] = set()
        for cluster in self.clusters:
            try:
                deployments = raw(cluster.apps.list_deployment_for_all_namespaces)["items"]
            except Exception as exc:
                log.warning("listing deployments on %s failed: %s", cluster.name, exc)
                seen.update(k for k in self.replicas if k[0] == cluster.name)
                continue
            for d in deployments:
                if not self._matches(d):
                    continue
                key = (cluster.name, d["metadata"]["namespace"], d["metadata"]["name"])
                seen.add(key)
                self._reconcile(cluster, key, d)
        for key in list(self.replicas):
            if key not in seen:
                log.info("deployment %s gone; stopping its processes", "/".join(key))
                for r in self.replicas.pop(key):
                    r.stop()
                self._last_status.pop(key, None)
        self._write_pods()

    def _reconcile(self, cluster: Cluster, key: tuple[str, str, str], d: dict[str, Any]) -> None:
        want = d["spec"].get("replicas", 1)
        h = template_hash(d["spec"]["template"])
        current = self.replicas.setdefault(key, [])
        outdated = [r for r in current if r.hash != h]
        for r in outdated:
            log.info("pod template of %s changed; replacing %s", "/".join(key), r.pod_name)
            r.stop()
            current.remove(r)
        while len(current) > want:
            current.pop().stop()
        while len(current) < want:
            current.append(Replica(cluster, d, len(current), self.state_dir, self.scripts))
        for r in current:
            try:
                r.tick()
            except Exception as exc:
                r.waiting_reason = f"RunnerError: {exc}"
                log.exception("replica %s failed to sync", r.pod_name)
        self._update_status(cluster, key, d, current, want)

    def _update_status(
        self, cluster: Cluster, key: tuple[str, str, str], d: dict[str, Any], reps: list[Replica], want: int
    ) -> None:
        ready = sum(1 for r in reps if r.ready)
        available = want == 0 or ready >= want
        waiting = "; ".join(r.waiting_reason for r in reps if r.waiting_reason)
        status = {
            "observedGeneration": d["metadata"].get("generation", 1),
            "replicas": len(reps),
            "updatedReplicas": len(reps),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "unavailableReplicas": max(want - ready, 0),
        }
        conditions = [
            {
                "type": "Available",
                "status": "True" if available else "False",
                "reason": "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable",
                "message": "Deployment has minimum availability."
                if available
                else f"Deployment does not have minimum availability. {waiting}".strip(),
            },
            {
                "type": "Progressing",
                "status": "True",
                "reason": "NewReplicaSetAvailable" if available else "ReplicaSetUpdated",
                "message": f"runner: {ready}/{want} ready",
            },
        ]
        summary = {**status, "conditions": conditions}
        if self._last_status.get(key) == summary:
            return
        old = {c["type"]: c for c in d.get("status", {}).get("conditions", [])}
        for c in conditions:
            prev = old.get(c["type"])
            same = prev is not None and prev.get("status") == c["status"]
            c["lastTransitionTime"] = prev["lastTransitionTime"] if same and prev else _now()
            c["lastUpdateTime"] = _now()
        body = {"status": {**status, "conditions": conditions}}
        try:
            cluster.apps.patch_namespaced_deployment_status(key[2], key[1], body)
            self._last_status[key] = summary
        except ApiException as exc:
            log.warning("status of %s not written: %s", "/".join(key), exc.reason)

    def _write_pods(self) -> None:
        rows = [r.describe() for reps in self.replicas.values() for r in reps]
        tmp = self.state_dir / "pods.json.tmp"
        tmp.write_text(json.dumps(rows, indent=1))
        tmp.replace(self.state_dir / "pods.json")

    def run(self) -> None:
        """Sync until SIGTERM/SIGINT, then stop every process."""
        (self.state_dir / "ready").write_text(_now())
        try:
            while not self.stop_event.is_set():
                self.sync_once()
                self.stop_event.wait(SYNC_SECONDS)
        finally:
            for reps in self.replicas.values():
                for r in reps:
                    r.stop()
            self.replicas.clear()
            self._write_pods()
            (self.state_dir / "ready").unlink(missing_ok=True)


def exec_pod(spec_path: Path) -> None:
    """Inside the private mount namespace: bind the volumes at their mountPaths, then exec."""
    spec = json.loads(spec_path.read_text())
    for src, dst, read_only in spec["mounts"]:
        dst_path = Path(dst)
        if Path(src).is_dir():
            dst_path.mkdir(parents=True, exist_ok=True)
        else:
            dst_path.parent.mkdir(parents=True, exist_ok=True)
            dst_path.touch(exist_ok=True)
        subprocess.run(["mount", "--bind", src, dst], check=True)
        if read_only:
            subprocess.run(["mount", "-o", "remount,bind,ro", dst], check=True)
    if spec.get("cwd"):
        os.chdir(spec["cwd"])
    argv = spec["argv"]
    exe = shutil.which(argv[0], path=os.environ.get("PATH"))
    if exe is None:
        sys.stderr.write(
            f"runner: {argv[0]!r} is not a console script of this project (PATH={os.environ.get('PATH')})\n"
        )
        sys.exit(127)
    os.execve(exe, argv, os.environ)


@click.group(invoke_without_command=True)
@click.option("--state-dir", type=click.Path(path_type=Path), help="Where volumes, logs and pods.json go.")
@click.option(
    "--cluster",
    "clusters",
    multiple=True,
    metavar="NAME=KUBECONFIG",
    help="A cluster to serve (repeatable).",
)
@click.option(
    "--image-pattern", default=DEFAULT_IMAGE_PATTERN, show_default=True, help="Regex of images to run."
)
@click.pass_context
def cli(ctx: click.Context, state_dir: Path | None, clusters: tuple[str, ...], image_pattern: str) -> None:
    """Run this project's Deployments as local processes (a kubelet stand-in for tests)."""
    if ctx.invoked_subcommand is not None:
        return
    if state_dir is None or not clusters:
        raise click.UsageError("--state-dir and at least one --cluster are required")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if subprocess.run(["unshare", "--mount", "true"], check=False).returncode != 0:
        raise click.ClickException(
            "`unshare --mount` does not work here; the runner needs a private mount namespace"
        )
    state_dir.mkdir(parents=True, exist_ok=True)
    parsed = []
    for c in clusters:
        name, _, kubeconfig = c.partition("=")
        if not kubeconfig:
            raise click.BadParameter(f"{c!r} is not NAME=KUBECONFIG", param_hint="--cluster")
        parsed.append(Cluster(name, Path(kubeconfig)))
    runner = Runner(parsed, state_dir, image_pattern)
    signal.signal(signal.SIGTERM, lambda *_: runner.stop_event.set())
    signal.signal(signal.SIGINT, lambda *_: runner.stop_event.set())
    runner.run()


@cli.command("exec-pod")
@click.argument("spec", type=click.Path(exists=True, path_type=Path))
def exec_pod_cmd(spec: Path) -> None:
    """(internal) Set up mounts inside the pod's mount namespace and exec the container command."""
    exec_pod(spec)


def main() -> None:
    """Console-script entry point."""
    cli()


if __name__ == "__main__":
    main()
