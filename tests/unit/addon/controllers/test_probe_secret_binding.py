"""The hub probe checks its token's binding against each full URL it will request, path included.

On a path-routed shared ingress the path picks the backend; a token bound to one path prefix must
not go to ``/healthz`` at the origin (another backend) or to a ``configURL`` under another prefix.
"""

from __future__ import annotations

import base64
from typing import Any, cast

import pytest

from dynamic_scoring.addon.controllers.registry.controller import _read_secret
from dynamic_scoring.contract.wire import SecretKeyRef
from dynamic_scoring.kube.api import KubeAPI
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.outbound.secret_binding import ALLOWED_HOSTS_ANNOTATION


class _API:
    """A KubeAPI that answers every GET with one Secret."""

    def __init__(self, allowed_hosts: str) -> None:
        self.secret: JSON = {
            "metadata": {"annotations": {ALLOWED_HOSTS_ANNOTATION: allowed_hosts}},
            "data": {"token": base64.b64encode(b"t0ken").decode()},
        }

    def request(self, method: str, path: str, **_: Any) -> JSON:
        return self.secret


def _read(send_to: list[str]) -> tuple[str | None, str | None]:
    api = cast(KubeAPI, _API("ingress.example.com/team-a"))
    value, bad = _read_secret(api, "ns", SecretKeyRef(name="tok", key="token"), "spec.probe", send_to=send_to)
    return value, None if bad is None else bad.reason


def test_urls_under_the_bound_prefix_get_the_token() -> None:
    urls = ["https://ingress.example.com/team-a/healthz", "https://ingress.example.com/team-a/config"]
    assert _read(urls) == ("t0ken", None)


@pytest.mark.parametrize(
    "other",
    [
        "https://ingress.example.com/healthz",  # the origin's /healthz: another backend
        "https://ingress.example.com/team-b/config",
        "https://ingress.example.com/team-a/%2e%2e/team-b/config",
    ],
)
def test_one_url_outside_the_prefix_withholds_the_token_for_the_round(other: str) -> None:
    assert _read(["https://ingress.example.com/team-a/config", other]) == (None, "SecretNotBound")
