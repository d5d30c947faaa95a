"""The customized variables this addon understands (ADC `spec.customizedVariables`).

Every variable is validated here, so a typo or a bad value surfaces as a condition naming the
variable instead of a Deployment the cluster rejects or an agent that crash-loops.  Unknown names
are errors for the same reason: a silently ignored `LogLvel` is worse than a loud one.
docs/addon-manager.md lists the same table for users.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from dynamic_scoring.addon.errors import AddonConfigError
from dynamic_scoring.contract.score_size import MAX_SCORE_BYTES_SETTING, MIN_SCORE_BYTES_SETTING
from dynamic_scoring.outbound.addresses import AddressPolicy
from dynamic_scoring.outbound.secret_binding import listed_names, parse_allowed_hosts

_IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*\Z")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\Z")
_BIND = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]*):(?P<port>[0-9]{1,5})\Z")
# A label key: an optional DNS-subdomain prefix and "/", then a name of at most 63 characters.
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?\Z")
PLATFORM_SETTINGS = ("auto", "kubernetes", "openshift")
"""`Platform`: what the agent's pod is rendered for (dynamic_scoring.addon.render.platform)."""
DEFAULT_OTLP_NAMESPACE_SELECTOR: tuple[tuple[str, str], ...] = (
    ("kubernetes.io/metadata.name", "observability"),
)
"""Who may reach the receiver when the NetworkPolicy is on and no selector is given: the namespace
of the sample Collector (samples/opentelemetry/collector-configmap.yaml)."""
MONITORING_CLUSTER_ROLES = ("cluster-monitoring-view",)
"""The ClusterRoles `AgentMonitoringClusterRole` may bind the agent to.  A closed list: whoever writes
an AddOnDeploymentConfig must not be able to grant the agent any role of the managed cluster."""
AGENT_TOKEN_SECONDS = (600, 86400, 3600)
"""`AgentTokenExpirationSeconds`: the least the kube-apiserver issues, a day, and the default."""


@dataclass(frozen=True)
class Variables:
    """Values of the customized variables after validation, with the defaults filled in."""

    image: str | None = None  # None: the manager's default agent image
    image_pull_policy: str = "IfNotPresent"
    image_pull_secrets: tuple[str, ...] = ()
    log_level: str = "info"
    metrics_bind_address: str = ":8080"
    max_concurrent_cycles: int = 8
    max_score_bytes: int | None = None  # None: the agent's default (dynamic_scoring.contract.score_size)
    agent_allow_cidrs: tuple[str, ...] = ()  # networks the agent may call despite the address policy
    delete_install_namespace: bool = False
    agent_replicas: int = 1  # 0: another agent (e.g. the upstream Go agent) scores this cluster
    otlp_receiver_port: int | None = None  # None: no OTLP receiver, no port, no Service
    otlp_bearer_token_secret: str | None = None  # Secret (key "token") pushers' token is checked against
    otlp_tls_secret: str | None = None  # kubernetes.io/tls Secret: the receiver serves HTTPS
    otlp_client_ca_secret: str | None = None  # Secret (key "ca.crt"): client certificates required
    otlp_network_policy: bool = False
    otlp_network_policy_namespace_selector: tuple[tuple[str, str], ...] | None = None
    otlp_network_policy_pod_selector: tuple[tuple[str, str], ...] | None = None
    platform: str = "auto"  # auto, kubernetes or openshift (dynamic_scoring.addon.render.platform)
    # The agent's own projected token for metrics sources (dynamic_scoring.agent.own_token): None = off.
    agent_token_destinations: str | None = None
    agent_token_scorers: str | None = None  # None: any DynamicScorer, towards the destinations
    agent_token_audience: str | None = None  # None: the kube-apiserver's own audience
    agent_token_expiration_seconds: int = AGENT_TOKEN_SECONDS[2]
    agent_monitoring_cluster_role: str | None = None

    @property
    def metrics_port(self) -> int:
        """The port of `metrics_bind_address`: the containerPort and the probes' port."""
        match = _BIND.match(self.metrics_bind_address)
        assert match is not None  # validated on parse
        return int(match["port"])


def _secret_name(value: str) -> object:
    if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        raise ValueError("must be the name of a Secret in the agent's install namespace")
    return value


def _match_labels(value: str) -> object:
    # A JSON object of label key -> value, as a LabelSelector's matchLabels.
    hint = 'must be a JSON object of labels, e.g. {"kubernetes.io/metadata.name": "observability"}'
    try:
        labels = json.loads(value)
    except json.JSONDecodeError:
        raise ValueError(hint) from None
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise ValueError(hint)
    for key, label in labels.items():
        prefix, _, name = key.rpartition("/")
        bad_prefix = bool(prefix) and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix))
        if bad_prefix or not _LABEL_NAME.match(name):
            raise ValueError(f"{hint}; {key!r} is not a label key")
        if not _LABEL_VALUE.match(label):
            raise ValueError(f"{hint}; {label!r} is not a label value")
    return tuple(sorted(labels.items()))


