"""The ManagedClusterAddOn status fields this manager owns, computed as merge patches.

OCM's addon-manager and the klusterlet write the same status, and a merge
patch replaces arrays whole.  So each function here takes the MCA as just read and returns only
the fields whose content we own and that differ, with `conditions` carrying every other writer's
entries unchanged; None means "nothing to write".  `Writer.patch_status` adds the
resourceVersion and retries on conflict.  We never write `Available` (Lease mode: the klusterlet
owns it), `Configured` or `Progressing` (OCM owns them).
"""

from __future__ import annotations

import datetime as dt

from dynamic_scoring.addon.constants import ADC_RESOURCE, ADDON_GROUP, KUBE_APISERVER_CLIENT_SIGNER
from dynamic_scoring.addon.registration.identity import default_registration
from dynamic_scoring.kube.conditions import find_condition, remove_condition, set_condition
from dynamic_scoring.kube.jsontypes import JSON

SUPPORTED_CONFIGS: list[JSON] = [{"group": ADDON_GROUP, "resource": ADC_RESOURCE}]
HEALTH_CHECK: JSON = {"mode": "Lease"}

REGISTRATION_APPLIED = "RegistrationApplied"
MANIFEST_APPLIED = "ManifestApplied"


def owned_by_cma(mca: JSON, addon_name: str) -> bool:
    """Whether OCM has set the MCA's ownerReference to our CMA; the framework waits for it."""
    return any(
        ref.get("kind") == "ClusterManagementAddOn" and ref.get("name") == addon_name
        for ref in mca.get("metadata", {}).get("ownerReferences") or []
    )


def supported_configs_patch(mca: JSON) -> JSON | None:
    """`status.supportedConfigs`: the config kinds we understand, so OCM accepts ADC references."""
    if (mca.get("status") or {}).get("supportedConfigs") == SUPPORTED_CONFIGS:
        return None
    return {"supportedConfigs": SUPPORTED_CONFIGS}


def desired_registrations(mca: JSON) -> list[JSON] | None:
    """The `registrations` to write, or None while the subject is not known yet.

    Under token auth (`kubeClientDriver: token`) the klusterlet owns the subject, which it sets to
    the agent's hub ServiceAccount: we keep it.  Otherwise we write the default subject.
    """
    status = mca.get("status") or {}
    cluster = mca["metadata"]["namespace"]
    if status.get("kubeClientDriver") == "token":
        for reg in status.get("registrations") or []:
            if reg.get("signerName") == KUBE_APISERVER_CLIENT_SIGNER and (reg.get("subject") or {}).get(
                "user"
            ):
                return [reg]
        return None
    return [default_registration(cluster)]


def registration_subject(mca: JSON) -> JSON | None:
    """The subject the hub RBAC binds: the one `desired_registrations` settles on."""
    regs = desired_registrations(mca)
    return None if regs is None else dict(regs[0]["subject"])


def registration_patch(
    mca: JSON,
    *,
    namespace: str,
    permission_error: str | None = None,
    now: dt.datetime | None = None,
) -> JSON | None:
    """`registrations`, `namespace`, `healthCheck` and `RegistrationApplied`, where they differ.

    Args:
        mca: the MCA as just read.
        namespace: the install namespace (`config.install_namespace.resolve_install_namespace`).
        permission_error: why the hub RBAC could not be applied, or None when it was.
        now: the transition time for a changed condition (tests pin it).
    """
    status = mca.get("status") or {}
    patch: JSON = {}
    conditions: list[JSON] = list(status.get("conditions") or [])
    if permission_error is not None:
        new_conditions = set_condition(
            conditions,
            REGISTRATION_APPLIED,
            "False",
            "SetPermissionFailed",
            f"Failed to set permission for hub agent: {permission_error}",
            None,
            now,
        )
    else:
        registrations = desired_registrations(mca)
        if registrations is None:
            new_conditions = set_condition(
                conditions,
                REGISTRATION_APPLIED,
                "False",
                "PermissionConfigPending",
                "Waiting for the klusterlet to report the agent's token subject",
                None,
                now,
            )
        else:
            if status.get("registrations") != registrations:
                patch["registrations"] = registrations
            new_conditions = set_condition(
                conditions,
                REGISTRATION_APPLIED,
                "True",
                "SetPermissionApplied",
                "Registration of the addon agent is configured",
                None,
                now,
            )
    if status.get("namespace") != namespace:
        patch["namespace"] = namespace
    if status.get("healthCheck") != HEALTH_CHECK:
        patch["healthCheck"] = HEALTH_CHECK
    if new_conditions != conditions:
        patch["conditions"] = new_conditions
    return patch or None


def manifest_applied_patch(
    mca: JSON,
    applied: tuple[str, str, str] | None,
    *,
    now: dt.datetime | None = None,
) -> JSON | None:
    """`ManifestApplied` from (status, reason, message), or None to clear a stale False.

    `applied` comes from `work.builder.manifest_applied` (the works' `Applied`), or is
    ("False", "ManifestWorkApplyFailed", why) when rendering or writing the work failed.  While no
    work reports `Applied`, a True is kept and a False removed: the framework's rule.
    """
    conditions: list[JSON] = list((mca.get("status") or {}).get("conditions") or [])
    if applied is None:
        current = find_condition(conditions, MANIFEST_APPLIED)
        if current is None or current.get("status") != "False":
            return None
        return {"conditions": remove_condition(conditions, MANIFEST_APPLIED)}
    status, reason, message = applied
    new_conditions = set_condition(conditions, MANIFEST_APPLIED, status, reason, message, None, now)
    if new_conditions == conditions:
        return None
    return {"conditions": new_conditions}
