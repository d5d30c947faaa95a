"""A source's 401/403 becomes PrometheusAccessDenied, naming what kube-rbac-proxy says is missing."""

from __future__ import annotations

import pytest

from dynamic_scoring.agent.errors import PrometheusAccessDenied
from dynamic_scoring.agent.source.access import access_denied_message, denied_permission
from dynamic_scoring.agent.source.prometheus import RangeWindow, query_range
from tests.unit.agent.test_address_policy import answering

USER = "system:serviceaccount:dynamic-scoring:dynamic-scoring-agent"
SENTENCE = f"Forbidden (user={USER}, verb=get, resource=namespaces, subresource=)\n".encode()


def test_kube_rbac_proxy_sentence_names_the_identity_and_the_permission() -> None:
    assert denied_permission(SENTENCE, []) == (USER, "get namespaces")
    sub = b"Forbidden (user=alice, verb=create, resource=prometheuses, subresource=api)"
    assert denied_permission(sub, []) == ("alice", "create prometheuses/api")
    message = access_denied_message(
        "https://thanos:9091", 403, "Forbidden", SENTENCE, ["Bearer abc.def.ghi", "abc.def.ghi", "t"]
    )
    assert f"refused {USER}" in message and "'get namespaces'" in message
    assert "cluster-monitoring-view" in message and "AgentMonitoringClusterRole" in message


@pytest.mark.parametrize(
    "body",
    [
        b"<html>Forbidden</html>",
        b"Forbidden (user=a b, verb=get, resource=namespaces, subresource=)",  # not Kubernetes' characters
        b"Forbidden (user=x, verb=get, resource=namespaces, subresource=)\nand more",
        b"Forbidden (user=abc.def.ghi, verb=get, resource=namespaces, subresource=)",  # echoes the token
        b"\xff\xfe",
    ],
)
def test_any_other_body_is_not_repeated(body: bytes) -> None:
    assert denied_permission(body, ["Bearer abc.def.ghi", "abc.def.ghi"]) is None
    message = access_denied_message("https://p", 403, "Forbidden", body, ["abc.def.ghi"])
    assert "lacks a permission the server" in message and "abc.def.ghi" not in message


def test_401_points_at_the_token_and_its_audience() -> None:
    message = access_denied_message("https://p", 401, "Unauthorized", b"Unauthorized", [])
    assert "did not accept the credentials: HTTP 401 (Unauthorized)" in message
    assert "AgentTokenAudience" in message


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.parametrize(("status", "body"), [(401, b"Unauthorized\n"), (403, SENTENCE)])
async def test_query_range_reports_a_refusal_as_access_denied(status: int, body: bytes) -> None:
    # Not a PrometheusQueryError: the query is fine, the credentials are not.
    async with answering(status, body) as client:
        with pytest.raises(PrometheusAccessDenied) as denied:
            await query_range(
                client,
                "https://thanos:9091/api/v1/query_range",
                "up",
                RangeWindow(0, 60, 60),
                headers={"Authorization": "Bearer abc.def.ghi"},
            )
    assert denied.value.reason == "PrometheusAccessDenied" and not denied.value.transient
    where = "query #1 `up`: Prometheus at https://thanos:9091/api/v1/query_range "
    assert denied.value.message.startswith(where)
    assert ("'get namespaces'" in denied.value.message) == (status == 403)
