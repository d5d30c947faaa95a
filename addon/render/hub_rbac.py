"""The agent's RBAC on the hub, in its cluster namespace, rendered from templates/hub/agent-rbac.yaml.j2.

The same template is what the integration tests prove the agent can (and cannot) do with, so the
rules live in one file.  The objects carry a non-controller ownerReference to the MCA, so garbage
collection removes them when the addon is disabled (the Go addon leaked them, contract §8.1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from addon.constants import ADDON_NAME
from addon.registration.identity import rbac_subjects
from addon.render.templating import TEMPLATES_DIR, render_objects
from addon.work.builder import owner_reference

JSON = dict[str, Any]

HUB_RBAC_TEMPLATE = "hub/agent-rbac.yaml.j2"


def render_hub_rbac(
    mca: JSON, subject: JSON | None = None, templates_dir: Path = TEMPLATES_DIR
) -> list[JSON]:
    """The Role and RoleBinding for the agent of `mca`'s cluster, owned by `mca`.

    Args:
        mca: the ManagedClusterAddOn (needs metadata.name, namespace, uid).
        subject: the registration subject to bind (`registration.status.registration_subject`);
            None binds the cluster's addon group, which every CSR-issued agent identity carries.
        templates_dir: where `hub/agent-rbac.yaml.j2` lives.
    """
    values: dict[str, Any] = {"cluster_name": mca["metadata"]["namespace"], "addon_name": ADDON_NAME}
    if subject is not None:
        values["subjects"] = rbac_subjects(subject, mca["metadata"]["namespace"])
    objects = render_objects(HUB_RBAC_TEMPLATE, values, templates_dir)
    for obj in objects:
        obj["metadata"]["ownerReferences"] = [owner_reference(mca, controller=False)]
    return objects
