from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from dynamic_scoring.contract.validation import describe_validation, validation_issues


class Inner(BaseModel):
    range: int


class Outer(BaseModel):
    name: str
    params: Inner


def _error(value: object) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        Outer.model_validate(value)
    return caught.value


def test_each_error_names_its_field_path_under_the_prefix() -> None:
    exc = _error({"name": 3, "params": {"range": "secret-token-value"}})
    assert [where for where, _ in validation_issues(exc, prefix="spec")] == ["spec.name", "spec.params.range"]
    assert [where for where, _ in validation_issues(exc)] == ["name", "params.range"]


def test_the_input_is_never_quoted() -> None:
    exc = _error({"name": "x", "params": {"range": "secret-token-value"}})
    assert "secret-token-value" not in describe_validation(exc, prefix="spec")


def test_an_error_about_the_whole_value_is_named_by_prefix_or_whole() -> None:
    exc = _error("not an object")
    assert describe_validation(exc, prefix="spec").startswith("spec: ")
    assert describe_validation(exc, whole="entry").startswith("entry: ")
    assert describe_validation(exc).startswith("document: ")


def test_a_limit_keeps_the_first_errors_and_counts_the_rest() -> None:
    exc = _error({"name": 1, "params": {"range": "x"}})
    every = describe_validation(exc)
    assert every.count("; ") == 1
    assert describe_validation(exc, limit=1) == every.split("; ")[0] + " (and 1 more)"
    assert describe_validation(exc, limit=2) == every
