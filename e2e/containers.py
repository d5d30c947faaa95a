"""The runner's container mode: a pod's container as `podman run`, with what the kubelet enforces.

The process runner (`e2e.runner`) used to start our console scripts from the checkout's
virtualenv, so the pod's image, user, read-only root filesystem and capabilities were never
exercised.  In container mode it runs the pod's own image through podman (runc) on the host
network, and this module turns the pod spec into that `podman run` command line:

* **image**: `--pull never`: an image that is not in local storage fails the start with the
  kubelet's `ErrImagePull`; nothing ever falls back to the checkout.
* **securityContext**, pod level merged with container level as the kubelet does: runAsUser and
  runAsGroup (`--user`), supplementalGroups and fsGroup (`--group-add`), runAsNonRoot (checked
  against the effective uid, or the image's USER when none is set: a root or non-numeric user is
  refused with the kubelet's message), readOnlyRootFilesystem (`--read-only` without podman's
  extra tmpfs mounts, so that only emptyDirs are writable, as in a pod), capabilities
  (`--cap-drop`/`--cap-add`), allowPrivilegeEscalation: false (`no-new-privileges`).
* **resources.limits.memory** becomes `--memory` (cgroup v1 enforces it here: an allocation over
  the limit is OOM-killed with exit 137).  CPU limits are not applied: the tests never depend on
  them and a throttled manager would only slow the suite.
* **OpenShift's restricted-v2 SCC**, for a namespace carrying OpenShift's
  `openshift.io/sa.scc.uid-range` annotation: the pod gets the namespace's first UID (and runs
  with GID 0) and fsGroup where it names none, and a pod naming a UID outside the range is not
  started, with OpenShift's message (`admit_restricted_v2`).
* **env** values travel in podman's own environment (`--env NAME` takes the value from there),
  so Secret-sourced values never appear on a command line; the few names podman itself reads
  (PATH, HOME, TMPDIR, ...) go on the command line instead.

Pure functions only; `e2e.runner` runs the command and owns the volumes it mounts.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e.image import podman, podman_global, ulimits

LABEL = "io.dynamic-scoring.e2e.runner"
# Variables podman reads for itself; the container's values for these go on the command line.
PODMAN_OWN_ENV = frozenset({"PATH", "HOME", "TMPDIR", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME"})
_QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|k|K|M|G|T|e[0-9]+)?$")
_UNITS = {
    None: 1,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "k": 10**3,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
}


class NonRootError(Exception):
    """runAsNonRoot is set and the container would run as root (the kubelet's refusal)."""


def memory_bytes(quantity: str) -> int:
    """A Kubernetes memory quantity ("128Mi", "1G", "5e8", "1048576") in bytes."""
    m = _QUANTITY.match(str(quantity).strip())
    if m is None:
        raise ValueError(f"memory quantity {quantity!r} is not understood")
    number, unit = float(m.group(1)), m.group(2)
    if unit is not None and unit.startswith("e"):
        return int(number * 10 ** int(unit[1:]))
    return int(number * _UNITS[unit])


@dataclass(frozen=True)
class Identity:
    """Who the container runs as, after merging pod and container securityContext."""

    uid: int | None
    gid: int | None
    groups: tuple[int, ...]


def identity(pod_spec: Mapping[str, Any], container: Mapping[str, Any], image_user: str) -> Identity:
    """The effective user, checked against runAsNonRoot as the kubelet checks it.

    `image_user` is the image's USER ("" means root).  Raises NonRootError with the kubelet's
    wording when the pod asks for non-root and would not get it.
    """
    pod_sc = pod_spec.get("securityContext") or {}
    c_sc = container.get("securityContext") or {}

    def pick(key: str) -> Any:
        return c_sc[key] if key in c_sc else pod_sc.get(key)

    uid, gid, non_root = pick("runAsUser"), pick("runAsGroup"), pick("runAsNonRoot")
    if non_root:
        if uid is not None:
            if int(uid) == 0:
                raise NonRootError("container's runAsUser breaks non-root policy")
        else:
            user = image_user.split(":")[0]
            if not user.isdigit():
                if user in ("", "root"):
                    raise NonRootError("container has runAsNonRoot and image will run as root")
                raise NonRootError(
                    f"container has runAsNonRoot and image has non-numeric user ({user}), "
                    "cannot verify user is non-root"
                )
            if int(user) == 0:
                raise NonRootError("container has runAsNonRoot and image will run as root")
    groups = [int(g) for g in pod_sc.get("supplementalGroups") or []]
    if pod_sc.get("fsGroup") is not None:
        groups.append(int(pod_sc["fsGroup"]))
    return Identity(
        uid=None if uid is None else int(uid),
        gid=None if gid is None else int(gid),
        groups=tuple(dict.fromkeys(groups)),
    )


SCC_UID_RANGE = "openshift.io/sa.scc.uid-range"
SCC_SUPPLEMENTAL_GROUPS = "openshift.io/sa.scc.supplemental-groups"


class SCCRefusedError(Exception):
    """OpenShift's restricted-v2 SCC would not admit the pod (the ReplicaSet's FailedCreate)."""


def _range(value: str) -> tuple[int, int]:
    """An OpenShift namespace range annotation, ``<start>/<size>``, as (first, last)."""
    start, _, size = value.partition("/")
    return int(start), int(start) + int(size or "1") - 1


def admit_restricted_v2(pod_spec: Mapping[str, Any], annotations: Mapping[str, str]) -> dict[str, Any] | None:
    """The pod spec as OpenShift's ``restricted-v2`` SCC admits it, in a namespace with these annotations.

    Emulates the admission for the runner, so that a pod built for OpenShift runs as it would
    there: None when the namespace carries no ``openshift.io/sa.scc.uid-range`` (not OpenShift);
    otherwise a copy with the namespace's first UID as ``runAsUser`` and its first supplemental
    group as ``fsGroup`` where the pod names none (the container then runs with GID 0, as the
    runtime gives a UID the image does not know).  A pod that names a UID or fsGroup outside the
    ranges is refused with OpenShift's wording.  Privilege, capabilities and the like are not
    re-checked here: ``tests/restricted_v2.py`` holds the rendered pods to those rules.
    """
    uid_range = annotations.get(SCC_UID_RANGE)
    if not uid_range:
        return None
    first, last = _range(uid_range)
    g_first, g_last = _range(annotations.get(SCC_SUPPLEMENTAL_GROUPS) or uid_range)
    spec = json.loads(json.dumps(pod_spec))
    pod_sc = spec.setdefault("securityContext", {})
    wrong = []
    places = [("spec.securityContext", pod_sc)] + [
        (f"spec.containers[{i}].securityContext", c.get("securityContext") or {})
        for i, c in enumerate(spec.get("containers") or [])
    ]
    for where, sc in places:
        uid = sc.get("runAsUser")
        if uid is not None and not first <= int(uid) <= last:
            wrong.append(f"{where}.runAsUser: Invalid value: {uid}: must be in the ranges: [{first}, {last}]")
    fs_group = pod_sc.get("fsGroup")
    if fs_group is not None and not g_first <= int(fs_group) <= g_last:
        wrong.append(
            f"spec.securityContext.fsGroup: Invalid value: []int64{{{fs_group}}}: "
            f"{fs_group} is not an allowed group"
        )
    if wrong:
        raise SCCRefusedError(
            'unable to validate against any security context constraint: [provider "restricted-v2": '
            + ", ".join(wrong)
            + "]"
        )
    if not any("runAsUser" in sc for _, sc in places):
        pod_sc["runAsUser"] = first
    pod_sc.setdefault("fsGroup", g_first)
    return dict(spec)


def runner_label(state_dir: Path) -> str:
    """The label value of one runner's containers, derived from its state directory.

    Whoever knows the directory (a restarted runner, `e2e.cli down`) finds what it left.
    """
    return hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:12]


