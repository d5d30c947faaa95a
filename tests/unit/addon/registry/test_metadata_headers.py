"""The hub refuses a DynamicScorer whose auth headers are a cloud metadata service's (finding S3)."""

from __future__ import annotations

import pytest

from dynamic_scoring.addon.registry.models import DynamicScorer, SpecProblem, parse_scorer


def scorer(auth: dict[str, object]) -> DynamicScorer | SpecProblem:
    spec: dict[str, object] = {
        "scoreName": "s",
        "configSyncMode": "None",
        "scoring": {"host": "http://scorer:8080", "path": "/scoring", "auth": auth},
    }
    return parse_scorer({"metadata": {"name": "s", "namespace": "hub"}, "spec": spec})


@pytest.mark.parametrize(
    "name", ["Metadata-Flavor", "metadata", "X-aws-ec2-metadata-token", "X-Google-Metadata-Request"]
)
def test_a_metadata_header_is_a_spec_problem_naming_it(name: str) -> None:
    parsed = scorer({"headers": [{"name": name, "value": "Google"}]})
    assert isinstance(parsed, SpecProblem), parsed
    assert name in parsed.message and "metadata-service header" in parsed.message


def test_ordinary_headers_still_parse() -> None:
    assert isinstance(scorer({"headers": [{"name": "X-Scope-OrgID", "value": "t"}]}), DynamicScorer)
