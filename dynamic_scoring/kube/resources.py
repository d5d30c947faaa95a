"""The API resources the hub and the agent touch, and the keys objects are queued under.

A `Resource` is the four facts needed to build a REST path for a kind (group, version, plural,
scope); that is all a JSON client needs, so there is no discovery round-trip and no generated
model.  Keys are client-go's `namespace/name` strings: a work queue holds them, a cache is indexed
by them, and a log line names the object with them.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from dynamic_scoring.kube.jsontypes import JSON


def segment(value: str) -> str:
    """One path segment, quoted so that a name can only ever name one object where the path says.

    Every character outside the unreserved set is percent-encoded, `/` included, so a `/`, `?` or
    `%` in a name cannot change the path; the dot segments `.` and `..` are spelled `%2E`, because
    urllib3 removes dot segments from a URL before sending it (`secrets/..` would become the
    collection above).  Names come from users (ConfigMaps, CRs, flags), hence the care.
    """
    if not value:
        raise ValueError("an empty path segment would address a different resource")
    quoted = quote(value, safe="")
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


@dataclass(frozen=True)
class Resource:
    """One kind of the Kubernetes API, addressed by group/version/plural."""

    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        """The `apiVersion` field of objects of this kind: `v1` or `group/version`."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def name(self) -> str:
        """`plural.group` (or `plural` for the core group), as in RBAC and metric labels."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The REST path of the collection, of one object, or of its subresource.

        `namespace=None` on a namespaced kind addresses the collection across all namespaces (for a
        list or watch); a name then makes no sense and is rejected, as is a namespace on a
        cluster-scoped kind.
        """
        if namespace is not None and not self.namespaced:
            raise ValueError(f"{self.name} is cluster-scoped; got namespace {namespace!r}")
        if name is None and subresource is not None:
            raise ValueError("a subresource needs an object name")
        if name is not None and self.namespaced and namespace is None:
            raise ValueError(f"{self.name} is namespaced; {name!r} needs a namespace")
        parts = ["api", self.version] if not self.group else ["apis", self.group, self.version]
        if namespace is not None:
            parts += ["namespaces", segment(namespace)]
        parts.append(self.plural)
        if name is not None:
            parts.append(segment(name))
        if subresource is not None:
            parts.append(segment(subresource))
        return "/" + "/".join(parts)

    def object_path(self, obj: JSON, subresource: str | None = None) -> str:
        """The path of an object given as JSON."""
        meta = obj.get("metadata", {})
        return self.path(meta.get("namespace") if self.namespaced else None, meta["name"], subresource)


_OCM_CLUSTER = "cluster.open-cluster-management.io"
_OCM_ADDON = "addon.open-cluster-management.io"
_OCM_WORK = "work.open-cluster-management.io"
_DSF = "dynamic-scoring.open-cluster-management.io"

NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
SECRETS = Resource("", "v1", "secrets", "Secret", namespaced=True)
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount", namespaced=True)
EVENTS = Resource("", "v1", "events", "Event", namespaced=True)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role", namespaced=True)
ROLE_BINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", namespaced=True)
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment", namespaced=True)
CSRS = Resource(
    "certificates.k8s.io", "v1", "certificatesigningrequests", "CertificateSigningRequest", namespaced=False
)
MANAGED_CLUSTERS = Resource(_OCM_CLUSTER, "v1", "managedclusters", "ManagedCluster", namespaced=False)
MANAGED_CLUSTER_ADDONS = Resource(
    _OCM_ADDON, "v1alpha1", "managedclusteraddons", "ManagedClusterAddOn", namespaced=True
)
CLUSTER_MANAGEMENT_ADDONS = Resource(
    _OCM_ADDON, "v1alpha1", "clustermanagementaddons", "ClusterManagementAddOn", namespaced=False
)
ADDON_DEPLOYMENT_CONFIGS = Resource(
    _OCM_ADDON, "v1alpha1", "addondeploymentconfigs", "AddOnDeploymentConfig", namespaced=True
)
MANIFEST_WORKS = Resource(_OCM_WORK, "v1", "manifestworks", "ManifestWork", namespaced=True)
ADDON_PLACEMENT_SCORES = Resource(
    _OCM_CLUSTER, "v1alpha1", "addonplacementscores", "AddOnPlacementScore", namespaced=True
)
PLACEMENTS = Resource(_OCM_CLUSTER, "v1beta1", "placements", "Placement", namespaced=True)
PLACEMENT_DECISIONS = Resource(
    _OCM_CLUSTER, "v1beta1", "placementdecisions", "PlacementDecision", namespaced=True
)
MULTIKUEUE_CONFIGS = Resource(
    "kueue.x-k8s.io", "v1beta2", "multikueueconfigs", "MultiKueueConfig", namespaced=False
)
ADMISSION_CHECKS = Resource(
    "kueue.x-k8s.io", "v1beta2", "admissionchecks", "AdmissionCheck", namespaced=False
)
WORKLOADS = Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload", namespaced=True)
DYNAMIC_SCORERS = Resource(_DSF, "v1alpha1", "dynamicscorers", "DynamicScorer", namespaced=True)
DYNAMIC_SCORING_CONFIGS = Resource(
    _DSF, "v1alpha1", "dynamicscoringconfigs", "DynamicScoringConfig", namespaced=True
)


def resource_version(obj: JSON | None) -> str:
    """The object's `metadata.resourceVersion`, or "" (no object, or none set)."""
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")


def object_key(obj: JSON) -> str:
    """`namespace/name`, or `name` for a cluster-scoped object (client-go's MetaNamespaceKeyFunc)."""
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not name:
        raise ValueError("object has no metadata.name")
    namespace = meta.get("namespace")
    return f"{namespace}/{name}" if namespace else str(name)


def split_key(key: str) -> tuple[str | None, str]:
    """The inverse of `object_key`: `(namespace, name)`, namespace None for a cluster-scoped key."""
    namespace, sep, name = key.partition("/")
    if not sep:
        return None, key
    if not namespace or not name or "/" in name:
        raise ValueError(f"malformed key {key!r}: want 'namespace/name' or 'name'")
    return namespace, name
