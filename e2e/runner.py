"""A stand-in for the kubelet, for this project's image only: Deployments become local processes.

There is no kubelet and no container runtime here, so a Deployment never runs.  The runner
watches the given clusters for Deployments whose container image is this project's image and
runs that container's `command`/`args` as a local process, using the console scripts installed
next to this Python (and launchers for the harness's own test workloads, `HARNESS_COMMANDS`).
That is how the hub manager (installed from `manifests/`) and each
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
* **Environment**: envFrom, env (downward-API fieldRef, Secret/ConfigMap key refs) and `$(VAR)`
  expansion in env values, command and args, in the kubelet's order.  `--extra-env NAME=VALUE`
  adds a variable to every replica before the container's own (which wins on a clash): what this
  one-host network needs and a cluster's does not.  The harness uses it for the hub probe's
  loopback opt-out (`DYNAMIC_SCORING_PROBE_ALLOW_CIDRS=127.0.0.0/8`), because every "pod" and
  every test scorer here listens on 127.0.0.1, which the manager refuses to probe by default;
  the manifests keep the production default.  A reference to something
  missing keeps the replica from starting with the kubelet's CreateContainerConfigError reason.
* **Status**: `replicas`, `updatedReplicas`, `readyReplicas`, `availableReplicas`,
  `observedGeneration` and the `Available`/`Progressing` conditions follow what runs; readiness
  comes from an httpGet/tcpSocket readinessProbe (numbered or named port), or from the process
  being up.
* **Lifecycle**: a crashed process restarts with exponential backoff (1 s doubling to 60 s, reset
  after 60 s of running), and so does one whose liveness probe failed `failureThreshold` times in
  a row; a changed pod template restarts it; scale to zero or deletion stops it.  Security
  contexts, resources and node placement are accepted and ignored.

Every API call goes through the project's one Kubernetes layer (`KubeAPI`, JSON paths).

The runner writes `<state-dir>/pods.json` (pids, restarts, port mappings) for tests and status.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import hashlib
import json
import logging
import os
import re
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from dynamic_scoring.kube.api import KubeAPI, KubeError, NotFound
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.kube.resources import (
    CONFIGMAPS,
    DEPLOYMENTS,
    NAMESPACES,
    SECRETS,
    SERVICE_ACCOUNTS,
    Resource,
)
from e2e import containers
from e2e.procs import free_port, kill_group

log = logging.getLogger("e2e.runner")

MODES = ("container", "process")
DEFAULT_IMAGE_PATTERN = r"(^|/)dynamic-scoring(:[^/]*|@sha256:[0-9a-f]+)?$"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_SECONDS = 3600
SYNC_SECONDS = 1.0
BACKOFF_MAX = 60.0
NODE_NAME = "e2e-node"
MERGE_PATCH = "application/merge-patch+json"
# What `synced_versions` keys ("secrets/<name>") name, to re-read them.
VOLUME_SOURCES = {r.plural: r for r in (SECRETS, CONFIGMAPS)}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class ConfigError(Exception):
    """The pod spec names something missing or unsupported (the kubelet's CreateContainerConfigError).

    The container is not started; the reason shows in the Deployment's status and pods.json.
    """


class ImagePullError(Exception):
    """Container mode: the pod's image is not in local storage (the kubelet's ErrImagePull).

    Nothing is started in its place: the replica waits, with this reason in the Deployment's
    status, until the image is built (`make image`).
    """


# ---------------------------------------------------------------------- pod spec semantics
_REFERENCE = re.compile(r"\$(\$|\(([^)]*)\))")


def expand_references(value: str, env: Mapping[str, str]) -> str:
    """Kubernetes' `$(VAR)` expansion in command, args and env values.

    `$(VAR)` becomes VAR's value when VAR is defined, and stays as written when it is not;
    `$$` is an escaped `$`, so `$$(VAR)` yields the literal `$(VAR)`.
    """

    def repl(m: re.Match[str]) -> str:
        if m.group(1) == "$":
            return "$"
        name = m.group(2)
        return env.get(name, m.group(0))

    return _REFERENCE.sub(repl, value)


def resolve_port(port: int | str, container: Mapping[str, Any]) -> int:
    """A probe's `port`: a number, or the name of one of the container's ports."""
    if isinstance(port, int):
        return port
    if port.isdigit():
        return int(port)
    for p in container.get("ports", []):
        if p.get("name") == port:
            return int(p["containerPort"])
    raise ConfigError(f"port {port!r} is not a named port of container {container.get('name', '?')!r}")


def field_value(path: str, pod: Mapping[str, Any]) -> str:
    """A downward-API `fieldRef` value.

    `pod` holds `name`, `namespace`, `uid`, `labels`, `annotations` and `serviceAccountName`.
    """
    simple = {
        "metadata.name": pod["name"],
        "metadata.namespace": pod["namespace"],
        "metadata.uid": pod["uid"],
        "spec.nodeName": NODE_NAME,
        "spec.serviceAccountName": pod["serviceAccountName"],
        "status.podIP": "127.0.0.1",
        "status.podIPs": "127.0.0.1",
        "status.hostIP": "127.0.0.1",
        "status.hostIPs": "127.0.0.1",
    }
    if path in simple:
        return str(simple[path])
    m = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if m:
        return str(pod[m.group(1)].get(m.group(2), ""))
    raise ConfigError(f"fieldRef {path!r} is not supported by the process runner")


# Commands of the test harness that Deployments in tests may run.  The harness is not installed
# as a package (no console scripts), so the runner provides them as small launchers.
HARNESS_COMMANDS = {"dynamic-scoring-e2e-probe": "e2e.probe"}
# Container mode: where the harness's e2e package is mounted (read-only) for those commands.
HARNESS_MOUNT = "/opt/e2e-harness"


def install_harness_commands(directory: Path) -> Path:
    """Write a launcher per harness command into `directory`, to be put first on a pod's PATH."""
    directory.mkdir(parents=True, exist_ok=True)
    repo = Path(__file__).resolve().parent.parent
    for command, module in HARNESS_COMMANDS.items():
        launcher = directory / command
        python = shlex.quote(sys.executable)
        launcher.write_text(
            f'#!/bin/sh\nPYTHONPATH={shlex.quote(str(repo))} exec {python} -m {module} "$@"\n'
        )
        launcher.chmod(0o755)
    return directory


