"""Every object on a cluster, by identity: what an install must add and an uninstall must take away.

`snapshot` lists every listable resource type the apiserver serves (`kubectl api-resources`) in one
`kubectl get`, so an object of a kind nobody thought of still shows up.  Tests take one snapshot
before installing and compare after uninstalling.

Left out, because they are history rather than state: Events, CertificateSigningRequests (the
klusterlet's requests, which kube-controller-manager's csrcleaner deletes an hour after they are
signed), and the two objects kube-controller-manager adds to every new namespace
(`kube-root-ca.crt`, ServiceAccount `default`).
"""

from __future__ import annotations

import json
from typing import NamedTuple

from e2e.kube import Kubectl

HISTORY_KINDS = {"Event", "CertificateSigningRequest"}
PER_NAMESPACE = {("ConfigMap", "kube-root-ca.crt"), ("ServiceAccount", "default")}


class Key(NamedTuple):
    """One object's identity."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}"


def snapshot(kubectl: Kubectl) -> set[Key]:
    """Every object of every listable kind, except history (see the module docstring)."""
    names = kubectl.run("api-resources", "--verbs=list", "-o", "name").split()
    kinds = [
        n for n in names if not n.startswith("events") and not n.startswith("certificatesigningrequests")
    ]
    listed = json.loads(kubectl.run("get", ",".join(kinds), "--all-namespaces", "-o", "json"))
    out: set[Key] = set()
    for item in listed.get("items") or []:
        kind = item["kind"]
        meta = item["metadata"]
        if kind in HISTORY_KINDS or (kind, meta["name"]) in PER_NAMESPACE:
            continue
        out.add(Key(kind, meta.get("namespace", ""), meta["name"]))
    return out
