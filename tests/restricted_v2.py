"""OpenShift's default ``restricted-v2`` SecurityContextConstraints, as rules over a pod spec.

No OpenShift runs in this project's tests, so its admission cannot be asked.  These are the SCC's
rules for what a pod may say (OpenShift 4.11 and later), written out so that every rendered manager
and agent pod is held to them:

* ``runAsUser: MustRunAsRange``: the UID comes from the namespace's allocated range, which no
  manifest knows in advance, so no pod or container may name one;
* ``fsGroup: MustRunAs`` and ``seLinuxContext: MustRunAs``: likewise assigned from the namespace,
  so no ``fsGroup`` and no ``seLinuxOptions``; nor a ``runAsGroup`` (the pod runs with GID 0);
* no privileged container, ``allowPrivilegeEscalation: false``, every capability dropped and none
  added but ``NET_BIND_SERVICE``;
* the ``runtime/default`` seccomp profile only;
* no host network, PID or IPC namespace, no host port, and only these volume types: configMap,
  csi, downwardAPI, emptyDir, ephemeral, persistentVolumeClaim, projected, secret.

The rules are stricter than the SCC in one place: it would default ``allowPrivilegeEscalation`` and
the seccomp profile where a pod leaves them out, and these rules want them said, as Kubernetes'
``restricted`` Pod Security level does.
"""

from __future__ import annotations

from typing import Any

ALLOWED_VOLUMES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)
ALLOWED_ADDED_CAPABILITIES = frozenset({"NET_BIND_SERVICE"})
ASSIGNED = ("runAsUser", "runAsGroup", "fsGroup", "seLinuxOptions")
"""What the SCC assigns from the namespace: a pod that names any of them asks for what it cannot know."""


def violations(pod: dict[str, Any]) -> list[str]:
    """Every rule ``pod`` (a pod spec) breaks, one line each naming the field; empty when admitted."""
    found: list[str] = []
    pod_sc = pod.get("securityContext") or {}
    found += [f"securityContext.{k} is set ({pod_sc[k]!r})" for k in ASSIGNED if k in pod_sc]
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(flag):
            found.append(f"{flag} is true")
    for volume in pod.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= ALLOWED_VOLUMES:
            found.append(f"volume {volume.get('name')!r} is of type {sorted(kinds)}")
    pod_seccomp = (pod_sc.get("seccompProfile") or {}).get("type")
    for c in [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]:
        where = f"container {c.get('name')!r}"
        sc = c.get("securityContext") or {}
        found += [f"{where} securityContext.{k} is set ({sc[k]!r})" for k in ASSIGNED if k in sc]
        if sc.get("privileged"):
            found.append(f"{where} is privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            found.append(f"{where} does not set allowPrivilegeEscalation: false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            found.append(f"{where} does not drop ALL capabilities")
        added = set(caps.get("add") or []) - ALLOWED_ADDED_CAPABILITIES
        if added:
            found.append(f"{where} adds capabilities {sorted(added)}")
        seccomp = (sc.get("seccompProfile") or {}).get("type") or pod_seccomp
        if seccomp != "RuntimeDefault":
            found.append(f"{where} runs with seccomp profile {seccomp!r}, not RuntimeDefault")
        for port in c.get("ports") or []:
            if port.get("hostPort"):
                found.append(f"{where} uses host port {port['hostPort']}")
    return found


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    """The pod spec of a Deployment (or any workload with ``spec.template``)."""
    spec: dict[str, Any] = workload["spec"]["template"]["spec"]
    return spec
