"""Only dynamic-scoring-config in the manager's namespace is acted on; others say why not."""

from __future__ import annotations

from dynamic_scoring.addon.distribution.target import config_target_problem


def test_the_one_config_in_effect() -> None:
    assert config_target_problem("dynamic-scoring-config", "hub-ns", "hub-ns") is None


def test_wrong_name_or_namespace_is_named() -> None:
    why = config_target_problem("dynamic-scoring", "hub-ns", "hub-ns")
    assert why is not None and why.startswith("metadata.name:")
    why = config_target_problem("dynamic-scoring-config", "other", "hub-ns")
    assert why is not None and why.startswith("metadata.namespace:") and "'hub-ns'" in why