def container_name(runner_label: str, cluster: str, namespace: str, pod: str) -> str:
    """A podman container name unique per runner and cluster/namespace/pod, readable in `podman ps`.

    The runner is part of it: two control planes on one host both have a `hub` cluster with the
    same manager pod, and `--replace` must never take the other's container.
    """
    raw = f"{runner_label}_{cluster}_{namespace}_{pod}"
    safe = re.sub(r"[^a-zA-Z0-9_.-]", "-", raw)[:200]
    return f"ds-{safe}-{hashlib.sha256(raw.encode()).hexdigest()[:6]}"


def run_argv(
    *,
    name: str,
    runner_label: str,
    image: str,
    hostname: str,
    pod_spec: Mapping[str, Any],
    container: Mapping[str, Any],
    who: Identity,
    image_user: str,
    mounts: Sequence[tuple[str, str, bool]],
    env_names: Sequence[str],
    env: Mapping[str, str],
    command: Sequence[str],
    args: Sequence[str],
    publish: Sequence[str] = (),
) -> list[str]:
    """The `podman run` command for one container (env values are passed in podman's environment).

    Pods share the host network, as the runner's port rewriting expects; with ``publish``
    (``127.0.0.1:<host port>:<container port>`` entries) the container gets its own network
    namespace instead, so a workload that listens on a fixed port on every interface (a user's
    scorer) is reachable only on the loopback port published for it.
    """
    sc = container.get("securityContext") or {}
    argv = [
        *podman_global(),
        "run",
        "--rm",
        "--replace",
        "--name",
        name,
        "--label",
        f"{LABEL}={runner_label}",
        "--pull",
        "never",
        "--network",
        "bridge" if publish else "host",
        *(flag for entry in publish for flag in ("--publish", entry)),
        "--hostname",
        hostname,
        "--log-driver",
        "none",
        *ulimits(),
    ]
    if who.uid is not None or who.gid is not None:
        user = str(who.uid) if who.uid is not None else (image_user.split(":")[0] or "0")
        argv += ["--user", user if who.gid is None else f"{user}:{who.gid}"]
    for group in who.groups:
        argv += ["--group-add", str(group)]
    if sc.get("readOnlyRootFilesystem"):
        argv += ["--read-only", "--read-only-tmpfs=false"]
    caps = sc.get("capabilities") or {}
    for cap in caps.get("drop") or []:
        argv += ["--cap-drop", str(cap)]
    for cap in caps.get("add") or []:
        argv += ["--cap-add", str(cap)]
    if sc.get("allowPrivilegeEscalation") is False:
        argv += ["--security-opt", "no-new-privileges"]
    if sc.get("privileged"):
        argv += ["--privileged"]
    limit = ((container.get("resources") or {}).get("limits") or {}).get("memory")
    if limit is not None:
        argv += ["--memory", str(memory_bytes(str(limit)))]
    if container.get("workingDir"):
        argv += ["--workdir", str(container["workingDir"])]
    for src, dst, read_only in mounts:
        argv += ["--volume", f"{src}:{dst}:{'ro' if read_only else 'rw'}"]
    for key in env_names:
        argv += ["--env", f"{key}={env[key]}" if key in PODMAN_OWN_ENV else key]
    if command:
        argv += ["--entrypoint", json.dumps(list(command))]
    return [*argv, image, *args]


def image_user(image: str) -> str | None:
    """The image's USER, or None when the image is not in local storage (one podman call: both)."""
    proc = subprocess.run(
        [*podman_global(), "image", "inspect", "--format", "{{.Config.User}}", image],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


def remove_containers(runner_label: str | None = None, name: str | None = None) -> list[str]:
    """Force-remove this runner's containers (by label) or one container (by name), if any.

    A `podman run` that was SIGKILLed leaves its container running under conmon; the runner
    removes it so that a restarted runner never runs a replica twice.  Returns what was removed;
    without podman on this host there is nothing to remove.
    """
    if shutil.which("podman") is None:
        return []
    if name is not None:
        targets = [name]
    else:
        listed = podman(
            "ps", "--all", "--quiet", "--filter", f"label={LABEL}={runner_label}", check=False, timeout=60
        )
        targets = listed.split()
    if targets:
        podman("rm", "--force", "--ignore", "--time", "0", *targets, check=False, timeout=120)
    return targets
