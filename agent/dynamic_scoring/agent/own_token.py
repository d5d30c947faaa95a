"""The agent's own ServiceAccount token as a source credential, bound by the cluster's admin.

Some Prometheus-compatible endpoints take no static token: OpenShift's Thanos querier sits behind
kube-rbac-proxy, which checks the caller's Kubernetes identity (TokenReview) and a permission
(SubjectAccessReview, the ``cluster-monitoring-view`` role).  The natural identity there is the
agent's own ServiceAccount, through a projected token that the kubelet writes and rotates.

That token is worth more than a scorer's Secret: it is the agent's identity on the managed cluster,
and any server that receives it can act as the agent until it expires.  So the scorer author only
asks for it (``sourceAuth.agentServiceAccountToken``) and the cluster's admin decides where it may
go, with the same entries as a Secret's allowed-hosts annotation
(``dynamic_scoring.outbound.secret_binding``), written in the AddOnDeploymentConfig variable
``AgentTokenDestinations``; ``AgentTokenScorers`` optionally lists the DynamicScorers that may use
it.  Without that variable the token is not even mounted.  The hub renders both into the agent's
flags (``--service-account-token-*``); nothing a DynamicScorer says can widen them.

The file is read at every cycle that uses it, so the kubelet's rotation applies without a restart.
Messages name the file and the destination, never the token.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dynamic_scoring.agent.errors import SecretInvalid, SecretNotBound, SecretNotFound, Stage
from dynamic_scoring.outbound.secret_binding import (
    destination,
    listed_destination,
    listed_names,
    parse_allowed_hosts,
)

DESTINATIONS_VARIABLE = "AgentTokenDestinations"
"""The AddOnDeploymentConfig variable that enables the token and names where it may go."""
SCORERS_VARIABLE = "AgentTokenScorers"
"""The optional AddOnDeploymentConfig variable naming the DynamicScorers that may use it."""
MAX_TOKEN_BYTES = 64 * 1024
"""A projected token is a JWT of a kilobyte or two; anything far larger is not one."""


@dataclass(frozen=True)
class OwnToken:
    """Where the agent's projected token is and where its admin lets it go.

    Attributes:
        path: the token file the kubelet writes (the projected volume's ``token``).
        destinations: allowed-hosts entries (``dynamic_scoring.outbound.secret_binding``); never empty.
        scorers: the DynamicScorers that may use it (comma or space separated), or None for any.
        clear_text: allow ``http://`` destinations.  Never on a cluster, where the token is the
            agent's identity; ``dynamic-scoring explain`` sets it, because there the token is one
            the operator made on their own machine for a source they name (a loopback Prometheus).
    """

    path: Path
    destinations: str
    scorers: str | None = None
    clear_text: bool = False

    def __post_init__(self) -> None:
        entries, bad = parse_allowed_hosts(self.destinations)
        if bad:
            raise ValueError(f"unreadable destination entries: {', '.join(repr(b) for b in bad)}")
        if not entries:
            raise ValueError("no destination: name the Prometheus endpoints the token may be sent to")
        if not self.clear_text and any(entry.scheme != "https" for entry in entries):
            raise ValueError("every destination must be an https:// entry: the token never travels in clear")

    def refusal(self, url: str, scorer: str) -> str | None:
        """Why the token may not go to ``url`` for DynamicScorer ``scorer``, or None when it may."""
        if not listed_destination(self.destinations, url):
            try:
                where = destination(url).entry
            except ValueError:
                where = "a destination that is not an http(s) URL with a host"
            clear = (
                ""
                if self.clear_text or url.lower().startswith("https://")
                else " (and never over plain http)"
            )
            return (
                f"the agent's ServiceAccount token is not sent to {where}{clear}: the AddOnDeploymentConfig "
                f"variable {DESTINATIONS_VARIABLE} lists {self.destinations.strip()!r}; if that endpoint "
                "is meant to receive the agent's identity, a hub admin adds it there"
            )
        if self.scorers is not None and (not scorer or scorer not in listed_names(self.scorers)):
            who = f"DynamicScorer {scorer}" if scorer else "a summary without a DynamicScorer name"
            return (
                f"the agent's ServiceAccount token may not be used by {who}: the AddOnDeploymentConfig "
                f"variable {SCORERS_VARIABLE} lists {self.scorers.strip()!r}; a hub admin adds the "
                "scorer there if it is meant to use it"
            )
        return None

    def bearer(self, url: str, *, scorer: str, stage: Stage) -> str:
        """The token for a request to ``url``, after the admin's binding allowed it.

        Raises:
            SecretNotBound: the binding does not list ``url`` (or ``scorer``); nothing is read.
            SecretNotFound: the file is missing (the projected volume is not mounted).
            SecretInvalid: the file is empty, too large or not a single line of header-safe text.
        """
        why = self.refusal(url, scorer)
        if why is not None:
            raise SecretNotBound(why, stage=stage)
        try:
            with self.path.open("rb") as handle:
                raw = handle.read(MAX_TOKEN_BYTES + 1)
        except FileNotFoundError:
            raise SecretNotFound(
                f"the agent's ServiceAccount token file {self.path} does not exist: its projected volume "
                f"is not mounted (the hub renders it when {DESTINATIONS_VARIABLE} is set)",
                stage=stage,
            ) from None
        except OSError as exc:
            raise SecretNotFound(
                f"the agent's ServiceAccount token file {self.path} cannot be read ({exc.strerror})",
                stage=stage,
            ) from None
        try:
            token = raw.decode("ascii").strip()
        except UnicodeDecodeError:
            token = ""
            raw = b"\0"
        if len(raw) > MAX_TOKEN_BYTES or not token or any(not 0x21 <= ord(ch) <= 0x7E for ch in token):
            raise SecretInvalid(
                f"the agent's ServiceAccount token file {self.path} does not hold one token "
                "(empty, too large, or characters not allowed in an HTTP header)",
                stage=stage,
            )
        return token

    def __repr__(self) -> str:
        return f"OwnToken({self.path}, destinations={self.destinations!r}, scorers={self.scorers!r})"


def not_enabled(stage: Stage) -> SecretNotBound:
    """The error when a summary asks for the token on a cluster whose admin did not enable it."""
    if stage == "score":
        return SecretNotBound(
            "scoringAuth.agentServiceAccountToken: the agent's ServiceAccount token is sent only to "
            "metrics sources, never to a scoring API",
            stage=stage,
        )
    return SecretNotBound(
        "sourceAuth.agentServiceAccountToken is set, but this cluster's agent has no ServiceAccount token "
        f"to send: a hub admin enables it with the AddOnDeploymentConfig variable {DESTINATIONS_VARIABLE}, "
        "within what the manager's --agent-token-destination-allow (chart value agentToken.destinationAllow) "
        "allows",
        stage=stage,
    )


__all__ = ["DESTINATIONS_VARIABLE", "MAX_TOKEN_BYTES", "SCORERS_VARIABLE", "OwnToken", "not_enabled"]
