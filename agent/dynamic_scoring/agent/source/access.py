"""What to tell the user when a metrics source refuses the agent's credentials (HTTP 401 or 403).

A refusal is never fixed by changing the query, so it gets its own reason (``PrometheusAccessDenied``)
and a sentence that says what to fix.  A Prometheus reached through kube-rbac-proxy (OpenShift's
Thanos querier, many kube-prometheus setups) answers 403 with a fixed sentence::

    Forbidden (user=system:serviceaccount:ns:agent, verb=get, resource=namespaces, subresource=)

and 401 with ``Unauthorized`` when TokenReview did not accept the token (expired, another
audience, another cluster's).  The identity and the permission in that sentence are exactly what
the user needs to grant, so they are quoted: only when the whole body is that sentence, each field
matches the characters Kubernetes allows in it, and no credential just sent appears in it (a server
that echoes the token must not get it into a condition the hub's readers see).  Any other body is
not repeated, as for every other Prometheus error.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_FORBIDDEN = re.compile(
    r"^Forbidden \(user=(?P<user>[A-Za-z0-9:._@+-]{1,400}), verb=(?P<verb>[a-z*]{1,32}), "
    r"resource=(?P<resource>[a-z0-9.*-]{0,253}), subresource=(?P<subresource>[a-z0-9.*-]{0,253})\)\Z"
)
MONITORING_HINT = (
    "on OpenShift, ClusterRole cluster-monitoring-view; the AddOnDeploymentConfig variable "
    "AgentMonitoringClusterRole binds it to the agent"
)


def denied_permission(body: bytes | bytearray, sent: Sequence[str]) -> tuple[str, str] | None:
    """The identity and the missing permission in kube-rbac-proxy's 403 sentence, or None.

    Returns ``(user, permission)`` with permission like ``get namespaces`` or ``get pods/log``.
    ``sent`` are the credentials of the request; a body containing one is not read.
    """
    try:
        text = bytes(body[:1024]).decode("ascii").strip()
    except UnicodeDecodeError:
        return None
    match = _FORBIDDEN.match(text)
    # Short header values (a tenant id) would match by chance; credentials are long.
    if match is None or any(len(secret) >= 8 and secret in text for secret in sent):
        return None
    resource = match["resource"] or "(no resource)"
    if match["subresource"]:
        resource += f"/{match['subresource']}"
    return match["user"], f"{match['verb']} {resource}"


def access_denied_message(
    where: str, status: int, phrase: str, body: bytes | bytearray, sent: Sequence[str]
) -> str:
    """The sentence of a ``PrometheusAccessDenied`` for a 401 or 403 answer from ``where``."""
    detail = f"HTTP {status} ({phrase})"
    if status == 401:
        return (
            f"Prometheus at {where} did not accept the credentials: {detail}; check the token it was "
            "sent (the Secret's value, or for the agent's own token its audience: AgentTokenAudience)"
        )
    denied = denied_permission(body, sent)
    if denied is not None:
        user, permission = denied
        return (
            f"Prometheus at {where} refused {user}: {detail}, it lacks the permission {permission!r}; "
            f"grant it that permission ({MONITORING_HINT})"
        )
    return (
        f"Prometheus at {where} refused the credentials: {detail}; the identity they carry lacks a "
        "permission the server (or the proxy in front of it) checks"
    )


__all__ = ["MONITORING_HINT", "access_denied_message", "denied_permission"]
