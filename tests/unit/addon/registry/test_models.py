"""CR models: a stored object that the model rejects becomes a problem naming the field."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.addon.registry.models import (
    DynamicScorer,
    LabelSelector,
    SpecAuth,
    SpecProblem,
    parse_scorer,
)


def test_spec_problem_names_the_field() -> None:
    res = parse_scorer(
        {"metadata": {"name": "x", "namespace": "n"}, "spec": {"scoring": {"params": {"interval": "30"}}}}
    )
    assert isinstance(res, SpecProblem)
    assert res.message.startswith("spec.scoring.params.interval:")


def test_unreadable_status_is_ignored_not_fatal() -> None:
    res = parse_scorer(
        {"metadata": {"name": "x", "namespace": "n"}, "spec": {}, "status": {"healthStatus": "Maybe"}}
    )
    assert isinstance(res, DynamicScorer) and res.status.health_status is None


def test_spec_auth_splits_upstream_token_from_extension() -> None:
    auth = SpecAuth.model_validate({"tokenSecretRef": {"name": "t", "key": "k"}})
    assert auth.extension() is None
    auth = SpecAuth.model_validate(
        {"tokenSecretRef": {"name": "t", "key": "k"}, "headers": [{"name": "X", "value": "v"}]}
    )
    ext = auth.extension()
    assert ext is not None and ext.headers is not None and ext.headers[0].name == "X"
    assert "tokenSecretRef" not in ext.model_dump(mode="json")


labels = st.dictionaries(st.sampled_from(["a", "b", "c"]), st.sampled_from(["1", "2"]), max_size=3)


@given(labels, labels)
def test_match_labels_is_subset(selector: dict[str, str], cluster: dict[str, str]) -> None:
    sel = LabelSelector.model_validate({"matchLabels": selector})
    assert sel.matches(cluster) == (selector.items() <= cluster.items())


def test_match_expressions() -> None:
    sel = LabelSelector.model_validate(
        {
            "matchExpressions": [
                {"key": "gpu", "operator": "Exists"},
                {"key": "env", "operator": "NotIn", "values": ["dev"]},
                {"key": "region", "operator": "In", "values": ["eu", "us"]},
                {"key": "legacy", "operator": "DoesNotExist"},
            ]
        }
    )
    assert sel.matches({"gpu": "a100", "region": "eu"})
    assert not sel.matches({"gpu": "a100", "region": "eu", "env": "dev"})
    assert not sel.matches({"region": "eu"})
    assert not sel.matches({"gpu": "x", "region": "ap"})
    assert not sel.matches({"gpu": "x", "region": "eu", "legacy": ""})


def test_a_selector_regex_re2_refuses_is_a_spec_problem_naming_the_matcher() -> None:
    # The hub validates OpenTelemetry selectors with the agent's rule (RE2), so a pattern the agent
    # could not run is refused on the scorer's status instead of failing on every cluster.
    res = parse_scorer(
        {
            "metadata": {"name": "x", "namespace": "n"},
            "spec": {
                "sources": [
                    {
                        "name": "otel",
                        "type": "OpenTelemetry",
                        "otel": {
                            "selectors": [
                                {"metric": "m", "matchers": [{"name": "svc", "op": "=~", "value": "(a)\\1"}]}
                            ]
                        },
                    }
                ]
            },
        }
    )
    assert isinstance(res, SpecProblem)
    assert res.message.startswith("spec.sources.0.otel.selectors.0.matchers.0:")
    assert "matcher svc: not a valid RE2 regular expression" in res.message
    assert "backreferences are not supported" in res.message


def test_a_host_header_is_a_spec_problem_naming_the_field() -> None:
    """Behind a shared ingress, ``Host`` would route the scorer's Secrets to another backend."""
    spec = {
        "scoring": {
            "host": "https://ingress.example",
            "auth": {"headers": [{"name": "Host", "value": "mine.example"}]},
        }
    }
    res = parse_scorer({"metadata": {"name": "x", "namespace": "n"}, "spec": spec})
    assert isinstance(res, SpecProblem)
    assert res.message.startswith("spec.scoring.auth.headers") and "set by the HTTP client" in res.message