def template_hash(template: dict[str, Any]) -> str:
    """A stable hash of the pod template: a change means the pod must be replaced."""
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]


@dataclass
class Cluster:
    """One cluster the runner serves: its API (the project's one Kubernetes layer) and address."""

    name: str
    kubeconfig: Path
    api: KubeAPI = field(init=False)

    def __post_init__(self) -> None:
        self.api = KubeAPI(self.kubeconfig)
        cfg = self.api.api_client.configuration
        host = str(cfg.host)  # https://127.0.0.1:PORT
        self.host, _, port = host.removeprefix("https://").partition(":")
        self.port = int(port or 443)
        self.ca_file: str | None = cfg.ssl_ca_cert

    def read(self, resource: Resource, namespace: str, name: str) -> JSON | None:
        """A namespaced object (a Secret, a ConfigMap), or None when it does not exist."""
        try:
            return self.api.request("GET", resource.path(namespace, name))
        except NotFound:
            return None

    def namespace_annotations(self, namespace: str) -> dict[str, str]:
        """A namespace's annotations (OpenShift's SCC ranges live there); none when it is gone."""
        try:
            ns = self.api.request("GET", NAMESPACES.path(None, namespace))
        except NotFound:
            return {}
        return dict((ns.get("metadata") or {}).get("annotations") or {})


@dataclass
class ProbeState:
    """Consecutive results of one probe, judged against its thresholds as the kubelet does."""

    spec: dict[str, Any]
    next_at: float = 0.0
    failures: int = 0
    last_error: str = ""

    @property
    def period(self) -> float:
        """Seconds between two probes."""
        return float(self.spec.get("periodSeconds", 10))

    @property
    def threshold(self) -> int:
        """Consecutive failures that count as failed."""
        return int(self.spec.get("failureThreshold", 3))


