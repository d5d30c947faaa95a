"""The conformance check's /config rules agree with the hub's Full-mode sync
(dynamic_scoring.addon.registry.probe).

The library may not import the hub (an import contract).  Both apply the one URL rule
(``dynamic_scoring.outbound.urls``); the rest of the hub's /config rules the library restates, and this test
keeps the two from drifting: whatever the hub refuses, the check reports as an error.
"""

from __future__ import annotations

from typing import Any

import pytest

from dynamic_scoring.addon.registry.probe import check_config
from dynamic_scoring.contract.wire import ScorerConfig
from dynamic_scoring.scorer.conformance import ERROR, Checker

GOOD: dict[str, Any] = {
    "name": "s",
    "source": {
        "type": "Prometheus",
        "host": "http://prom:9090",
        "params": {"query": "up", "range": 60, "step": 15},
    },
    "scoring": {"host": "http://scorer:8000", "path": "/scoring", "params": {"name": "s", "interval": 30}},
}


def variant(section: str, key: str, value: Any, inner: str | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {k: (dict(v) if isinstance(v, dict) else v) for k, v in GOOD.items()}
    part = dict(doc[section])
    if inner is None:
        part[key] = value
    else:
        part[inner] = {**part[inner], key: value}
    doc[section] = part
    return doc


CASES = {
    "good": GOOD,
    "type prom": variant("source", "type", "prom"),
    "type lower case": variant("source", "type", "prometheus"),
    "type None": variant("source", "type", "none"),
    "negative range": variant("source", "range", -5, inner="params"),
    "negative interval": variant("scoring", "interval", -1, inner="params"),
    "ftp source host": variant("source", "host", "ftp://prom"),
    "scoring host with a space": variant("scoring", "host", "http://a b"),
    "placeholder host": variant("scoring", "host", "http://<NODE_IP>:30007"),
    "credentials in the host": variant("source", "host", "http://u:p@prom:9090"),
    "bad port": variant("source", "host", "http://prom:99999"),
    "IPv6 host": variant("source", "host", "http://[::1]:9090"),
    "trailing dot": variant("source", "host", "http://prom.monitoring.svc.:9090"),
}


def errors_of(doc: dict[str, Any]) -> list[str]:
    checker = Checker("http://127.0.0.1:1")
    checker._config_rules(ScorerConfig.model_validate(doc))
    return [f.seen for f in checker.report.findings if f.severity == ERROR]


@pytest.mark.parametrize("case", list(CASES))
def test_what_the_hub_refuses_is_an_error(case: str) -> None:
    doc = CASES[case]
    hub_ok, problems = check_config(ScorerConfig.model_validate(doc))
    ours = errors_of(doc)
    if hub_ok is None:
        assert ours, f"the hub refuses ({problems}) but the check passes"
    else:
        assert ours == [], f"the hub accepts it but the check reports {ours}"
