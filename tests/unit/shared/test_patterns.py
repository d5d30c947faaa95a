"""Validation patterns match the whole value: no trailing newline slips through a `$` anchor.

Python's ``$`` also matches before a final newline, so ``re.match(r"^[a-z]+$", "name\\n")``
succeeds.  The CRD's OpenAPI patterns are stricter today, but the agent and the hub also read
values that never passed the CRD (ConfigMaps, AddOnDeploymentConfig variables, annotations,
flags), so every pattern in the product ends with ``\\Z`` instead, and each is defined once.
"""

from __future__ import annotations

import ast
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from dynamic_scoring.contract.wire import MAX_DIMENSION_LABEL_LENGTH, check_dimension_labels, parse_summaries
from e2e.image import DISTRIBUTIONS

REPO = Path(__file__).resolve().parents[3]
PORTIONS = [REPO / d / "dynamic_scoring" for d in DISTRIBUTIONS]
"""The namespace's three portions: the shared rooms, the hub's and the agent's."""


def _product_files() -> list[Path]:
    files = sorted(p for portion in PORTIONS for p in portion.rglob("*.py"))
    assert any("addon" in p.parts for p in files) and any("agent" in p.parts for p in files)
    return files


def _regex_calls(tree: ast.AST) -> list[tuple[ast.Call, str]]:
    out = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "re"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            out.append((node, node.args[0].value))
    return out


def test_no_pattern_in_the_product_ends_with_a_dollar_anchor() -> None:
    found = []
    for path in _product_files():
        for call, pattern in _regex_calls(ast.parse(path.read_text())):
            multiline = "MULTILINE" in ast.unparse(call) or pattern.startswith("(?m)")
            if pattern.endswith("$") and not pattern.endswith("\\$") and not multiline:
                found.append(f"{path.relative_to(REPO)}:{call.lineno}: {pattern!r}")
    assert not found, "end these with \\Z (or use fullmatch):\n" + "\n".join(found)


def test_no_module_defines_a_pattern_name_twice() -> None:
    """A second ``_LABEL_NAME = re.compile(...)`` silently replaced the first, and its bound."""
    found = []
    for path in _product_files():
        names: Counter[str] = Counter()
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _regex_calls(node.value):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        found += [f"{path.relative_to(REPO)}: {n}" for n, c in names.items() if c > 1]
    assert not found


@pytest.mark.parametrize(
    "fields",
    [
        {"scoringEndpointAuthName": "token\n", "scoringEndpointAuthKey": "token"},
        {"scoringEndpointAuthName": "ok", "scoringEndpointAuthKey": "token\n"},
        {"scoringAuth": {"headers": [{"name": "X-Org\n", "value": "v"}]}},
        {"scoreDimensionLabels": {"node": "instance\n"}},
        {"scoreDimensionLabels": {"node": "a" * (MAX_DIMENSION_LABEL_LENGTH + 1)}},
    ],
)
def test_a_trailing_newline_or_an_overlong_label_is_refused(fields: dict[str, Any]) -> None:
    base = {"name": "n", "scoreName": "s", "scoringEndpoint": "http://s:8000/scoring", "scoringInterval": 30}
    summaries, errors = parse_summaries(json.dumps([{**base, **fields}]))
    assert not summaries and errors, fields


def test_a_dimension_label_of_the_longest_length_is_accepted() -> None:
    check_dimension_labels({"node": "a" * MAX_DIMENSION_LABEL_LENGTH})
    with pytest.raises(ValueError, match="at most 128"):
        check_dimension_labels({"node": "a" * (MAX_DIMENSION_LABEL_LENGTH + 1)})