class Replica:
    """One 'pod' of a Deployment: materialised volumes plus the process that runs the container."""

    def __init__(
        self,
        cluster: Cluster,
        deploy: dict[str, Any],
        index: int,
        state_dir: Path,
        search_path: str,
        extra_env: dict[str, str] | None = None,
        mode: str = "process",
        runner_label: str = "",
    ) -> None:
        meta = deploy["metadata"]
        self.cluster = cluster
        self.mode = mode
        self.runner_label = runner_label
        self.extra_env = dict(extra_env or {})
        self.namespace: str = meta["namespace"]
        self.deployment: str = meta["name"]
        self.template: dict[str, Any] = deploy["spec"]["template"]
        self.hash = template_hash(self.template)
        self.declared_spec: dict[str, Any] = copy.deepcopy(self.template.get("spec", {}))
        self.index = index
        self.pod_name = f"{self.deployment}-{self.hash[:8]}-{index}"
        self.uid = hashlib.sha256(f"{cluster.name}/{self.namespace}/{self.pod_name}".encode()).hexdigest()
        self.dir = state_dir / cluster.name / self.namespace / self.pod_name
        self.search_path = search_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self.restarts = 0
        self.liveness_restarts = 0
        self.backoff = 1.0
        self.next_start = 0.0
        self.ports: dict[int, int] = {}
        self.ready = False
        self.waiting_reason = ""
        self.token_expiry = 0.0
        self.synced_versions: dict[str, str] = {}
        self.liveness: ProbeState | None = None
        self.container_name = containers.container_name(
            runner_label, cluster.name, self.namespace, self.pod_name
        )
        self.owner: tuple[int | None, int | None] = (None, None)  # container mode: volume ownership
        self.image_user = ""
        self.identity = containers.Identity(uid=None, gid=None, groups=())

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
        s = self.cluster.read(SECRETS, self.namespace, name)
        if s is None:
            return None
        self.synced_versions[f"{SECRETS.plural}/{name}"] = s["metadata"]["resourceVersion"]
        return {k: base64.b64decode(v) for k, v in (s.get("data") or {}).items()}

    def _configmap(self, name: str) -> dict[str, bytes] | None:
        cm = self.cluster.read(CONFIGMAPS, self.namespace, name)
        if cm is None:
            return None
        self.synced_versions[f"{CONFIGMAPS.plural}/{name}"] = cm["metadata"]["resourceVersion"]
        data = {k: str(v).encode() for k, v in (cm.get("data") or {}).items()}
        data.update({k: base64.b64decode(v) for k, v in (cm.get("binaryData") or {}).items()})
        return data

    def _token(self, source: dict[str, Any] | None = None) -> bytes:
        """A token of the pod's ServiceAccount, with a projected source's audience and expiry if given.

        No audience asks for the kube-apiserver's own, as the kubelet does.  Every token is renewed
        when the shortest-lived one has a fifth of `TOKEN_SECONDS` left (the kubelet renews each at
        80 % of its life; the runner's tokens live at least 600 s, so this is never later than that).
        """
        source = source or {}
        sa = self.spec.get("serviceAccountName") or "default"
        seconds = int(source.get("expirationSeconds") or TOKEN_SECONDS)
        audience = source.get("audience")
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"audiences": [audience] if audience else [], "expirationSeconds": seconds},
        }
        path = SERVICE_ACCOUNTS.path(self.namespace, sa, "token")
        resp = self.cluster.api.request("POST", path, body=body)
        expiry = time.time() + seconds
        self.token_expiry = expiry if not self.token_expiry else min(self.token_expiry, expiry)
        return str(resp["status"]["token"]).encode()

    def _write_files(
        self,
        target: Path,
        files: dict[str, bytes],
        mode: int = 0o644,
        owned: frozenset[str] = frozenset(),
    ) -> None:
        """Replace a directory's files atomically per file (readers never see half a file).

        As the kubelet does in container mode: the files take the pod's fsGroup as their group,
        readable by it; the files named in `owned` (projected tokens) become 0600, the pod user's,
        when the pod names a runAsUser or an fsGroup, and keep the volume's mode otherwise.
        Files of the directory not in `files` are removed, so one volume is one call.
        """
        owner = self._token_owner()
        target.mkdir(parents=True, exist_ok=True)
        fs_group = (
            (self.spec.get("securityContext") or {}).get("fsGroup") if self.mode == "container" else None
        )
        for key, value in files.items():
            path = target / key
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_bytes(value)
            file_mode = mode
            if key in owned and (owner is not None or fs_group is not None):
                file_mode = 0o600  # the kubelet's rule for a token with a known user or fsGroup
                if owner is not None:
                    os.chown(tmp, owner[0], owner[1])
            if fs_group is not None:
                os.chown(tmp, -1, int(fs_group))
                file_mode |= 0o040
            tmp.chmod(file_mode)
            tmp.replace(path)
        for existing in target.iterdir():
            if existing.is_file() and existing.name not in files and not existing.name.startswith("."):
                existing.unlink()

    def _token_owner(self) -> tuple[int, int] | None:
        """Container mode: a projected token belongs to the pod's user when one is set (kubelet)."""
        uid, gid = self.owner
        if self.mode != "container" or uid is None:
            return None
        return uid, gid if gid is not None else -1

    @staticmethod
    def _select(data: dict[str, bytes], items: list[dict[str, Any]] | None) -> dict[str, bytes]:
        if not items:
            return data
        return {i["path"]: data[i["key"]] for i in items if i["key"] in data}

    def materialise(self) -> str:
        """Write every volume to disk; returns why the pod cannot start yet ('' when it can)."""
        vols = self.dir / "volumes"
        self.token_expiry = 0.0  # every token is requested again below; the earliest expiry counts
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
                mode = int(src.get("defaultMode", 0o644))
                self._write_files(target, self._select(data, src.get("items")), mode)
            elif "configMap" in vol:
                src = vol["configMap"]
                data = self._configmap(src["name"])
                if data is None:
                    if src.get("optional"):
                        data = {}
                    else:
                        return f'configmap "{src["name"]}" not found'
                mode = int(src.get("defaultMode", 0o644))
                self._write_files(target, self._select(data, src.get("items")), mode)
            elif "emptyDir" in vol:
                target.mkdir(parents=True, exist_ok=True)
                target.chmod(0o777)  # as the kubelet makes it: writable by whatever user the pod runs as
            elif "projected" in vol:
                files: dict[str, bytes] = {}
                tokens: set[str] = set()
                for source in vol["projected"].get("sources", []):
                    if "serviceAccountToken" in source:
                        projected = source["serviceAccountToken"]
                        tokens.add(projected["path"])
                        files[projected["path"]] = self._token(projected)
                    elif "secret" in source:
                        d = self._secret(source["secret"]["name"]) or {}
                        files.update(self._select(d, source["secret"].get("items")))
                    elif "configMap" in source:
                        d = self._configmap(source["configMap"]["name"]) or {}
                        files.update(self._select(d, source["configMap"].get("items")))
                mode = int(vol["projected"].get("defaultMode", 0o644))
                self._write_files(target, files, mode, frozenset(tokens))
            else:
                return f"volume {name}: only secret, configMap, projected and emptyDir are supported"
        if self.spec.get("automountServiceAccountToken", True):
            ca = Path(self.cluster.ca_file).read_bytes() if self.cluster.ca_file else b""
            # The kubelet's kube-api-access volume: defaultMode 0644, readable by any user.
            self._write_files(
                vols / "_serviceaccount",
                {"token": self._token(), "ca.crt": ca, "namespace": self.namespace.encode()},
                0o644 if self.mode == "container" else 0o600,
            )
        return ""

    def resync_volumes(self) -> bool:
        """Refresh Secret/ConfigMap volumes and tokens; True if anything changed."""
        changed = False
        for key, version in list(self.synced_versions.items()):
            plural, _, name = key.partition("/")
            try:
                obj = self.cluster.read(VOLUME_SOURCES[plural], self.namespace, name)
            except KubeError:
                continue
            if obj is None or obj["metadata"]["resourceVersion"] != version:
                changed = True
        if changed or (self.token_expiry and time.time() > self.token_expiry - TOKEN_SECONDS * 0.2):
            self.materialise()
        return changed

    # ------------------------------------------------------------------ process
    def _key_ref(self, ref: dict[str, Any], kind: str) -> str | None:
        """The value behind a secretKeyRef/configMapKeyRef; None for a missing optional one."""
        read = self._secret if kind == "secret" else self._configmap
        data = read(ref["name"])
        if data is not None and ref["key"] in data:
            return data[ref["key"]].decode()
        if ref.get("optional"):
            return None
        what = f'{kind} "{ref["name"]}"' if data is None else f'key "{ref["key"]}" in {kind} "{ref["name"]}"'
        raise ConfigError(f"{what} not found")

    def _env(self) -> dict[str, str]:
        """The container's environment, built in the kubelet's order.

        envFrom first, then env in order, each value's `$(VAR)` expanded against what is defined
        before it; a missing non-optional reference raises `ConfigError`.
        """
        # Process mode supplies what an image would (PATH to the console scripts, HOME, unbuffered
        # output); container mode leaves those to the image, as the kubelet does.
        local = {"PATH": self.search_path, "HOME": str(self.dir), "PYTHONUNBUFFERED": "1"}
        env = {
            **(local if self.mode == "process" else {}),
            "KUBERNETES_SERVICE_HOST": self.cluster.host,
            "KUBERNETES_SERVICE_PORT": str(self.cluster.port),
            "HOSTNAME": self.pod_name,
            **self.extra_env,
        }
        meta = self.template.get("metadata", {})
        pod = {
            "name": self.pod_name,
            "namespace": self.namespace,
            "uid": self.uid,
            "labels": meta.get("labels") or {},
            "annotations": meta.get("annotations") or {},
            "serviceAccountName": self.spec.get("serviceAccountName") or "default",
        }
        for src in self.container.get("envFrom", []):
            prefix = src.get("prefix", "")
            kind, ref = (
                ("secret", src["secretRef"]) if "secretRef" in src else ("configmap", src["configMapRef"])
            )
            data = (self._secret if kind == "secret" else self._configmap)(ref["name"])
            if data is None and not ref.get("optional"):
                raise ConfigError(f'{kind} "{ref["name"]}" not found')
            env.update({prefix + k: v.decode() for k, v in (data or {}).items()})
        for var in self.container.get("env", []):
            if "value" in var or "valueFrom" not in var:
                env[var["name"]] = expand_references(str(var.get("value", "")), env)
                continue
            ref = var["valueFrom"]
            value: str | None
            if "fieldRef" in ref:
                value = field_value(ref["fieldRef"]["fieldPath"], pod)
            elif "secretKeyRef" in ref:
                value = self._key_ref(ref["secretKeyRef"], "secret")
            elif "configMapKeyRef" in ref:
                value = self._key_ref(ref["configMapKeyRef"], "configmap")
            else:
                raise ConfigError(
                    f"env {var['name']}: only fieldRef, secretKeyRef and configMapKeyRef are supported"
                )
            if value is not None:
                env[var["name"]] = value
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

    def prepare(self) -> None:
        """Container mode: the image must be local, and the user it runs as allowed.

        Raises ImagePullError (the kubelet's ErrImagePull) or ConfigError (runAsNonRoot refused);
        on success remembers the uid/gid the projected tokens are given to.
        """
        if self.mode != "container":
            return
        # OpenShift's SCC admission, where the namespace says it is OpenShift (containers.py); the
        # template's hash stays the declared one, so the admitted fields never look like a change
        admitted = containers.admit_restricted_v2(
            self.declared_spec, self.cluster.namespace_annotations(self.namespace)
        )
        self.template = {**self.template, "spec": admitted or copy.deepcopy(self.declared_spec)}
        image = str(self.container.get("image", ""))
        user = containers.image_user(image)
        if user is None:
            raise ImagePullError(
                f'image "{image}" is not present in local storage (pull policy here is Never); '
                "build it with `make image`"
            )
        try:
            who = containers.identity(self.spec, self.container, user)
        except containers.NonRootError as exc:
            raise ConfigError(str(exc)) from exc
        self.image_user = user
        self.identity = who
        self.owner = (who.uid, who.gid)

    def _harness(self, command: list[str], args: list[str]) -> tuple[list[str], list[str], dict[str, str]]:
        """Container mode: a harness test command runs with the image's Python, e2e/ mounted read-only.

        Only the harness's own test workloads (`HARNESS_COMMANDS`) get this; the project's
        commands always come from the image.
        """
        argv = command or args
        if not argv or argv[0] not in HARNESS_COMMANDS:
            return command, args, {}
        rest = [*command[1:], *args] if command else args[1:]
        return ["python", "-m", HARNESS_COMMANDS[argv[0]]], rest, {"PYTHONPATH": HARNESS_MOUNT}

    def start(self) -> None:
        """Start the container: `podman run` in container mode, else a process in a mount namespace."""
        self.ports = {
            int(p["containerPort"]): free_port()
            for p in self.container.get("ports", [])
            if "containerPort" in p
        }
        env = self._env()
        command = [self._rewrite(expand_references(a, env)) for a in self.container.get("command", [])]
        args = [self._rewrite(expand_references(a, env)) for a in self.container.get("args", [])]
        self.dir.mkdir(parents=True, exist_ok=True)  # a pod without volumes has nothing else to create it
        if self.mode == "container":
            self._start_container(env, command, args)
        else:
            self._start_process(env, [*command, *args])
        self.started_at = time.monotonic()
        self.ready = False
        probe = self.container.get("livenessProbe")
        self.liveness = (
            ProbeState(probe, next_at=self.started_at + float(probe.get("initialDelaySeconds", 0)))
            if probe
            else None
        )
        assert self.proc is not None
        log.info(
            "started %s/%s/%s pid %s ports %s (%s)",
            self.cluster.name,
            self.namespace,
            self.pod_name,
            self.proc.pid,
            self.ports,
            self.container_name if self.mode == "container" else "process",
        )

    def _start_container(self, env: dict[str, str], command: list[str], args: list[str]) -> None:
        command, args, harness_env = self._harness(command, args)
        env = {**env, **harness_env}
        mounts = self._mounts()
        if harness_env:
            mounts.append((str(Path(__file__).resolve().parent), f"{HARNESS_MOUNT}/e2e", True))
        argv = containers.run_argv(
            name=self.container_name,
            runner_label=self.runner_label,
            image=str(self.container.get("image", "")),
            hostname=self.pod_name,
            pod_spec=self.spec,
            container=self.container,
            who=self.identity,
            image_user=self.image_user,
            mounts=mounts,
            env_names=sorted(env),
            env=env,
            command=command,
            args=args,
        )
        podman_env = {**os.environ, **{k: v for k, v in env.items() if k not in containers.PODMAN_OWN_ENV}}
        with (self.dir / "container.log").open("ab") as out:
            out.write(f"--- {_now()} start {self.container_name}: {[*command, *args]}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=podman_env,
                start_new_session=True,
            )

    def _start_process(self, env: dict[str, str], argv: list[str]) -> None:
        if not argv:
            raise ConfigError("container has neither command nor args; this image has no entrypoint")
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
                env=env,
                start_new_session=True,
            )

    def stop(self, timeout: float = 10) -> None:
        """Stop the process (TERM, then KILL after the grace period)."""
        if self.proc is not None and self.proc.poll() is None:
            grace = float(self.spec.get("terminationGracePeriodSeconds", timeout))
            kill_group(self.proc.pid, min(grace, timeout))  # podman passes the TERM to the container
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(2)
        if self.mode == "container" and self.proc is not None:
            # a podman that had to be SIGKILLed leaves its container running under conmon
            containers.remove_containers(name=self.container_name)
        self.proc = None
        self.ready = False

    def check(self, probe: dict[str, Any]) -> str:
        """Run one httpGet/tcpSocket probe against the mapped port; '' on success, else why not."""
        timeout = float(probe.get("timeoutSeconds", 1))
        try:
            if "httpGet" in probe:
                get = probe["httpGet"]
                port = resolve_port(get["port"], self.container)
                scheme = str(get.get("scheme", "HTTP")).lower()
                url = f"{scheme}://127.0.0.1:{self.ports.get(port, port)}{get.get('path', '/')}"
                headers = {h["name"]: h["value"] for h in get.get("httpHeaders", [])}
                # The kubelet does not verify a probe's serving certificate either: a probe asks
                # "is it up", it sends no credentials.
                ctx = ssl._create_unverified_context() if scheme == "https" else None
                req = urllib.request.Request(url, headers=headers)
                with urllib.request.urlopen(req, timeout=timeout, context=ctx) as r:
                    return "" if 200 <= r.status < 400 else f"HTTP {r.status}"
            if "tcpSocket" in probe:
                port = resolve_port(probe["tcpSocket"]["port"], self.container)
                with socket.create_connection(("127.0.0.1", self.ports.get(port, port)), timeout=timeout):
                    return ""
        except OSError as exc:
            return f"{type(exc).__name__}: {exc}"
        return ""  # exec and grpc probes are not supported; a running process passes them

    def probe(self) -> bool:
        """Readiness as the kubelet would judge it."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        probe = self.container.get("readinessProbe")
        if not probe:
            return time.monotonic() - self.started_at >= 1.0
        if time.monotonic() - self.started_at < float(probe.get("initialDelaySeconds", 0)):
            return False
        return self.check(probe) == ""

    def _liveness_failed(self, now: float) -> bool:
        """Run the liveness probe when due; True once it failed `failureThreshold` times in a row."""
        live = self.liveness
        if live is None or now < live.next_at:
            return False
        live.next_at = now + live.period
        error = self.check(live.spec)
        live.failures = live.failures + 1 if error else 0
        live.last_error = error
        if error:
            log.info("%s/%s liveness probe failed (%d/%d): %s", self.namespace, self.pod_name,
                     live.failures, live.threshold, error)  # fmt: skip
        return live.failures >= live.threshold

    def _exited(self, now: float, why: str) -> None:
        ran = now - self.started_at
        self.backoff = 1.0 if ran > 60 else min(self.backoff * 2, BACKOFF_MAX)
        self.next_start = now + self.backoff
        self.restarts += 1
        self.proc = None
        self.ready = False
        self.waiting_reason = f"CrashLoopBackOff: {why}"
        log.warning(
            "%s/%s %s after %.1fs; restart in %.0fs", self.namespace, self.pod_name, why, ran, self.backoff
        )

    def tick(self) -> None:
        """Advance the replica's state machine: wait for volumes, start, restart, probe."""
        now = time.monotonic()
        if self.proc is not None and self.proc.poll() is not None:
            self._exited(now, f"exited with {self.proc.returncode}")
        if self.proc is not None and self._liveness_failed(now):
            assert self.liveness is not None
            why = f"liveness probe failed {self.liveness.failures} times ({self.liveness.last_error})"
            self.stop()  # the kubelet kills the container and restarts it under the same backoff
            self.liveness_restarts += 1
            self._exited(now, why)
        if self.proc is None:
            if now < self.next_start:
                return
            try:
                self.prepare()
                reason = self.materialise()
                if not reason:
                    self.start()
                    self.waiting_reason = ""
                    return
            except ImagePullError as exc:
                self.waiting_reason = f"ErrImagePull: {exc}"
                self.backoff = min(self.backoff * 2, BACKOFF_MAX)
                self.next_start = now + self.backoff
                return
            except containers.SCCRefusedError as exc:
                self.waiting_reason = f'FailedCreate: pods "{self.pod_name}" is forbidden: {exc}'
                self.next_start = now + 2
                return
            except ConfigError as exc:
                reason = str(exc)
                self.stop()
            self.waiting_reason = f"CreateContainerConfigError: {reason}"
            self.next_start = now + 2
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
            "container": self.container_name if self.mode == "container" and self.proc else None,
            "image": str(self.container.get("image", "")),
            "ready": self.ready,
            "restarts": self.restarts,
            "liveness_restarts": self.liveness_restarts,
            "ports": {str(k): v for k, v in self.ports.items()},
            "waiting": self.waiting_reason,
            "log": str(self.dir / "container.log"),
        }


