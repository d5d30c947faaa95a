"""The wire boundary refuses what would fail every cycle or escape the agent's namespace (issue 6)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.contract.wire import (
    MAX_INTERVAL_SECONDS,
    ScorerSummary,
    display_name,
    escape_control,
    parse_summaries,
)

BASE: dict[str, Any] = {
    "name": "n",
    "scoreName": "s",
    "scoringEndpoint": "http://scorer:8000/scoring",
    "scoringInterval": 30,
}


def errors_of(**fields: Any) -> list[str]:
    summaries, errors = parse_summaries(json.dumps([{**BASE, **fields}]))
    assert len(summaries) + len(errors) == 1
    return [e.message for e in errors]


@pytest.mark.parametrize(
    "fields",
    [
        {"scoringEndpointAuthName": "../../other/secrets/x", "scoringEndpointAuthKey": "token"},
        {"sourceEndpointAuthName": "other/x", "sourceEndpointAuthKey": "token"},
        {"scoringEndpointAuthName": "UPPER", "scoringEndpointAuthKey": "token"},
        {"scoringEndpointAuthName": "ok", "scoringEndpointAuthKey": "../key"},
        {"scoringAuth": {"bearerTokenSecretRef": {"name": "a/b", "key": "t"}}},
        {"scoringAuth": {"basicAuthSecretRef": {"name": "x%2F..%2Fy"}}},
        {"sourceAuth": {"caSecretRef": {"name": "-bad", "key": "ca.crt"}}},
        {"sourceAuth": {"clientCertSecretRef": {"name": "c", "certKey": "tls crt"}}},
        {"sourceAuth": {"headers": [{"name": "X-Org", "secretKeyRef": {"name": "a" * 254, "key": "k"}}]}},
    ],
)
def test_every_secret_name_and_key_is_checked(fields: dict[str, Any]) -> None:
    (message,) = errors_of(**fields)
    assert "a Secret name must be a DNS subdomain" in message or "a Secret key must be" in message
    assert "other" not in message and "%2F" not in message  # the value itself is not repeated


def test_valid_secret_references_and_legacy_empties_pass() -> None:
    assert errors_of(scoringEndpointAuthName="", scoringEndpointAuthKey="") == []
    assert errors_of(scoringEndpointAuthName="my-token.v2", scoringEndpointAuthKey="TOKEN_1.b-c") == []


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"scoringInterval": 10**12}, "scoringInterval"),
        ({"scoringInterval": 2**63}, "scoringInterval"),
        ({"scoringInterval": -5}, "scoringInterval"),
        ({"validForSeconds": 10**12}, "validForSeconds"),
        ({"timeoutSeconds": 1e12}, "timeoutSeconds"),
        ({"sourceStep": 2**40}, "sourceStep"),
        ({"sourceRange": -1}, "sourceRange"),
        ({"scoringEndpoint": "http://scorer:99999/scoring"}, "scoringEndpoint"),
        ({"scoringEndpoint": "http://scorer:0/scoring"}, "scoringEndpoint"),
        ({"scoringEndpoint": "http://scorer/scoring\r\nX-Injected: 1"}, "scoringEndpoint"),
        ({"sourceEndpoint": "http://prom/api\tv1"}, "sourceEndpoint"),
        ({"sourceEndpoint": "http://prom/a b"}, "sourceEndpoint"),
        ({"scoringEndpoint": "http://[::1/scoring"}, "scoringEndpoint"),
        ({"scoringEndpoint": "http://h/" + "x" * 3000}, "scoringEndpoint"),
        ({"scoreName": "x" * 254}, "scoreName"),
        ({"name": "y" * 1_000_000}, "name"),
        ({"scoreNormalization": {"min": -1.7e308, "max": 1.7e308}}, "scoreNormalization"),
        (
            {"scoreNormalization": {"min": 0, "max": 1, "targetMin": -1.7e308, "targetMax": 1.7e308}},
            "scoreNormalization",
        ),
    ],
)
def test_ranges_and_urls_are_rejected_at_the_boundary(fields: dict[str, Any], where: str) -> None:
    (message,) = errors_of(**fields)
    assert message.startswith(where), message
    assert "X-Injected" not in message and len(message) < 300


def test_limits_themselves_are_accepted() -> None:
    assert errors_of(scoringInterval=MAX_INTERVAL_SECONDS, validForSeconds=604_800, timeoutSeconds=3600) == []
    assert errors_of(scoreName="x" * 253, scoringEndpoint="https://[::1]:65535/s?q=1") == []


def test_a_huge_or_control_character_name_is_shown_escaped_and_short() -> None:
    summaries, errors = parse_summaries(json.dumps([{**BASE, "scoreName": "evil\n" + "x" * 1_000_000}]))
    (error,) = errors
    assert summaries == [] and str(error).isprintable() and len(str(error)) < 300
    assert "evil\\x0a" in str(error)


def test_labels_of_summaries_are_escaped() -> None:
    s = ScorerSummary.model_validate({**BASE, "name": "a\x1b[31m", "scoreName": "b\u2028c"})
    assert s.label == "scorer=a\\x1b[31m score=b\\u2028c"


@given(st.text())
def test_escape_control_output_is_printable_and_keeps_printable_text(text: str) -> None:
    escaped = escape_control(text)
    assert escaped.isprintable()
    if text.isprintable():
        assert escaped == text
    assert len(display_name(text)) <= 80
