"""The restricted-v2 rules themselves: each one refuses what OpenShift's SCC would refuse."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.restricted_v2 import violations

GOOD: dict[str, Any] = {
    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [
        {
            "name": "c",
            "ports": [{"containerPort": 8080}],
            "securityContext": {
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
            },
        }
    ],
    "volumes": [{"name": "tmp", "emptyDir": {}}, {"name": "s", "secret": {"secretName": "x"}}],
}


def container(pod: dict[str, Any]) -> dict[str, Any]:
    c: dict[str, Any] = pod["containers"][0]
    return c


BREAKS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "pod user": (lambda p: p["securityContext"].update(runAsUser=65532), "securityContext.runAsUser"),
    "pod group": (lambda p: p["securityContext"].update(runAsGroup=0), "securityContext.runAsGroup"),
    "fsGroup": (lambda p: p["securityContext"].update(fsGroup=2000), "securityContext.fsGroup"),
    "selinux": (
        lambda p: p["securityContext"].update(seLinuxOptions={"level": "s0"}),
        "securityContext.seLinuxOptions",
    ),
    "container user": (
        lambda p: container(p)["securityContext"].update(runAsUser=1000),
        "container 'c' securityContext.runAsUser",
    ),
    "privileged": (lambda p: container(p)["securityContext"].update(privileged=True), "is privileged"),
    "escalation unset": (
        lambda p: container(p)["securityContext"].pop("allowPrivilegeEscalation"),
        "allowPrivilegeEscalation: false",
    ),
    "caps kept": (lambda p: container(p)["securityContext"]["capabilities"].pop("drop"), "drop ALL"),
    "caps added": (
        lambda p: container(p)["securityContext"]["capabilities"].update(add=["SYS_ADMIN"]),
        "adds capabilities ['SYS_ADMIN']",
    ),
    "unconfined": (
        lambda p: p["securityContext"].update(seccompProfile={"type": "Unconfined"}),
        "seccomp profile 'Unconfined'",
    ),
    "no seccomp": (lambda p: p["securityContext"].pop("seccompProfile"), "seccomp profile None"),
    "host network": (lambda p: p.update(hostNetwork=True), "hostNetwork is true"),
    "host pid": (lambda p: p.update(hostPID=True), "hostPID is true"),
    "host port": (lambda p: container(p)["ports"][0].update(hostPort=80), "host port 80"),
    "hostPath": (
        lambda p: p["volumes"].append({"name": "h", "hostPath": {"path": "/"}}),
        "volume 'h' is of type ['hostPath']",
    ),
}


def test_a_restricted_pod_breaks_no_rule() -> None:
    assert violations(GOOD) == []


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_each_rule_refuses_what_the_scc_refuses(name: str) -> None:
    pod = copy.deepcopy(GOOD)
    change, expected = BREAKS[name]
    change(pod)
    found = violations(pod)
    assert len(found) == 1 and expected in found[0], found
