"""Names, labels and defaults that OCM and this addon agree on.

Every derived name follows from `ADDON_NAME`, exactly as addon-framework derives it, so that OCM's
own controllers, the klusterlet and `clusteradm` find our objects where they look for a Go addon's.
"""

from __future__ import annotations

from typing import Final

ADDON_NAME: Final = "dynamic-scoring"

# The image.  DEFAULT_IMAGE_REPOSITORY is the one source of the repository this project publishes to
# (the release workflow, .github/workflows/release.yaml, pushes there: docs/release.md).  Files that
# cannot import Python carry copies: the `images:` entry of manifests/kustomization.yaml (kustomize
# copies it into the manager's DYNAMIC_SCORING_AGENT_IMAGE, so one edit retags manager and agents),
# the chart's values.yaml, the sample scorers and the workflow's IMAGE_REPOSITORY;
# tests/unit/addon/test_image_single_source.py fails if any of them disagrees with this constant.
# DEFAULT_IMAGE itself is only the fallback for a manager started without that variable.
IMAGE_NAME: Final = "dynamic-scoring"
DEFAULT_IMAGE_REPOSITORY: Final = "ghcr.io/dynamic-scoring/dynamic-scoring"
DEFAULT_IMAGE_TAG: Final = "0.1.0-dev.0"
DEFAULT_IMAGE: Final = f"{DEFAULT_IMAGE_REPOSITORY}:{DEFAULT_IMAGE_TAG}"
AGENT_IMAGE_ENV: Final = "DYNAMIC_SCORING_AGENT_IMAGE"

DEFAULT_INSTALL_NAMESPACE: Final = "open-cluster-management-agent-addon"

# Labels and annotations (OCM API constants).
ADDON_NAME_LABEL: Final = "open-cluster-management.io/addon-name"
CLUSTER_NAME_LABEL: Final = "open-cluster-management.io/cluster-name"
CONFIG_SPEC_HASH_ANNOTATION: Final = "open-cluster-management.io/config-spec-hash"
DELETION_ORPHAN_ANNOTATION: Final = "addon.open-cluster-management.io/deletion-orphan"
INSTALL_NAMESPACE_ANNOTATION: Final = "addon.open-cluster-management.io/v1alpha1-install-namespace"
CSR_USER_ANNOTATION: Final = "open-cluster-management.io/csr-user"
MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"

# API groups and versions we write (v1alpha1 for the addon group, as addon-framework writes them).
ADDON_GROUP: Final = "addon.open-cluster-management.io"
ADDON_API_VERSION: Final = f"{ADDON_GROUP}/v1alpha1"
ADC_RESOURCE: Final = "addondeploymentconfigs"
RESERVED_NO_DEFAULT: Final = "__reserved_no_default__"

# Derived names.
DEPLOY_WORK_PREFIX: Final = f"addon-{ADDON_NAME}-deploy"
HUB_KUBECONFIG_SECRET: Final = f"{ADDON_NAME}-hub-kubeconfig"
AGENT_NAME: Final = ADDON_NAME  # stable agentName of the registration subject: the framework's fallback
AGENT_DEPLOYMENT: Final = f"{ADDON_NAME}-agent"
AGENT_SERVICE_ACCOUNT: Final = f"{ADDON_NAME}-agent"
AGENT_CONTAINER: Final = f"{ADDON_NAME}-agent"  # upstream's name: its containerIDs keep matching
SUMMARY_CONFIGMAP: Final = "dynamic-scoring-config"
CONFIG_WORK_NAME: Final = f"addon-{ADDON_NAME}-config"
"""The ManifestWork carrying a cluster's summaries; the agent's hub Role grants the score names in it."""

# The framework packs manifests into works of at most 500 KiB x 0.8.
WORK_SIZE_LIMIT: Final = 409_600

KUBE_APISERVER_CLIENT_SIGNER: Final = "kubernetes.io/kube-apiserver-client"
