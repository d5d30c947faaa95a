"""Where the agent's own token may go: the hub admin's bound on an AddOnDeploymentConfig's token variables.

An AddOnDeploymentConfig's `AgentTokenDestinations` makes the manager mount a projected token of the
agent's ServiceAccount and tell the agent which hosts may receive it; `AgentTokenAudience` chooses
the token's audience and `AgentMonitoringClusterRole` binds the agent to a ClusterRole of the managed
cluster.  Whoever writes that ADC is a namespace or cluster-set admin, not necessarily a hub admin,
and could otherwise list a server of their own: the agent's identity (which reads Secrets in its
install namespace) would be sent there from every cluster the ADC reaches.  So, as for the agent
image (`dynamic_scoring.addon.render.image_allow`), the hub admin bounds these variables with manager
flags, and the manager renders the token only when every value the ADC asks for lies within them:

* `--agent-token-destination-allow`: entries in the allowed-hosts syntax
  (`dynamic_scoring.outbound.secret_binding`), `https://` only.  Each ADC destination must be covered by one
  of them (`covers`).  Default: none, so an ADC that names destinations is refused until the hub
  admin names some; nothing the ADC writer types can widen this.
* `--agent-token-audience-allow`: the audiences an ADC may name.  Default: none.  An ADC that names
  no audience gets the kube-apiserver's own, which the hub admin accepted by allowing the
  destination; a named audience makes the token acceptable to whatever service trusts that
  audience, so it is the hub admin's call.
* `--agent-monitoring-role-allow`: the roles (of `MONITORING_CLUSTER_ROLES`) an ADC may bind.
  Default: none.  The binding is a cluster-wide grant on every managed cluster the ADC reaches, and
  with `AgentTokenScorers` it decides which scorer authors read all of a cluster's metrics; the hub
  admin already acts once to allow a destination, and naming the role in that same step keeps the
  rule without exception: the ADC writer only picks from what the hub admin listed.

A refusal is an `AddonConfigError`: the cluster keeps its last good work, and `ManifestApplied`
and a Warning Event (reason `AgentTokenNotAllowed`) name the variable and what the hub admin sets.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dynamic_scoring.addon.config.variables import MONITORING_CLUSTER_ROLES, Variables
from dynamic_scoring.addon.errors import AddonConfigError
from dynamic_scoring.kube.jsontypes import JSON
from dynamic_scoring.outbound.secret_binding import HostEntry, is_ip, parse_allowed_hosts
from dynamic_scoring.outbound.urls import path_within

AGENT_TOKEN_DESTINATION_ALLOW_FLAG = "--agent-token-destination-allow"
AGENT_TOKEN_DESTINATION_ALLOW_ENV = "DYNAMIC_SCORING_AGENT_TOKEN_DESTINATION_ALLOW"
AGENT_TOKEN_DESTINATION_ALLOW_VALUE = "agentToken.destinationAllow"
AGENT_TOKEN_AUDIENCE_ALLOW_FLAG = "--agent-token-audience-allow"
AGENT_TOKEN_AUDIENCE_ALLOW_ENV = "DYNAMIC_SCORING_AGENT_TOKEN_AUDIENCE_ALLOW"
AGENT_TOKEN_AUDIENCE_ALLOW_VALUE = "agentToken.audienceAllow"
AGENT_MONITORING_ROLE_ALLOW_FLAG = "--agent-monitoring-role-allow"
AGENT_MONITORING_ROLE_ALLOW_ENV = "DYNAMIC_SCORING_AGENT_MONITORING_ROLE_ALLOW"
AGENT_MONITORING_ROLE_ALLOW_VALUE = "agentToken.monitoringRoleAllow"

DESTINATIONS_FIELD = "spec.customizedVariables[AgentTokenDestinations]"
AUDIENCE_FIELD = "spec.customizedVariables[AgentTokenAudience]"
ROLE_FIELD = "spec.customizedVariables[AgentMonitoringClusterRole]"

_SEPARATORS = re.compile(r"[\s,]+")
_QUOTED = 2
_QUOTED_CHARS = 60
"""How many entries a refusal quotes of each list, and of each entry how much: conditions are short."""


@dataclass(frozen=True)
class AgentTokenAllow:
    """The hub admin's bound on the agent's token (the manager's three flags, already parsed).

    Attributes:
        destinations: allowed-hosts entries, `https://` only, that every ADC destination must lie
            within.  Empty: an ADC may not send the token anywhere.
        audiences: the audiences an ADC's `AgentTokenAudience` may name (unset is always allowed).
        monitoring_roles: the roles an ADC's `AgentMonitoringClusterRole` may bind.
    """

    destinations: tuple[str, ...] = ()
    audiences: tuple[str, ...] = ()
    monitoring_roles: tuple[str, ...] = ()

    def fingerprint(self) -> JSON | None:
        """What a render depends on, or None for the default (so existing fingerprints stay as they are).

        A changed bound may admit or refuse an ADC, so the deploy controller must render again.
        """
        if self == NOTHING_ALLOWED:
            return None
        return {
            "agentTokenAllow": {
                "destinations": list(self.destinations),
                "audiences": list(self.audiences),
                "monitoringRoles": list(self.monitoring_roles),
            }
        }


NOTHING_ALLOWED = AgentTokenAllow()
"""The default bound (the flags unset): an ADC may name no destination, audience or role."""


def _parts(values: Iterable[str]) -> list[str]:
    """Every entry of the flag's values; each value may be a comma- or space-separated list (env)."""
    return [part for value in values for part in _SEPARATORS.split(value) if part]


def parse_destination_allow(values: Iterable[str]) -> tuple[str, ...]:
    """The `--agent-token-destination-allow` entries, as written.

    Raises:
        ValueError: an entry the allowed-hosts parser cannot read (it would allow nothing, and the
            hub admin would wonder why), or one that is not `https://`: `host` and `host:port` also
            match http://, and the ADC may ask only for https:// destinations anyway.
    """
    entries = _parts(values)
    parsed, bad = parse_allowed_hosts(" ".join(entries))
    if bad:
        raise ValueError(
            f"{', '.join(repr(b) for b in bad)} cannot be read; write https://host[:port][/path] "
            "or https://*.domain[:port][/path]"
        )
    plain = [text for text, entry in zip(entries, parsed, strict=True) if entry.scheme != "https"]
    if plain:
        raise ValueError(
            f"{', '.join(repr(p) for p in plain)} must start with https://: the agent's token never "
            "travels in clear text"
        )
    return tuple(entries)


def parse_audience_allow(values: Iterable[str]) -> tuple[str, ...]:
    """The `--agent-token-audience-allow` audiences.

    Raises:
        ValueError: an audience longer than the ADC variable accepts (253 characters): it could
            never match, and the hub admin would wonder why.
    """
    audiences = _parts(values)
    long = [a for a in audiences if len(a) > 253]
    if long:
        raise ValueError(f"{long[0][:40]!r}... is longer than 253 characters, the most an audience may have")
    return tuple(audiences)


def parse_monitoring_role_allow(values: Iterable[str]) -> tuple[str, ...]:
    """The `--agent-monitoring-role-allow` roles.

    Raises:
        ValueError: a role the ADC variable never accepts (`MONITORING_CLUSTER_ROLES`): the flag
            narrows that closed list, it cannot extend it.
    """
    roles = _parts(values)
    unknown = [r for r in roles if r not in MONITORING_CLUSTER_ROLES]
    if unknown:
        raise ValueError(
            f"{', '.join(repr(r) for r in unknown)}: an AddOnDeploymentConfig may bind only "
            f"{' or '.join(MONITORING_CLUSTER_ROLES)}, so the manager allows only that"
        )
    return tuple(roles)


def covers(allowed: HostEntry, requested: HostEntry) -> bool:
    """True when every request `requested` allows is also allowed by `allowed`.

    Both are allowed-hosts entries; `requested` is an ADC destination, `allowed` a hub admin's one.
    Same scheme (https on both sides: anything else is refused, fail closed), same port, the host
    equal or (for a `*.` entry) below the allowed domain, a `*.` request only under an allowed `*.`,
    and the path prefix at or below the allowed one (a request without a path means every path).
    """
    if allowed.scheme != "https" or requested.scheme != "https":
        return False
    if allowed.port is None or allowed.port != requested.port:
        return False
    if allowed.wildcard:
        # `.example.com` covers `a.example.com` and `*.a.example.com` (host `.a.example.com`), and
        # `*.example.com` itself; never `example.com` or an IP address.
        if not requested.host.endswith(allowed.host) or (not requested.wildcard and is_ip(requested.host)):
            return False
    elif requested.wildcard or requested.host != allowed.host:
        return False
    if allowed.path is None:
        return True
    return requested.path is not None and path_within(requested.path, allowed.path)


def _listing(items: Sequence[str]) -> str:
    """At most `_QUOTED` quoted items, then how many more; `none` when empty."""
    if not items:
        return "none"
    cut = [i if len(i) <= _QUOTED_CHARS else i[:_QUOTED_CHARS] + "..." for i in items[:_QUOTED]]
    shown = ", ".join(repr(i) for i in cut)
    return shown + (f" and {len(items) - _QUOTED} more" if len(items) > _QUOTED else "")


class AgentTokenNotAllowedError(AddonConfigError):
    """An ADC asks for a token destination, audience or role outside the hub admin's bound.

    A subclass so that the deploy controller gives it its own Event reason; everything that handles
    an `AddonConfigError` (keep the last good work, report on `ManifestApplied`) applies.
    """

    def __init__(
        self, field: str, what: str, allowed: Sequence[str], flag: str, env: str, value: str
    ) -> None:
        super().__init__(
            field,
            f"{what} not allowed by the hub admin (the manager allows {_listing(allowed)}); the hub "
            f"admin allows it with the manager flag {flag} (chart value {value}, env {env})",
        )


def check_agent_token(variables: Variables, allow: AgentTokenAllow) -> None:
    """Refuse the ADC's token variables unless `allow` covers every one of them.

    Raises:
        AgentTokenNotAllowedError: a destination no allowed entry covers, an audience or a role not
            listed; the message names the variable, what was refused and the flag to set.
    """
    if variables.agent_token_destinations is None:
        return  # no token is mounted; the audience and role need destinations (parse_variables)
    allowed, _ = parse_allowed_hosts(" ".join(allow.destinations))
    requested = [t for t in _SEPARATORS.split(variables.agent_token_destinations) if t]
    outside = [
        text
        for text in requested
        if not any(covers(a, r) for r in parse_allowed_hosts(text)[0] for a in allowed)
    ]
    if outside:
        raise AgentTokenNotAllowedError(
            DESTINATIONS_FIELD,
            f"the agent's token would go to {_listing(outside)}, which is",
            allow.destinations,
            AGENT_TOKEN_DESTINATION_ALLOW_FLAG,
            AGENT_TOKEN_DESTINATION_ALLOW_ENV,
            AGENT_TOKEN_DESTINATION_ALLOW_VALUE,
        )
    audience = variables.agent_token_audience
    if audience is not None and audience not in allow.audiences:
        raise AgentTokenNotAllowedError(
            AUDIENCE_FIELD,
            f"the audience {audience!r} is",
            allow.audiences,
            AGENT_TOKEN_AUDIENCE_ALLOW_FLAG,
            AGENT_TOKEN_AUDIENCE_ALLOW_ENV,
            AGENT_TOKEN_AUDIENCE_ALLOW_VALUE,
        )
    role = variables.agent_monitoring_cluster_role
    if role is not None and role not in allow.monitoring_roles:
        raise AgentTokenNotAllowedError(
            ROLE_FIELD,
            f"binding the agent to {role!r} is",
            allow.monitoring_roles,
            AGENT_MONITORING_ROLE_ALLOW_FLAG,
            AGENT_MONITORING_ROLE_ALLOW_ENV,
            AGENT_MONITORING_ROLE_ALLOW_VALUE,
        )


__all__ = [
    "AGENT_MONITORING_ROLE_ALLOW_ENV",
    "AGENT_MONITORING_ROLE_ALLOW_FLAG",
    "AGENT_MONITORING_ROLE_ALLOW_VALUE",
    "AGENT_TOKEN_AUDIENCE_ALLOW_ENV",
    "AGENT_TOKEN_AUDIENCE_ALLOW_FLAG",
    "AGENT_TOKEN_AUDIENCE_ALLOW_VALUE",
    "AGENT_TOKEN_DESTINATION_ALLOW_ENV",
    "AGENT_TOKEN_DESTINATION_ALLOW_FLAG",
    "AGENT_TOKEN_DESTINATION_ALLOW_VALUE",
    "NOTHING_ALLOWED",
    "AgentTokenAllow",
    "AgentTokenNotAllowedError",
    "check_agent_token",
    "covers",
    "parse_audience_allow",
    "parse_destination_allow",
    "parse_monitoring_role_allow",
]
