"""The contract between the DynamicScorer CRD and the agent's ``ScorerSummary``, written down once.

Every summary key names the CRD ``spec`` paths it is computed from; every ``spec`` path is either one
of those or listed in ``HUB_ONLY`` with the reason it never reaches an agent.  The unit test
``tests/unit/addon/registry/test_crd_wire_drift.py`` checks this table against both the CRD file and
``dynamic_scoring.contract.wire``, so adding a field on one side without the other fails the build.

Paths are dotted, relative to ``spec``; ``auth.*`` objects are listed by their top-level key because
their inner shape is checked as a whole against ``dynamic_scoring.contract.wire.EndpointAuth``.
"""

from __future__ import annotations

from typing import Final

SUMMARY_SOURCES: Final[dict[str, tuple[str, ...]]] = {
    "name": (),  # metadata.name
    "scoreName": ("scoring.params.name", "name"),
    "sourceType": ("source.type",),
    "sourceEndpoint": ("source.host", "source.path", "source.endpoint.host", "source.endpoint.path"),
    "sourceEndpointAuthName": ("source.auth.tokenSecretRef.name",),
    "sourceEndpointAuthKey": ("source.auth.tokenSecretRef.key",),
    "sourceQuery": ("source.params.query", "source.query.query"),
    "sourceRange": ("source.params.range", "source.query.range"),
    "sourceStep": ("source.params.step", "source.query.step"),
    "scoringEndpoint": ("scoring.host", "scoring.path", "scoring.endpoint.host", "scoring.endpoint.path"),
    "scoringInterval": ("scoring.params.interval",),
    "scoringEndpointAuthName": ("scoring.auth.tokenSecretRef.name",),
    "scoringEndpointAuthKey": ("scoring.auth.tokenSecretRef.key",),
    "location": ("location",),
    "scoreDestination": ("scoreDestination",),
    "scoreDimensionFormat": ("scoreDimensionFormat",),
    # Extensions.
    "sourceQueries": ("source.params.queries", "source.query.queries"),
    "sourceAuth": ("source.auth",),
    "scoringAuth": ("scoring.auth",),
    "scoreNormalization": ("scoreNormalization",),
    "validForSeconds": ("validForSeconds",),
    "timeoutSeconds": ("timeoutSeconds",),
    "maxScoreBytes": ("maxScoreBytes",),
    # Every scoring.params key but name and interval (the CRD keeps unknown keys there).
    "scoringParams": ("scoring.params.model", "scoring.params.horizon"),
    "missingDataScore": ("missingData.score",),
    "masked": (),  # the DynamicScoringConfig's masks under maskPolicy: Score
    "scoreDimensionFormats": ("scoreDimensionFormats",),
    "sources": ("sources",),
    "onSourceError": ("onSourceError",),
    "stabilization": ("stabilization",),
    "scoreDimensionLabels": ("scoreDimensionLabels",),
}
"""Summary JSON key -> the ``spec`` paths it comes from (``()``: from metadata or the config)."""

HUB_ONLY: Final[dict[str, str]] = {
    "description": "free text for humans",
    "configURL": "fetched by the hub (Full mode), /healthz probed at its origin; the scoring host fallback",
    "configSyncMode": "decides whether the synced /config takes part in the precedence",
    "sendCredentialsToSyncedHosts": "decides whether the spec's auth follows an endpoint /config moved",
    "clusterSelector": "decides which clusters receive the summary",
    "probe": "credentials, CA and timeout of the hub's own probes",
}
"""``spec`` paths (and everything below them) that never reach an agent, with the reason."""

__all__ = ["HUB_ONLY", "SUMMARY_SOURCES"]
