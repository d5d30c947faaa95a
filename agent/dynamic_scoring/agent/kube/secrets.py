"""Credential Secrets, read from the agent's install namespace on the managed cluster.

Every read goes to the apiserver, so a rotated token is used at the next cycle without a restart;
at the agent's scale (a few scorers, each reading one or two Secrets per interval) that costs
less than a watch would.  Values never appear in errors or logs.  Every path segment is
URL-quoted, so a name like `../../other/secrets/x` names a (missing) Secret here and never a path
into another namespace.
"""

from __future__ import annotations

import base64

from dynamic_scoring.agent.errors import AuthError, SecretNotFound
from dynamic_scoring.agent.ports import SecretContents
from dynamic_scoring.kube.api import Forbidden, KubeAPI, KubeError, NotFound
from dynamic_scoring.kube.resources import SECRETS


class KubeSecretReader:
    """`dynamic_scoring.agent.ports.SecretReader` backed by the managed cluster's API."""

    def __init__(self, api: KubeAPI, namespace: str) -> None:
        self.api = api
        self.namespace = namespace

    async def get(self, name: str) -> SecretContents:
        """Secret `name` with its decoded values and its annotations, from one GET."""
        where = f"secret {self.namespace}/{name}"
        try:
            path = SECRETS.path(self.namespace, name)
            secret = await self.api.arequest("GET", path)
        except NotFound as exc:
            raise SecretNotFound(f"{where} not found") from exc
        except Forbidden as exc:
            raise AuthError(f"{where}: the agent may not read it ({exc.reason or exc.status})") from exc
        except KubeError as exc:
            raise AuthError(f"{where} could not be read: {exc.status} {exc.reason}") from exc
        data = {key: base64.b64decode(value) for key, value in (secret.get("data") or {}).items()}
        annotations = (secret.get("metadata") or {}).get("annotations") or {}
        return SecretContents(self.namespace, name, data, dict(annotations))
