"""The agent's RBAC on the hub, in its cluster namespace, rendered from templates/hub/agent-rbac.yaml.j2.

The same template is what the integration tests prove the agent can (and cannot) do with, so the
rules live in one file.  The objects carry a non-controller ownerReference to the MCA, so garbage
collection removes them when the addon is disabled (the Go addon leaked them).

The AddOnPlacementScores of other addons live in the same cluster namespace.  So every rule that
names a score is limited to `granted_score_names`: the scores the cluster's config work sends the
agent, except names another owner's score holds, plus the ones its agent wrote that still exist (it
must be able to remove the scores of a withdrawn scorer).  The manager re-renders the Role whenever
any of them changes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dynamic_scoring.addon.constants import ADDON_NAME, SUMMARY_CONFIGMAP
from dynamic_scoring.addon.registration.identity import rbac_subjects
from dynamic_scoring.addon.render.templating import TEMPLATES_DIR, render_objects
from dynamic_scoring.addon.work.builder import owner_reference
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.ocm.naming import aps_name
from dynamic_scoring.ocm.score_labels import written_by_agent

HUB_RBAC_TEMPLATE = "hub/agent-rbac.yaml.j2"
SUMMARIES_KEY = "summaries"
"""The config ConfigMap's key holding the summaries (dynamic_scoring.addon.distribution.configmap writes
it)."""


def config_work_summaries(config_work: JSON | None) -> list[JSON] | None:
    """The summary entries (raw JSON objects) of a cluster's config work; None when unreadable.

    Read from the work itself, which is exactly what the agent is sent.
    """
    manifests = (((config_work or {}).get("spec") or {}).get("workload") or {}).get("manifests") or []
    for manifest in manifests:
        if not isinstance(manifest, dict) or manifest.get("kind") != "ConfigMap":
            continue
        if (manifest.get("metadata") or {}).get("name") != SUMMARY_CONFIGMAP:
            continue
        try:
            entries = json.loads((manifest.get("data") or {}).get(SUMMARIES_KEY) or "[]")
        except ValueError:
            return None
        return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else None
    return None


def sent_score_names(config_work: JSON | None) -> set[str]:
    """The AddOnPlacementScore names of the summaries in a cluster's config work.

    Only each entry's `scoreName` matters here: an entry the agent will reject costs one unused
    name, never a missing one.  A work that cannot be read yields no names.
    """
    entries = config_work_summaries(config_work) or []
    return {
        aps_name(e["scoreName"]) for e in entries if isinstance(e.get("scoreName"), str) and e["scoreName"]
    }


def granted_score_names(sent: Iterable[str], scores: Iterable[JSON], taken: Iterable[str] = ()) -> list[str]:
    """The score names the agent's hub Role allows, sorted: the sent ones and its own leftovers.

    A sent name that another owner's score holds (`taken`) is left out: the agent then cannot
    read, write or delete that object, whatever it does.

    Args:
        sent: `sent_score_names` of the cluster's config work.
        scores: the AddOnPlacementScores in the cluster's namespace.
        taken: names of scores in the namespace that this addon's agents did not write and may
            not adopt.
    """
    ours = {str(s["metadata"]["name"]) for s in scores if written_by_agent(s, ADDON_NAME)}
    return sorted({*(set(sent) - set(taken)), *ours})


def render_hub_rbac(
    mca: JSON,
    subject: JSON | None = None,
    templates_dir: Path = TEMPLATES_DIR,
    *,
    score_names: Iterable[str] = (),
) -> list[JSON]:
    """The Role and RoleBinding for the agent of `mca`'s cluster, owned by `mca`.

    Args:
        mca: the ManagedClusterAddOn (needs metadata.name, namespace, uid).
        subject: the registration subject to bind (`registration.status.registration_subject`),
            filtered by `identity.rbac_subjects`; None binds the cluster's addon group, which every
            CSR-issued agent identity carries.
        templates_dir: where `hub/agent-rbac.yaml.j2` lives.
        score_names: the AddOnPlacementScore names the agent may read, patch and delete
            (`granted_score_names`); none leaves it only list and create.
    """
    cluster = mca["metadata"]["namespace"]
    values: dict[str, Any] = {
        "cluster_name": cluster,
        "addon_name": ADDON_NAME,
        "score_names": sorted(set(score_names)),
    }
    if subject is not None:
        values["subjects"] = rbac_subjects(subject, cluster)
    objects = render_objects(HUB_RBAC_TEMPLATE, values, templates_dir)
    for obj in objects:
        obj["metadata"]["ownerReferences"] = [owner_reference(mca, controller=False)]
    return objects
