"""A scorer declares its item-name format in ``/config``; in Full mode the hub sends it to the agents.

The whole way is exercised: ``ScorerApp`` serves the document, the hub's ``fetch_config`` reads and
checks it, the apiserver's structural pruning of ``status.lastSyncedConfig`` keeps it (the key lives
in ``scoring.params``, whose schema preserves unknown fields), and ``resolve`` applies the precedence.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from dynamic_scoring.addon.registry.effective import resolve
from dynamic_scoring.addon.registry.probe import fetch_config
from dynamic_scoring.contract.wire import ScorerConfig, ScoreResult
from dynamic_scoring.scorer.app import ScorerApp
from dynamic_scoring.scorer.matrix import ScoringRequest
from tests.unit.addon.registry.test_effective import PROM, SCHEMA, ok, scorer

PER_NODE = "${scoreName}-${node}"
CONFIG_URL = "http://scorer.ns.svc:8000/config"


def _nothing(request: ScoringRequest) -> list[ScoreResult]:
    del request
    return []


def app(**fields: Any) -> ScorerApp:
    return ScorerApp(score=_nothing, name="cpu_headroom", query="up", **fields)


def prune(schema: dict[str, Any], value: Any) -> Any:
    """What the apiserver stores: keys the structural schema does not list are dropped, unless kept."""
    if isinstance(value, dict) and schema.get("type") == "object":
        props = schema.get("properties", {})
        keep = schema.get("x-kubernetes-preserve-unknown-fields", False)
        return {k: prune(props[k], v) if k in props else v for k, v in value.items() if k in props or keep}
    if isinstance(value, list) and "items" in schema:
        return [prune(schema["items"], v) for v in value]
    return value


def synced_from(served: ScorerApp) -> dict[str, Any]:
    """``served``'s ``/config`` as the hub fetches, checks and stores it in ``status.lastSyncedConfig``."""

    def answer(request: httpx.Request) -> httpx.Response:
        response = served.handle(request.method, request.url.path, {}, b"")
        return httpx.Response(
            response.status, headers=response.headers, stream=httpx.ByteStream(response.body)
        )

    with httpx.Client(transport=httpx.MockTransport(answer)) as client:
        fetched = fetch_config(client, CONFIG_URL)
    assert fetched.config is not None, fetched.result.message
    status_schema = SCHEMA["properties"]["status"]["properties"]["lastSyncedConfig"]
    stored: dict[str, Any] = prune(status_schema, fetched.config.model_dump(mode="json"))
    return stored


def full(spec: dict[str, Any] | None = None, mode: str = "Full") -> dict[str, Any]:
    return {"configURL": CONFIG_URL, "configSyncMode": mode, "source": PROM, **(spec or {})}


def test_scorer_app_serves_its_format_in_config_and_nothing_when_unset() -> None:
    served = app(dimension_format=PER_NODE).handle("GET", "/config", {}, b"").json()
    assert served["scoring"]["params"] == {
        "name": "cpu_headroom",
        "interval": 30,
        "scoreDimensionFormat": PER_NODE,
    }
    several = app(dimension_formats=["${node}", "${scoreName}"]).config().model_dump(mode="json")
    assert several["scoring"]["params"]["scoreDimensionFormats"] == ["${node}", "${scoreName}"]
    plain = app().handle("GET", "/config", {}, b"").json()
    assert plain["scoring"]["params"] == {"name": "cpu_headroom", "interval": 30}


def test_scorer_app_refuses_a_format_the_spec_would_refuse() -> None:
    with pytest.raises(ValidationError, match="at most 1024 characters"):
        app(dimension_format="x" * 1025)
    with pytest.raises(ValidationError, match="1 to 1024 characters"):
        app(dimension_formats=[""])
    with pytest.raises(ValueError, match="not both"):
        app(dimension_format=PER_NODE, dimension_formats=[PER_NODE])


def test_config_documents_without_a_format_still_validate_and_bad_ones_are_named() -> None:
    upstream = {"name": "x", "scoring": {"params": {"name": "x", "interval": 30, "model": "m"}}}
    doc = ScorerConfig.model_validate(upstream)
    assert doc.scoring.params.dimension_formats == () and doc.scoring.params.extra_params == {"model": "m"}
    with pytest.raises(ValidationError, match=r"scoring\.params\.scoreDimensionFormat"):
        ScorerConfig.model_validate({"scoring": {"params": {"scoreDimensionFormat": 7}}})
    with pytest.raises(ValidationError, match=r"scoring\.params\.scoreDimensionFormats"):
        ScorerConfig.model_validate({"scoring": {"params": {"scoreDimensionFormats": []}}})


def test_full_mode_takes_the_format_from_config_over_the_spec() -> None:
    synced = synced_from(app(dimension_format=PER_NODE))
    assert synced["scoring"]["params"]["scoreDimensionFormat"] == PER_NODE  # survives the CRD's pruning
    obj = scorer(full({"scoreDimensionFormat": "${pod}"}), synced)
    summary = ok(resolve(obj))
    assert summary.score_dimension_format == PER_NODE and summary.score_dimension_formats is None
    assert summary.scoring_params is None  # configures the agent: never sent to the scorer as a parameter
    assert resolve(obj).origins["scoreDimensionFormat"] == "/config"


def test_a_config_list_replaces_the_spec_format_and_a_config_string_replaces_a_spec_list() -> None:
    listed = synced_from(app(dimension_formats=["${node}", "${scoreName}"]))
    obj = scorer(full({"scoreDimensionFormat": "${pod}"}), listed)
    summary = ok(resolve(obj))
    assert resolve(obj).origins["scoreDimensionFormats"] == "/config"
    assert summary.score_dimension_formats == ["${node}", "${scoreName}"]
    assert summary.score_dimension_format == "${node}"  # the first entry, for upstream agents
    single = synced_from(app(dimension_format=PER_NODE))
    obj = scorer(full({"scoreDimensionFormats": ["${pod}", "${app}"]}), single)
    summary = ok(resolve(obj))
    assert (summary.score_dimension_format, summary.score_dimension_formats) == (PER_NODE, None)
    assert "scoreDimensionFormats" not in resolve(obj).origins


def test_the_spec_format_applies_in_none_mode_and_when_config_publishes_none() -> None:
    synced = synced_from(app(dimension_format=PER_NODE))
    obj = scorer(full({"scoreDimensionFormat": "${pod}"}, mode="None"), synced)
    assert ok(resolve(obj)).score_dimension_format == "${pod}"
    assert resolve(obj).origins["scoreDimensionFormat"] == "spec"
    silent = synced_from(app())
    summary = ok(resolve(scorer(full({"scoreDimensionFormats": ["${pod}", "${app}"]}), silent)))
    assert summary.score_dimension_formats == ["${pod}", "${app}"]
    assert ok(resolve(scorer(full(), silent))).score_dimension_format == "${scoreName}"


def test_an_unknown_placeholder_in_config_is_noted_where_it_came_from() -> None:
    synced = synced_from(app(dimension_format="${scoreName}-${hostname}"))
    notes = resolve(scorer(full(), synced)).notes
    assert (
        "status.lastSyncedConfig.scoring.params.scoreDimensionFormat: ${hostname} is not a placeholder "
        "and stays literal in every item name"
    ) in notes
