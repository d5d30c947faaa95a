"""Where each field of a scorer's effective summary comes from: ``/config``, the spec, or a default.

``resolve`` (``dynamic_scoring.addon.registry.effective``) answers *what* the agents are told; a person
debugging a
score also needs *why*: a query that is not the one in the spec usually means ``configSyncMode:
Full`` and a scorer whose ``/config`` says otherwise.  This module restates resolve's precedence,
field by field, for the fields ``/config`` can carry (the item-name formats among them); everything
else is the spec's or a default.
``tests/unit/addon/test_provenance.py`` checks it against ``resolve`` so the two cannot drift.

Origins: ``/config`` (``status.lastSyncedConfig``, Full mode only), ``spec``, ``spec.configURL``
(the scoring host taken from the configURL's origin), ``spec.sources`` (the sources extension
replaces every source field), ``default``.
"""

from __future__ import annotations

from dynamic_scoring.addon.registry.models import DynamicScorer

CONFIG = "/config"
SPEC = "spec"
DEFAULT = "default"


def _pick(synced: object, spec: object) -> str:
    """Resolve's rule: a non-empty synced value wins, then a non-empty spec value, else the default."""
    if synced not in (None, "", 0) and not (isinstance(synced, int) and synced < 0):
        return CONFIG
    if spec not in (None, "", 0):
        return SPEC
    return DEFAULT


def provenance(scorer: DynamicScorer) -> dict[str, str]:
    """The origin of each summary field (wire names) that ``/config`` or a default may supply."""
    spec = scorer.spec
    full = spec.config_sync_mode == "Full"
    synced = scorer.status.last_synced_config if full else None
    s_src = synced.source if synced is not None and not spec.sources else None
    s_sc = synced.scoring if synced is not None else None
    src = spec.source
    src_params = src.params if src is not None else None
    sc = spec.scoring
    sc_params = sc.params if sc is not None else None

    out: dict[str, str] = {"name": "metadata.name"}
    name = _pick(s_sc.params.name if s_sc else None, sc_params.name if sc_params else None)
    if name == DEFAULT and spec.name:
        name = "spec.name"
    out["scoreName"] = name if name != DEFAULT else "metadata.name"
    out["scoringInterval"] = _pick(
        s_sc.params.interval if s_sc else None, sc_params.interval if sc_params else None
    )
    if spec.sources:
        for key in ("sourceType", "sourceEndpoint", "sourceQuery", "sourceRange", "sourceStep"):
            out[key] = "spec.sources"
    else:
        out["sourceType"] = _pick(s_src.type if s_src else None, src.type if src is not None else None)
        out["sourceEndpoint"] = _pick(s_src.host if s_src else None, src.host if src is not None else None)
        query = _pick(
            s_src.params.query if s_src else None,
            (src_params.query or src_params.queries) if src_params else None,
        )
        out["sourceQuery"] = query
        out["sourceRange"] = _pick(
            s_src.params.range if s_src else None, src_params.range if src_params else None
        )
        out["sourceStep"] = _pick(
            s_src.params.step if s_src else None, src_params.step if src_params else None
        )
    host = _pick(s_sc.host if s_sc else None, sc.host if sc is not None else None)
    if host == DEFAULT and spec.config_url:
        host = "spec.configURL"
    out["scoringEndpoint"] = host
    synced_formats = s_sc.params.dimension_formats if s_sc else ()
    spec_formats = spec.score_dimension_formats or spec.score_dimension_format
    out["scoreDimensionFormat"] = _pick(synced_formats or None, spec_formats or None)
    from_config = out["scoreDimensionFormat"] == CONFIG
    if (s_sc and s_sc.params.score_dimension_formats) if from_config else spec.score_dimension_formats:
        out["scoreDimensionFormats"] = out["scoreDimensionFormat"]  # the list travels with the string
    return out


__all__ = ["CONFIG", "DEFAULT", "SPEC", "provenance"]
