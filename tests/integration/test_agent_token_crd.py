"""The real kube-apiserver holds a DynamicScorer's ``agentServiceAccountToken`` to the CRD's rules.

The agent's own ServiceAccount token is for metrics sources only, and it sets ``Authorization`` like
a bearer or basic Secret, so the CRD refuses it on ``scoring.auth`` and beside those two.  The hub
and the agent refuse the same (unit tests); this checks the CEL rules on the apiserver, where an
author first hears about it.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from dynamic_scoring.kube.api import KubeError
from e2e.kube import Client
from tests.integration.test_registry_controllers import (
    hub,  # noqa: F401  (the module's CRDs-installed hub fixture)
    make_scorer,
)

PROM = {"host": "https://thanos-querier.openshift-monitoring.svc:9091", "params": {"query": "up"}}
SCORING = {"host": "http://scorer.dev.svc:8000", "params": {"name": "cpu", "interval": 30}}


def spec(
    source_auth: dict[str, Any] | None = None, scoring_auth: dict[str, Any] | None = None
) -> dict[str, Any]:
    source = {**PROM, **({"auth": source_auth} if source_auth else {})}
    scoring = {**SCORING, **({"auth": scoring_auth} if scoring_auth else {})}
    return {"configSyncMode": "None", "source": source, "scoring": scoring}


def test_the_crd_allows_the_agent_token_for_a_source_only(hub: Client) -> None:  # noqa: F811
    name = f"token-{uuid.uuid4().hex[:6]}"
    created = make_scorer(hub, "default", name, spec(source_auth={"agentServiceAccountToken": True}))
    assert created["spec"]["source"]["auth"] == {"agentServiceAccountToken": True}
    with pytest.raises(KubeError, match="sent only to metrics sources, never to a scoring API"):
        make_scorer(hub, "default", f"{name}-s", spec(scoring_auth={"agentServiceAccountToken": True}))
    both = {"agentServiceAccountToken": True, "bearerTokenSecretRef": {"name": "t", "key": "token"}}
    with pytest.raises(KubeError, match="each set Authorization; set one"):
        make_scorer(hub, "default", f"{name}-b", spec(source_auth=both))
    hub.delete(created["apiVersion"], "DynamicScorer", name, "default")