class Runner:
    """Reconciles matching Deployments of every cluster into Replicas, once per SYNC_SECONDS."""

    def __init__(
        self,
        clusters: list[Cluster],
        state_dir: Path,
        image_pattern: str,
        extra_env: dict[str, str] | None = None,
        mode: str = "process",
        clusters_dir: Path | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode {mode!r}: one of {', '.join(MODES)}")
        self.fixed_clusters = list(clusters)
        self.clusters = list(clusters)
        # clusters added and removed while the runner runs (a test's extra managed cluster): one
        # file per cluster, named for it, holding its kubeconfig's path; re-read on every pass
        self.clusters_dir = clusters_dir
        self._added: dict[str, Cluster] = {}
        self._listed = False
        self.extra_env = dict(extra_env or {})
        self.mode = mode
        # Labels this runner's containers, so that a restarted runner removes what it left.
        self.label = containers.runner_label(state_dir)
        self.state_dir = state_dir
        self.image = re.compile(image_pattern)
        self.search_path = ":".join(
            [
                str(install_harness_commands(state_dir / "bin")),
                str(Path(sys.executable).parent),
                "/usr/local/bin:/usr/bin:/bin",
            ]
        )
        self.replicas: dict[tuple[str, str, str], list[Replica]] = {}
        self.stop_event = threading.Event()
        self._last_status: dict[tuple[str, str, str], dict[str, Any]] = {}

    def _matches(self, deploy: dict[str, Any]) -> bool:
        containers = deploy["spec"]["template"].get("spec", {}).get("containers", [])
        return bool(containers) and bool(self.image.search(containers[0].get("image", "")))

    def _refresh_clusters(self) -> None:
        """Serve the clusters of `clusters_dir` besides the fixed ones; a removed file drops its cluster."""
        if self.clusters_dir is None:
            return
        wanted: dict[str, Path] = {}
        with contextlib.suppress(FileNotFoundError):
            for f in self.clusters_dir.iterdir():
                if not f.name.startswith("."):
                    wanted[f.name] = Path(f.read_text().strip())
        changed = not self._listed  # a restarted runner writes its list once, whatever a predecessor left
        for name in list(self._added):
            if wanted.get(name) != self._added[name].kubeconfig:
                log.info("cluster %s removed; its processes stop", name)
                del self._added[name]
                changed = True
        for name, kubeconfig in wanted.items():
            if name not in self._added:
                try:
                    self._added[name] = Cluster(name, kubeconfig)
                except Exception as exc:  # a half-written kubeconfig: tried again on the next pass
                    log.warning("cluster %s (%s) not served yet: %s", name, kubeconfig, exc)
                    continue
                log.info("serving cluster %s too (%s)", name, kubeconfig)
                changed = True
        if not changed:
            return
        self.clusters = [*self.fixed_clusters, *self._added.values()]
        tmp = self.state_dir / "clusters.tmp"
        tmp.write_text("\n".join(c.name for c in self.clusters) + "\n")
        tmp.replace(self.state_dir / "clusters")
        self._listed = True

    def sync_once(self) -> None:
        """One pass over every cluster."""
        self._refresh_clusters()
        seen: set[tuple[str, str, str]] = set()
        for cluster in self.clusters:
            try:
                deployments = cluster.api.request("GET", DEPLOYMENTS.path())["items"]
            except KubeError as exc:
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
            current.append(
                Replica(
                    cluster,
                    d,
                    len(current),
                    self.state_dir,
                    self.search_path,
                    self.extra_env,
                    mode=self.mode,
                    runner_label=self.label,
                )
            )
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
        path = DEPLOYMENTS.path(key[1], key[2], "status")
        try:
            cluster.api.request("PATCH", path, body=body, content_type=MERGE_PATCH)
            self._last_status[key] = summary
        except KubeError as exc:
            log.warning("status of %s not written: %s", "/".join(key), exc)

    def _write_pods(self) -> None:
        rows = [r.describe() for reps in self.replicas.values() for r in reps]
        tmp = self.state_dir / "pods.json.tmp"
        tmp.write_text(json.dumps(rows, indent=1))
        tmp.replace(self.state_dir / "pods.json")

    def run(self) -> None:
        """Sync until SIGTERM/SIGINT, then stop every process."""
        if self.mode == "container":
            containers.remove_containers(runner_label=self.label)  # a SIGKILLed predecessor's
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
            if self.mode == "container":
                containers.remove_containers(runner_label=self.label)
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
@click.option(
    "--mode",
    type=click.Choice(MODES),
    default="container",
    show_default=True,
    help="container: run the pod's image with podman (the default); process: run the checkout's "
    "console scripts (quick local iteration, no image needed).",
)
@click.option(
    "--clusters-dir",
    type=click.Path(path_type=Path),
    help="Also serve the clusters of this directory (file NAME holds a kubeconfig path), re-read "
    "on every pass: clusters a test adds or removes while the runner runs.",
)
@click.option(
    "--extra-env",
    "extra_env",
    multiple=True,
    metavar="NAME=VALUE",
    help="A variable every replica gets before its container's own env (repeatable).",
)
@click.pass_context
def cli(
    ctx: click.Context,
    state_dir: Path | None,
    clusters: tuple[str, ...],
    image_pattern: str,
    mode: str,
    clusters_dir: Path | None,
    extra_env: tuple[str, ...],
) -> None:
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
    env: dict[str, str] = {}
    for item in extra_env:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{item!r} is not NAME=VALUE", param_hint="--extra-env")
        env[name] = value
    runner = Runner(parsed, state_dir, image_pattern, env, mode, clusters_dir)
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
