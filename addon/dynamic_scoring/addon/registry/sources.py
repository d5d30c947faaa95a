"""``spec.sources`` of a DynamicScorer turned into the summary's ``sources`` and upstream ``source*`` keys.

``spec.source`` stays upstream's single object; several sources are a separate list, ``spec.sources``,
because a structural CRD schema cannot let one field be "an object or a list", and keeping the two
apart means every upstream object keeps its exact meaning.  The CRD rejects objects that set both
(a CEL rule); an object stored before that rule existed gets the same answer here, as a field
problem.

Translation:

* Each entry becomes one ``dynamic_scoring.contract.wire.SourceSpec``: ``host`` + ``path`` joined as for
  ``spec.source`` (``/api/v1/query_range`` when the host has no path), upstream's
  ``auth.tokenSecretRef`` carried as ``bearerTokenSecretRef`` unless the entry sets its own bearer or
  basic auth (the same precedence the agent applies to ``spec.source``).
* The 16 upstream keys carry the *first Prometheus* entry (its endpoint, its queries joined with
  ``;``, its range, step and bearer-token Secret), so an upstream agent keeps scoring from that one
  source.  With no Prometheus entry they say ``sourceType: None``.
* ``onSourceError`` is sent as written, ``Fail`` when unset.
* In ``Full`` mode the ``/config`` document cannot describe several sources: its ``source`` part is
  ignored when ``spec.sources`` is set, and a note says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from dynamic_scoring.addon.registry.models import DynamicScorerSpec, SourceEntrySpec, SpecAuth
from dynamic_scoring.contract.wire import EndpointAuth, ScorerSummary, SecretKeyRef, SourceSpec
from dynamic_scoring.outbound.urls import has_path, join_url, url_problem

DEFAULT_SOURCE_PATH = "/api/v1/query_range"
MAX_SOURCES_BYTES = 256 * 1024
"""Largest ``sources`` list (as JSON) one scorer may send: a quarter of the ConfigMap every scorer shares."""


@dataclass
class SourcesOutcome:
    """What ``spec.sources`` contributes to the summary, or the problems that stop it.

    Attributes:
        sources: the summary's ``sources``, in spec order.
        upstream: the upstream ``source*`` keys (JSON names).
        problems: ``(field, message)`` pairs naming the CRD path.
    """

    sources: list[SourceSpec] = field(default_factory=list)
    upstream: dict[str, object] = field(default_factory=dict)
    problems: list[tuple[str, str]] = field(default_factory=list)


def entry_auth(auth: SpecAuth | None) -> EndpointAuth | None:
    """The wire auth of one entry: its extension fields, plus upstream's token as the bearer token."""
    if auth is None:
        return None
    ext = auth.extension()
    token = auth.token_secret_ref
    if token is not None and (
        ext is None or (ext.bearer_token_secret_ref is None and ext.basic_auth_secret_ref is None)
    ):
        data = ext.model_dump(mode="json") if ext is not None else {}
        data["bearerTokenSecretRef"] = token.model_dump(mode="json")
        ext = EndpointAuth.model_validate(data)
    return ext


def _bearer(auth: EndpointAuth | None) -> SecretKeyRef | None:
    return auth.bearer_token_secret_ref if auth is not None else None


def _entry(index: int, entry: SourceEntrySpec, out: SourcesOutcome) -> SourceSpec | None:
    where = f"spec.sources[{index}]"
    endpoint = ""
    ok = True
    queries = [q for q in entry.queries if q.strip()]
    if entry.type == "Prometheus":
        if not entry.host:
            out.problems.append((f"{where}.host", f"required for a Prometheus source ({entry.name})"))
            ok = False
        else:
            why = url_problem(entry.host)
            if why is not None:
                out.problems.append((f"{where}.host", why))
                ok = False
            else:
                path = entry.path or ("" if has_path(entry.host) else DEFAULT_SOURCE_PATH)
                endpoint = join_url(entry.host, path)
        if not queries:
            out.problems.append((f"{where}.queries", f"at least one query is required ({entry.name})"))
            ok = False
    if entry.type == "OpenTelemetry" and entry.otel is None and not queries:
        out.problems.append(
            (f"{where}.otel", f"an OpenTelemetry source needs otel.selectors or queries ({entry.name})")
        )
        ok = False
    if entry.step > entry.range:
        out.problems.append((f"{where}.step", f"step {entry.step}s is larger than range {entry.range}s"))
        ok = False
    if not ok:
        return None
    return SourceSpec(
        name=entry.name,
        type=entry.type,
        endpoint=endpoint,
        auth=entry_auth(entry.auth),
        queries=queries,
        range=entry.range,
        step=entry.step,
        otel=entry.otel,
    )


def resolve_sources(spec: DynamicScorerSpec) -> SourcesOutcome:
    """Translate ``spec.sources`` (the caller checks it is set)."""
    out = SourcesOutcome()
    entries = spec.sources or []
    if spec.source is not None:
        out.problems.append(("spec.sources", "set either source (one source) or sources (several), not both"))
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        if entry.name in seen:
            out.problems.append(
                (f"spec.sources[{index}].name", f"{entry.name!r} is used by an earlier entry")
            )
            continue
        seen.add(entry.name)
        wire = _entry(index, entry, out)
        if wire is not None:
            out.sources.append(wire)
    size = len(json.dumps([s.model_dump(mode="json") for s in out.sources], separators=(",", ":")))
    if size > MAX_SOURCES_BYTES:
        # Every summary of a cluster shares one ConfigMap (1 MiB in etcd); one scorer must not fill it.
        out.problems.append(
            (
                "spec.sources",
                f"the sources are {size} bytes as JSON; at most {MAX_SOURCES_BYTES} are distributed",
            )
        )
    first = next((s for s in out.sources if s.type == "Prometheus"), None)
    if first is None:
        out.upstream = {"sourceType": "None"}
    else:
        token = _bearer(first.auth)
        out.upstream = {
            "sourceType": "Prometheus",
            "sourceEndpoint": first.endpoint,
            "sourceQuery": ";".join(first.queries),
            "sourceRange": first.range,
            "sourceStep": first.step,
            "sourceEndpointAuthName": token.name if token else "",
            "sourceEndpointAuthKey": token.key if token else "",
        }
    return out


def with_sources(summary: ScorerSummary, outcome: SourcesOutcome, policy: str | None) -> ScorerSummary:
    """``summary`` with ``sources``, ``onSourceError`` and the upstream keys of the first source.

    Validated again as a whole, so a value the agent would refuse surfaces as the caller's
    ``ValidationError`` (a field problem), never as a summary no agent can run.
    """
    data = summary.to_wire()
    for key in ("sourceQueries", "sourceAuth"):  # the agent reads sources; these would only mislead
        data.pop(key, None)
    data.update(outcome.upstream)
    data["sources"] = [s.model_dump(mode="json") for s in outcome.sources]
    data["onSourceError"] = policy or "Fail"
    return ScorerSummary.model_validate(data)


__all__ = ["MAX_SOURCES_BYTES", "SourcesOutcome", "entry_auth", "resolve_sources", "with_sources"]
