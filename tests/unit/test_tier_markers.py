"""A test's tier marker comes from its directory, never from the test file.

The root `conftest.py` marks every test with its tier from where it lives: `tests/<dir>/` through
`TIER_BY_DIR`, and `e2e/tests/` as e2e.  A tier marker set by hand as well (`pytestmark =
pytest.mark.unit`, `@pytest.mark.component`, `pytest.param(..., marks=pytest.mark.e2e)`) is at best
redundant and at worst wrong: a file moved from tests/unit to tests/component that keeps its
`pytest.mark.unit` would be selected by both `-m unit` and `-m component`.  So this scans every
Python file under `tests/` and `e2e/tests/` with `ast` and fails naming each file and line that
sets a tier marker by hand.

A directory the conftest does not map (today `tests/packaging/`, absent from `TIER_BY_DIR`) still
needs its own tier set by hand, so there, and only there, the marker named after the directory is
allowed.  The mapped directories are read from `TIER_BY_DIR` itself: once a directory is added
there, its files are held to the same rule.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TIERS = frozenset({"unit", "component", "packaging", "integration", "e2e"})


def _tier_by_dir() -> dict[str, str]:
    """`TIER_BY_DIR` as the root conftest.py spells it (read, not imported)."""
    tree = ast.parse((REPO / "conftest.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "TIER_BY_DIR"
        ):
            value = ast.literal_eval(node.value)
            assert isinstance(value, dict)
            return {str(k): str(v) for k, v in value.items()}
    raise AssertionError("conftest.py no longer defines TIER_BY_DIR; update this test")


def _is_mark(node: ast.expr) -> bool:
    """`pytest.mark`, `<anything>.mark`, or a bare `mark` (from `from pytest import mark`)."""
    return (isinstance(node, ast.Attribute) and node.attr == "mark") or (
        isinstance(node, ast.Name) and node.id == "mark"
    )


def hand_set_tiers(source: str, filename: str = "<test>") -> list[tuple[int, str]]:
    """Each (line, tier) where `source` names a tier marker: `pytest.mark.<tier>` in a
    `pytestmark`, a decorator, a `marks=` or anywhere else, or `getattr(pytest.mark, "<tier>")`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Attribute) and node.attr in TIERS and _is_mark(node.value):
            found.append((node.lineno, node.attr))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
            and _is_mark(node.args[0])
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in TIERS
        ):
            found.append((node.lineno, str(node.args[1].value)))
    return sorted(found)


def _allowed_tier(path: Path, tier_by_dir: dict[str, str]) -> str | None:
    """The tier a file may still set by hand: its directory's name when the conftest does not map
    that directory; None when the conftest marks it (or it sits directly under tests/)."""
    parts = path.relative_to(REPO).parts
    if parts[0] == "e2e" or len(parts) < 3 or parts[1] in tier_by_dir:
        return None
    return parts[1]


def _test_files() -> list[Path]:
    files = sorted([*(REPO / "tests").rglob("*.py"), *(REPO / "e2e" / "tests").rglob("*.py")])
    assert len(files) > 100, f"found only {len(files)} test files under {REPO}; is REPO right?"
    return files


def test_no_tier_marker_is_set_by_hand() -> None:
    tier_by_dir = _tier_by_dir()
    offenders = [
        f"{path.relative_to(REPO)}:{line}: pytest.mark.{tier}"
        for path in _test_files()
        for line, tier in hand_set_tiers(path.read_text(encoding="utf-8"), str(path))
        if tier != _allowed_tier(path, tier_by_dir)
    ]
    assert not offenders, (
        "the root conftest.py marks each test with its tier from its directory; "
        "remove these hand-set tier markers:\n  " + "\n  ".join(offenders)
    )


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import pytest\npytestmark = pytest.mark.unit\n", [(2, "unit")]),
        ("import pytest\npytestmark = [pytest.mark.component, pytest.mark.anyio]\n", [(2, "component")]),
        ("import pytest\n@pytest.mark.integration\ndef test_x() -> None: ...\n", [(2, "integration")]),
        ("import pytest\nP = pytest.param(1, marks=pytest.mark.e2e)\n", [(2, "e2e")]),
        ("from pytest import mark\npytestmark = mark.packaging\n", [(2, "packaging")]),
        ('import pytest\npytestmark = getattr(pytest.mark, "unit")\n', [(2, "unit")]),
        ("import pytest\npytestmark = [pytest.mark.anyio, pytest.mark.late_tools]\n", []),
        ('import pytest\n@pytest.mark.skipif(True, reason="unit")\ndef test_x() -> None: ...\n', []),
        ("unit = component = 1\nx = unit + component\n", []),
    ],
)
def test_hand_set_tiers_finds_each_spelling(source: str, expected: list[tuple[int, str]]) -> None:
    assert hand_set_tiers(source) == expected


def test_only_unmapped_directories_may_name_their_own_tier() -> None:
    tier_by_dir = {"unit": "unit", "component": "component", "integration": "integration"}
    assert _allowed_tier(REPO / "tests" / "unit" / "sub" / "test_a.py", tier_by_dir) is None
    assert _allowed_tier(REPO / "e2e" / "tests" / "test_a.py", tier_by_dir) is None
    assert _allowed_tier(REPO / "tests" / "test_a.py", tier_by_dir) is None
    assert _allowed_tier(REPO / "tests" / "packaging" / "test_a.py", tier_by_dir) == "packaging"
    assert _allowed_tier(REPO / "tests" / "packaging" / "test_a.py", {"packaging": "packaging"}) is None