def _image(value: str) -> object:
    if not _IMAGE.match(value):
        raise ValueError("must be an image reference such as registry.example.com/dynamic-scoring:1.0")
    return value


def _choice(*allowed: str) -> Callable[[str], object]:
    def check(value: str) -> object:
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return value

    return check


def _pull_secrets(value: str) -> object:
    # Upstream's format: a JSON array of Secret names, e.g. ["hub-registry-secret"].
    try:
        names = json.loads(value)
    except json.JSONDecodeError:
        raise ValueError('must be a JSON array of Secret names, e.g. ["my-pull-secret"]') from None
    if not isinstance(names, list) or not all(isinstance(n, str) and _DNS_SUBDOMAIN.match(n) for n in names):
        raise ValueError('must be a JSON array of Secret names, e.g. ["my-pull-secret"]')
    return tuple(names)


def _bind_address(value: str) -> object:
    match = _BIND.match(value)
    if not match or not 1 <= int(match["port"]) <= 65535:
        raise ValueError("must be host:port with an explicit port, e.g. :8080 or 0.0.0.0:8080")
    return value


def _positive_int(value: str) -> object:
    if not value.isdigit() or not 1 <= int(value) <= 1000:
        raise ValueError("must be an integer from 1 to 1000")
    return int(value)


def _port(value: str) -> object:
    if not value.isdigit() or not 1 <= int(value) <= 65535:
        raise ValueError("must be a port number from 1 to 65535, e.g. 4318")
    return int(value)


def _score_bytes(value: str) -> object:
    if not value.isdigit() or not MIN_SCORE_BYTES_SETTING <= int(value) <= MAX_SCORE_BYTES_SETTING:
        raise ValueError(
            f"must be a byte count from {MIN_SCORE_BYTES_SETTING} to {MAX_SCORE_BYTES_SETTING}, e.g. 2000000 "
            "(only where the hub's etcd --max-request-bytes was raised above its 1.5 MiB default)"
        )
    return int(value)


def _cidrs(value: str) -> object:
    # Validated with the agent's own parser, so a value the agent would refuse at start (and
    # crash-loop on) is a condition on the hub instead; rendered as the normalised networks.
    try:
        networks = AddressPolicy.parse(value).allow
    except ValueError as exc:
        raise ValueError(f"must be IP networks in CIDR notation, comma or space separated: {exc}") from None
    return tuple(str(n) for n in networks)


def _destinations(value: str) -> object:
    # The allowed-hosts annotation's syntax, checked by its own parser: an entry the agent could not
    # read would be a typo that quietly allows nothing.
    entries, bad = parse_allowed_hosts(value)
    if bad:
        raise ValueError(
            f"has entries that cannot be read ({', '.join(repr(b) for b in bad)}); write host, host:port, "
            "scheme://host:port or *.domain, each optionally with a path prefix"
        )
    if not entries:
        raise ValueError(
            "must name at least one destination, e.g. https://thanos-querier.openshift-monitoring.svc:9091"
        )
    if any(entry.scheme != "https" for entry in entries):
        # The agent's identity must never travel in clear text: `host:port` also matches http://.
        raise ValueError(
            "must list https:// destinations only: host and host:port entries also match http://, "
            "and the agent's token must not travel in clear text; "
            "write e.g. https://thanos-querier.openshift-monitoring.svc:9091"
        )
    return " ".join(value.split())


def _scorer_names(value: str) -> object:
    names = listed_names(value)
    if not names or not all(len(n) <= 253 and _DNS_SUBDOMAIN.match(n) for n in names):
        raise ValueError("must be DynamicScorer names (metadata.name), comma or space separated")
    return ", ".join(names)


def _audience(value: str) -> object:
    if not value or len(value) > 253 or any(ch.isspace() or ch == "," for ch in value):
        raise ValueError("must be one audience (no spaces or commas, at most 253 characters)")
    return value


def _token_seconds(value: str) -> object:
    low, high, _ = AGENT_TOKEN_SECONDS
    if not value.isdigit() or not low <= int(value) <= high:
        raise ValueError(f"must be seconds from {low} (the least the kube-apiserver issues) to {high}")
    return int(value)


def _monitoring_role(value: str) -> object:
    if value not in MONITORING_CLUSTER_ROLES:
        raise ValueError(
            f"must be {' or '.join(MONITORING_CLUSTER_ROLES)}: the AddOnDeploymentConfig may bind the agent "
            "only to the monitoring view role; to use another role, bind the agent's ServiceAccount "
            "on the managed cluster yourself (docs/openshift.md)"
        )
    return value


def _replicas(value: str) -> object:
    if value not in ("0", "1"):
        raise ValueError(
            'must be "1" (this addon\'s agent scores the cluster) or "0" (another agent does, '
            "e.g. the upstream Go agent during a migration; see docs/migration.md)"
        )
    return int(value)


