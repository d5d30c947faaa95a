"""A CRD's structural schema checked offline: each keyword the project's CRDs use, and the CRDs themselves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from dynamic_scoring.addon.registry.crds import crds_dir, open_api_schema
from dynamic_scoring.kube.structural import check, suggestion

ROOT = Path(__file__).resolve().parents[3]

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 5, "pattern": "^[a-z]+$"},
        "mode": {"type": "string", "enum": ["Full", "None"]},
        "count": {"type": "integer", "minimum": 1, "maximum": 10},
        "weight": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
        "on": {"type": "boolean"},
        "tags": {"type": "array", "maxItems": 2, "minItems": 1, "items": {"type": "string"}},
        "params": {"type": "object", "maxProperties": 2, "additionalProperties": {"type": "integer"}},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "nested": {"type": "object", "properties": {"host": {"type": "string"}}},
    },
}


def issues(value: Any) -> list[tuple[str, str]]:
    return [(i.field, i.message) for i in check(SCHEMA, value, "spec")]


def test_a_valid_object_has_no_issues() -> None:
    value = {
        "name": "abc",
        "mode": "Full",
        "count": 3,
        "weight": 0.5,
        "on": True,
        "tags": ["x"],
        "params": {"a": 1},
        "free": {"anything": {"goes": [1]}},
        "nested": {"host": "h"},
    }
    assert issues(value) == []


def test_every_keyword_reports_its_field() -> None:
    value = {
        "mode": "full",
        "count": 11,
        "weight": 0,
        "on": "yes",
        "tags": ["a", 2, "c"],
        "params": {"a": "1", "b": 2, "c": 3},
        "nested": {"hots": "h"},
    }
    assert issues(value) == [
        ("spec.name", "required"),
        ("spec.mode", "must be one of 'Full', 'None' (is 'full')"),
        ("spec.count", "must be at most 10 (is 11)"),
        ("spec.weight", "must be greater than 0 (is 0)"),
        ("spec.on", "must be of type boolean, not string"),
        ("spec.tags", "must have at most 2 items (has 3)"),
        ("spec.tags[1]", "must be of type string, not integer"),
        ("spec.params", "must have at most 2 entries (has 3)"),
        ("spec.params.a", "must be of type integer, not string"),
        ("spec.nested.hots", "unknown field (not in the CRD); did you mean 'host'?"),
    ]


def test_strings_are_checked_for_length_and_pattern() -> None:
    assert issues({"name": ""}) == [
        ("spec.name", "must be at least 1 character(s) long"),
        ("spec.name", "must match ^[a-z]+$ (is '')"),
    ]
    assert issues({"name": "abcdef"}) == [("spec.name", "must be at most 5 characters long (is 6)")]


def test_booleans_are_not_integers_and_integers_are_numbers() -> None:
    assert issues({"name": "a", "count": True}) == [("spec.count", "must be of type integer, not boolean")]
    assert issues({"name": "a", "weight": 2}) == []
    assert issues({"name": "a", "count": None}) == [("spec.count", "must be of type integer, not null")]


def test_suggestions_prefer_the_same_name_in_another_case_then_the_closest() -> None:
    known = ["scoreName", "source", "stabilization"]
    assert suggestion("scorename", known) == "scoreName"
    assert suggestion("sourse", known) == "source"
    assert suggestion("stabilisation", known) == "stabilization"
    assert suggestion("zzz", known) is None


@pytest.mark.parametrize("plural", ["dynamicscorers", "dynamicscoringconfigs"])
def test_every_sample_of_the_kind_passes_its_crd(plural: str) -> None:
    """The project's and upstream's samples apply on a strict apiserver, so they pass here too."""
    schema = open_api_schema(plural)
    kind = yaml.safe_load((crds_dir() / f"{plural}.yaml").read_text())["spec"]["names"]["kind"]
    seen = 0
    for path in sorted([*(ROOT / "samples").rglob("*.yaml")]):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == kind:
                seen += 1
                assert check(schema, doc) == [], path
    assert seen


def test_the_checkout_reads_the_repositorys_crds() -> None:
    assert crds_dir() == ROOT / "manifests" / "crds"
