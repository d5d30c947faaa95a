"""Rendered manifests in, the deploy ManifestWorks out: names, metadata, feedback rules, packing.

Everything OCM reads off a framework addon's works is reproduced here: the
`addon-name` label (OCM's progressing controller and `clusteradm get addon` select on it), the
config-spec-hash annotation (OCM's `Progressing` compares it with the MCA's config references),
the controller ownerReference to the MCA (garbage collection on disable), status feedback for
each Deployment, and `deleteOption` for the objects that must outlive the addon.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from dynamic_scoring.addon.config.references import config_references
from dynamic_scoring.addon.config.spec_hash import go_json
from dynamic_scoring.addon.constants import (
    ADDON_API_VERSION,
    ADDON_NAME,
    ADDON_NAME_LABEL,
    CONFIG_SPEC_HASH_ANNOTATION,
    DELETION_ORPHAN_ANNOTATION,
    DEPLOY_WORK_PREFIX,
    WORK_SIZE_LIMIT,
)
from dynamic_scoring.addon.errors import WorkTooLargeError
from dynamic_scoring.kube.jsontypes import JSON

WORK_API_VERSION = "work.open-cluster-management.io/v1"


def config_spec_hash_annotation(mca: JSON) -> str | None:
    """The work annotation's value: `{"<resource>[.<group>]/<namespace>/<name>": "<specHash>", ...}`.

    None when the MCA has no config references, in which case the work carries no annotation (OCM
    then matches the work to the MCA only while the references stay empty).  Encoded as Go's
    `json.Marshal` encodes the framework's map, so a work written by either is byte-identical.
    """
    refs = config_references(mca)
    if not refs:
        return None
    hashes: dict[str, str] = {}
    for ref in refs:
        desired = ref.get("desiredConfig")
        if desired is None:
            continue
        key = ref.get("resource", "")
        if ref.get("group"):
            key += f".{ref['group']}"
        key += f"/{desired.get('namespace', '')}/{desired.get('name', '')}"
        hashes[key] = desired.get("specHash", "")
    return go_json(hashes)


def owner_reference(mca: JSON, *, controller: bool) -> JSON:
    """A reference to the MCA; works get the controller reference, hub RBAC a plain one."""
    return {
        "apiVersion": ADDON_API_VERSION,
        "kind": "ManagedClusterAddOn",
        "name": mca["metadata"]["name"],
        "uid": mca["metadata"]["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def guess_plural(kind: str) -> str:
    """The lower-case plural of a kind, for orphaning rules.

    The work agent compares a rule's `resource` with the real resource name of what it applied,
    so a wrong plural silently deletes an object that was meant to survive.  apimachinery's
    `UnsafeGuessKindToResource` (which the framework uses) turns every trailing `y` into `ies`,
    which is wrong for `Gateway`; this keeps its other rules (`s` -> `ses`, `endpoints` unchanged)
    and applies the English vowel rule for `y`.  Every kind this addon orphans (Namespace) gets the
    same answer either way.
    """
    lower = kind.lower()
    if lower.endswith("endpoints"):
        return lower
    if lower.endswith("s"):
        return lower + "es"
    if lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        return lower[:-1] + "ies"
    return lower + "s"


def manifest_configs(manifests: Sequence[JSON]) -> list[JSON]:
    """Status feedback for every Deployment that is meant to run (replicas != 0).

    WellKnownStatus makes the work agent report `ReadyReplicas`, `Replicas` and
    `AvailableReplicas` back on the work every 10 s, which is what the framework's
    DeploymentAvailability prober reads and what `kubectl get manifestwork -o yaml` shows users.
    """
    configs = []
    for obj in manifests:
        if obj.get("kind") != "Deployment" or _group(obj.get("apiVersion", "")) != "apps":
            continue
        if obj.get("spec", {}).get("replicas", 1) == 0:
            continue
        configs.append(
            {
                "resourceIdentifier": {
                    "group": "apps",
                    "resource": "deployments",
                    "namespace": obj["metadata"].get("namespace", ""),
                    "name": obj["metadata"]["name"],
                },
                "feedbackRules": [{"type": "WellKnownStatus"}],
                # the CRD's default, written out: otherwise the stored work differs from the
                # desired one on every comparison and each resync would patch it again
                "feedbackScrapeType": "Poll",
            }
        )
    return configs


def delete_option(manifests: Sequence[JSON]) -> JSON | None:
    """`SelectivelyOrphan` for the objects annotated deletion-orphan; None (Foreground) otherwise."""
    rules = []
    for obj in manifests:
        if DELETION_ORPHAN_ANNOTATION not in (obj.get("metadata", {}).get("annotations") or {}):
            continue
        rule = {
            "group": _group(obj["apiVersion"]),
            "resource": guess_plural(obj["kind"]),
            "name": obj["metadata"]["name"],
        }
        if obj["metadata"].get("namespace"):
            rule["namespace"] = obj["metadata"]["namespace"]
        rules.append(rule)
    if not rules:
        return None
    return {"propagationPolicy": "SelectivelyOrphan", "selectivelyOrphans": {"orphaningRules": rules}}


def manifest_size(obj: JSON) -> int:
    """The bytes a manifest takes in the work: its compact JSON, as the framework measures it."""
    return len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def manifest_identity(obj: JSON) -> tuple[str, str, str, str]:
    """(group, kind, namespace, name): what makes two manifests the same object."""
    meta = obj.get("metadata", {})
    return (
        _group(obj.get("apiVersion", "")),
        obj.get("kind", ""),
        meta.get("namespace", ""),
        meta.get("name", ""),
    )


def work_index(name: str) -> int | None:
    """The index of a deploy work name `addon-dynamic-scoring-deploy-<i>`, None for other names."""
    prefix = f"{DEPLOY_WORK_PREFIX}-"
    if not name.startswith(prefix) or not name[len(prefix) :].isdigit():
        return None
    return int(name[len(prefix) :])


def pack(
    manifests: Sequence[JSON], existing: Sequence[JSON] = (), limit: int = WORK_SIZE_LIMIT
) -> dict[int, list[JSON]]:
    """Assign manifests to work indexes, each work's manifests totalling at most `limit` bytes.

    The framework's rules: a manifest stays in the existing work that already holds
    it while it fits (so a change rewrites as few works as possible); the rest, largest first, go
    to the existing work with the most room, then to new works numbered after the existing ones.
    Works left empty are dropped.  Under the limit this is always just index 0.

    Raises:
        WorkTooLargeError: one manifest alone is over the limit.
    """
    for obj in manifests:
        if manifest_size(obj) > limit:
            raise WorkTooLargeError(
                f"{obj.get('kind')} {obj.get('metadata', {}).get('name')} is {manifest_size(obj)} bytes; "
                f"one work holds at most {limit}"
            )
    if sum(manifest_size(m) for m in manifests) <= limit and not any(
        (work_index(w["metadata"]["name"]) or 0) > 0 for w in existing
    ):
        return {0: list(manifests)}

    where: dict[tuple[str, str, str, str], int] = {}
    for work in existing:
        index = work_index(work["metadata"]["name"])
        if index is None:
            continue
        for item in work.get("spec", {}).get("workload", {}).get("manifests", []):
            where.setdefault(manifest_identity(item), index)

    bins: dict[int, list[JSON]] = {i: [] for i in sorted(set(where.values()))}
    used: dict[int, int] = dict.fromkeys(bins, 0)
    rest = []
    for obj in manifests:
        index = where.get(manifest_identity(obj))
        size = manifest_size(obj)
        if index is not None and used[index] + size <= limit:
            bins[index].append(obj)
            used[index] += size
        else:
            rest.append(obj)
    next_index = max(bins, default=-1) + 1
    for obj in sorted(rest, key=manifest_size, reverse=True):
        size = manifest_size(obj)
        roomy = sorted((i for i in bins if used[i] + size <= limit), key=lambda i: (used[i] - limit, i))
        if roomy:
            target = roomy[0]
        else:
            target, next_index = next_index, next_index + 1
            bins[target], used[target] = [], 0
        bins[target].append(obj)
        used[target] += size
    return {i: objs for i, objs in sorted(bins.items()) if objs}


def dropping_stale_hash(work: JSON, current: JSON | None) -> JSON:
    """`work`, naming the config-spec-hash annotation null when `current` has it and `work` does not.

    The MCA lost its config references (e.g. the CMA's default config was removed).  A merge patch
    leaves the keys it does not name, so the stale hash must be named to be removed, or OCM reports
    Progressing ("mca and work configs mismatch") until the config is back.  A create (no
    `current`) never carries the null.
    """
    had = ((current or {}).get("metadata") or {}).get("annotations") or {}
    meta = work["metadata"]
    wanted = meta.get("annotations") or {}
    if CONFIG_SPEC_HASH_ANNOTATION not in had or CONFIG_SPEC_HASH_ANNOTATION in wanted:
        return work
    return {**work, "metadata": {**meta, "annotations": {**wanted, CONFIG_SPEC_HASH_ANNOTATION: None}}}


@dataclass(frozen=True)
class WorkPlan:
    """The deploy works to ensure and the names of deploy works to delete."""

    works: list[JSON]
    obsolete: list[str]


def build_deploy_works(
    mca: JSON, manifests: Sequence[JSON], existing: Sequence[JSON] = (), limit: int = WORK_SIZE_LIMIT
) -> WorkPlan:
    """The deploy works for `mca` carrying `manifests`, given the deploy works that exist now.

    `existing` are the works in the cluster namespace labelled for this addon (from the cache);
    works of other names are neither packed into nor deleted.  The result is deterministic for the
    same inputs, so a resync with nothing changed compares equal and writes nothing.
    """
    cluster = mca["metadata"]["namespace"]
    annotation = config_spec_hash_annotation(mca)
    configs = manifest_configs(manifests)
    deletion = delete_option(manifests)
    works: list[JSON] = []
    previous = {w["metadata"]["name"]: w for w in existing}
    for index, objs in pack(manifests, existing, limit).items():
        metadata: JSON = {
            "name": f"{DEPLOY_WORK_PREFIX}-{index}",
            "namespace": cluster,
            "labels": {ADDON_NAME_LABEL: ADDON_NAME},
            "ownerReferences": [owner_reference(mca, controller=True)],
        }
        if annotation is not None:
            metadata["annotations"] = {CONFIG_SPEC_HASH_ANNOTATION: annotation}
        spec: JSON = {"workload": {"manifests": list(objs)}}
        if configs:
            spec["manifestConfigs"] = configs
        if deletion is not None:
            spec["deleteOption"] = deletion
        work = {"apiVersion": WORK_API_VERSION, "kind": "ManifestWork", "metadata": metadata, "spec": spec}
        works.append(dropping_stale_hash(work, previous.get(metadata["name"])))
    names = {w["metadata"]["name"] for w in works}
    obsolete = sorted(
        w["metadata"]["name"]
        for w in existing
        if work_index(w["metadata"]["name"]) is not None and w["metadata"]["name"] not in names
    )
    return WorkPlan(works=works, obsolete=obsolete)


def manifest_applied(works: Sequence[JSON]) -> tuple[str, str, str] | None:
    """`ManifestApplied` (status, reason, message) from the works' `Applied` conditions.

    None while no work reports `Applied` yet: the caller then removes a stale False, as the
    framework does, rather than claiming anything.
    """
    seen = False
    for work in works:
        for cond in work.get("status", {}).get("conditions") or []:
            if cond.get("type") != "Applied":
                continue
            seen = True
            if cond.get("status") == "False":
                return (
                    "False",
                    "AddonManifestAppliedFailed",
                    f"work {work['metadata']['name']} apply failed: {cond.get('message', '')}",
                )
    if not seen:
        return None
    if all(
        any(
            c.get("type") == "Applied" and c.get("status") == "True"
            for c in w.get("status", {}).get("conditions") or []
        )
        for w in works
    ):
        return ("True", "AddonManifestApplied", "manifests of addon are applied successfully")
    return None