def _boolean(value: str) -> object:
    if value not in ("true", "false"):
        raise ValueError('must be "true" or "false"')
    return value == "true"


# variable name -> (Variables field, parser)
VARIABLES: dict[str, tuple[str, Callable[[str], object]]] = {
    "Image": ("image", _image),
    "ImagePullPolicy": ("image_pull_policy", _choice("Always", "IfNotPresent", "Never")),
    "ImagePullSecrets": ("image_pull_secrets", _pull_secrets),
    "LogLevel": ("log_level", _choice("debug", "info", "warning", "error")),
    "MetricsBindAddress": ("metrics_bind_address", _bind_address),
    "MaxConcurrentCycles": ("max_concurrent_cycles", _positive_int),
    "MaxScoreBytes": ("max_score_bytes", _score_bytes),
    "AgentAllowCIDRs": ("agent_allow_cidrs", _cidrs),
    "DeleteInstallNamespace": ("delete_install_namespace", _boolean),
    "AgentReplicas": ("agent_replicas", _replicas),
    "OtlpReceiverPort": ("otlp_receiver_port", _port),
    "OtlpBearerTokenSecret": ("otlp_bearer_token_secret", _secret_name),
    "OtlpTlsSecret": ("otlp_tls_secret", _secret_name),
    "OtlpClientCaSecret": ("otlp_client_ca_secret", _secret_name),
    "OtlpNetworkPolicy": ("otlp_network_policy", _boolean),
    "OtlpNetworkPolicyNamespaceSelector": ("otlp_network_policy_namespace_selector", _match_labels),
    "OtlpNetworkPolicyPodSelector": ("otlp_network_policy_pod_selector", _match_labels),
    "Platform": ("platform", _choice(*PLATFORM_SETTINGS)),
    "AgentTokenDestinations": ("agent_token_destinations", _destinations),
    "AgentTokenScorers": ("agent_token_scorers", _scorer_names),
    "AgentTokenAudience": ("agent_token_audience", _audience),
    "AgentTokenExpirationSeconds": ("agent_token_expiration_seconds", _token_seconds),
    "AgentMonitoringClusterRole": ("agent_monitoring_cluster_role", _monitoring_role),
}

# variable -> the variables it needs, and why (checked after every value is parsed).
_REQUIRES: dict[str, tuple[str, str]] = {
    "OtlpBearerTokenSecret": ("OtlpReceiverPort", "it configures the OTLP receiver"),
    "OtlpTlsSecret": ("OtlpReceiverPort", "it configures the OTLP receiver"),
    "OtlpClientCaSecret": ("OtlpTlsSecret", "client certificates are checked in the TLS handshake"),
    "OtlpNetworkPolicy": ("OtlpReceiverPort", "the NetworkPolicy guards the OTLP receiver"),
    "OtlpNetworkPolicyNamespaceSelector": ("OtlpNetworkPolicy", "it selects who the NetworkPolicy admits"),
    "OtlpNetworkPolicyPodSelector": ("OtlpNetworkPolicy", "it selects who the NetworkPolicy admits"),
    "AgentTokenScorers": ("AgentTokenDestinations", "it narrows who may use the agent's token"),
    "AgentTokenAudience": ("AgentTokenDestinations", "it configures the agent's token"),
    "AgentTokenExpirationSeconds": ("AgentTokenDestinations", "it configures the agent's token"),
    "AgentMonitoringClusterRole": (
        "AgentTokenDestinations",
        "the role is for the agent's token, which is sent nowhere without it",
    ),
}


def parse_variables(items: list[dict[str, str]] | None) -> Variables:
    """Validate `spec.customizedVariables` into `Variables`.

    Raises:
        AddonConfigError: an unknown name or an invalid value, naming the variable.
    """
    values: dict[str, object] = {}
    for item in items or []:
        name, value = item.get("name", ""), item.get("value", "")
        if name not in VARIABLES:
            raise AddonConfigError(
                f"spec.customizedVariables[{name}]",
                f"unknown variable; this addon understands {', '.join(sorted(VARIABLES))}",
            )
        field, parse = VARIABLES[name]
        try:
            values[field] = parse(value)
        except ValueError as exc:
            raise AddonConfigError(f"spec.customizedVariables[{name}]", f"{value!r} {exc}") from None
    for name, (needed, why) in _REQUIRES.items():
        field, needed_field = VARIABLES[name][0], VARIABLES[needed][0]
        # OtlpNetworkPolicy=false counts as unset: selectors beside it would be silently unused.
        if values.get(field) not in (None, False) and values.get(needed_field) in (None, False):
            raise AddonConfigError(
                f"spec.customizedVariables[{name}]", f"needs {needed} to be set as well: {why}"
            )
    return Variables(**values)  # type: ignore[arg-type]
