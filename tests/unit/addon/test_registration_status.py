from __future__ import annotations

import datetime as dt

from dynamic_scoring.addon.registration.status import (
    manifest_applied_patch,
    owned_by_cma,
    registration_patch,
    registration_subject,
    supported_configs_patch,
)
from tests.unit.addon.helpers import mca

NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
NS = "open-cluster-management-agent-addon"
USER = "system:open-cluster-management:cluster:cluster1:addon:dynamic-scoring:agent:dynamic-scoring"
GROUPS = [
    "system:open-cluster-management:cluster:cluster1:addon:dynamic-scoring",
    "system:open-cluster-management:addon:dynamic-scoring",
]
OTHERS = [
    {
        "type": "Available",
        "status": "True",
        "reason": "ManagedClusterAddOnLeaseUpdated",
        "message": "m",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    },
    {
        "type": "Progressing",
        "status": "False",
        "reason": "Completed",
        "message": "m",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    },
]


def test_supported_configs_written_once() -> None:
    patch = supported_configs_patch(mca())
    assert patch == {
        "supportedConfigs": [
            {"group": "addon.open-cluster-management.io", "resource": "addondeploymentconfigs"}
        ]
    }
    assert supported_configs_patch(mca(**patch)) is None


def test_fresh_mca_gets_every_owned_field() -> None:
    patch = registration_patch(mca(), namespace=NS, now=NOW)
    assert patch == {
        "registrations": [
            {"signerName": "kubernetes.io/kube-apiserver-client", "subject": {"user": USER, "groups": GROUPS}}
        ],
        "namespace": NS,
        "healthCheck": {"mode": "Lease"},
        "conditions": [
            {
                "type": "RegistrationApplied",
                "status": "True",
                "reason": "SetPermissionApplied",
                "message": "Registration of the addon agent is configured",
                "lastTransitionTime": "2026-01-02T03:04:05Z",
            }
        ],
    }


def test_converged_status_needs_no_write_and_other_writers_are_kept() -> None:
    first = registration_patch(mca(conditions=OTHERS), namespace=NS, now=NOW)
    assert first is not None
    assert first["conditions"][:2] == OTHERS  # Available and Progressing untouched, in place
    converged = mca(**first)
    assert registration_patch(converged, namespace=NS, now=NOW + dt.timedelta(hours=1)) is None


def test_subject_is_stable() -> None:
    assert registration_subject(mca()) == registration_subject(mca()) == {"user": USER, "groups": GROUPS}


def test_namespace_change_patches_only_namespace() -> None:
    converged = mca(**(registration_patch(mca(), namespace=NS, now=NOW) or {}))
    assert registration_patch(converged, namespace="elsewhere", now=NOW) == {"namespace": "elsewhere"}


def test_never_writes_conditions_owned_by_others() -> None:
    for patch in (
        registration_patch(mca(), namespace=NS, now=NOW),
        registration_patch(mca(), namespace=NS, permission_error="forbidden", now=NOW),
        manifest_applied_patch(mca(), ("True", "AddonManifestApplied", "ok"), now=NOW),
    ):
        assert patch is not None
        types = {c["type"] for c in patch.get("conditions", [])}
        assert types <= {"RegistrationApplied", "ManifestApplied"}
        assert not {"Available", "Configured", "Progressing"} & set(patch)


def test_permission_failure() -> None:
    patch = registration_patch(mca(), namespace=NS, permission_error="roles is forbidden", now=NOW)
    assert patch is not None
    (cond,) = patch["conditions"]
    assert (cond["status"], cond["reason"]) == ("False", "SetPermissionFailed")
    assert cond["message"] == "Failed to set permission for hub agent: roles is forbidden"
    assert "registrations" not in patch


def test_token_driver_keeps_the_klusterlets_subject() -> None:
    sa = {"user": "system:serviceaccount:cluster1:dynamic-scoring-agent", "groups": []}
    token_mca = mca(
        kubeClientDriver="token",
        registrations=[{"signerName": "kubernetes.io/kube-apiserver-client", "subject": sa}],
    )
    patch = registration_patch(token_mca, namespace=NS, now=NOW)
    assert patch is not None and "registrations" not in patch
    assert registration_subject(token_mca) == sa


def test_token_driver_without_subject_is_pending() -> None:
    patch = registration_patch(mca(kubeClientDriver="token"), namespace=NS, now=NOW)
    assert patch is not None
    (cond,) = patch["conditions"]
    assert (cond["status"], cond["reason"]) == ("False", "PermissionConfigPending")
    assert registration_subject(mca(kubeClientDriver="token")) is None


def test_manifest_applied_transitions() -> None:
    ok = manifest_applied_patch(mca(conditions=OTHERS), ("True", "AddonManifestApplied", "applied"), now=NOW)
    assert ok is not None and ok["conditions"][:2] == OTHERS
    applied = mca(**ok)
    assert manifest_applied_patch(applied, ("True", "AddonManifestApplied", "applied"), now=NOW) is None
    # No Applied on the work yet: a True stays, a stale False is removed.
    assert manifest_applied_patch(applied, None) is None
    failed = mca(
        **(manifest_applied_patch(mca(), ("False", "ManifestWorkApplyFailed", "bad"), now=NOW) or {})
    )
    assert manifest_applied_patch(failed, None) == {"conditions": []}


def test_waits_for_the_cma_owner_reference() -> None:
    obj = mca()
    assert not owned_by_cma(obj, "dynamic-scoring")
    obj["metadata"]["ownerReferences"] = [{"kind": "ClusterManagementAddOn", "name": "dynamic-scoring"}]
    assert owned_by_cma(obj, "dynamic-scoring")
