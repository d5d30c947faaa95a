"""The benchmarks' layout: no import circle, and a root that lists benchmarks, not helpers.

Why.  A benchmark's helpers used to sit beside every other benchmark at ``bench/``'s root, and two of
them imported each other (the placement-stability run and its plot, through a lazy import).  Each
benchmark now keeps its helpers in a folder of its own; these checks keep it that way: the import
graph (grimp, the graph import-linter builds, function-level imports included) has no cycle, and every
module at the root, and every folder, registers a benchmark or is a script one names.
"""

from __future__ import annotations

import ast
from pathlib import Path

import grimp

BENCH = Path(__file__).resolve().parents[3] / "bench"
RUNNER = {"__init__.py", "__main__.py"}
"""The runner itself: the registry and ``python -m bench``."""


def _registers(path: Path) -> bool:
    """Whether ``path`` defines a function decorated ``@benchmark(...)``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for deco in node.decorator_list:
                if isinstance(deco, ast.Call) and getattr(deco.func, "id", None) == "benchmark":
                    return True
    return False


def cycles(graph: grimp.ImportGraph) -> list[tuple[str, str]]:
    """Every direct import ``a -> b`` for which ``b`` leads back to ``a``."""
    found = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            if graph.chain_exists(importer=imported, imported=importer):
                found.append((importer, imported))
    return found


def test_the_benchmarks_import_no_circle() -> None:
    graph = grimp.build_graph("bench", include_external_packages=False)
    assert cycles(graph) == []


def test_the_cycle_check_sees_a_lazy_import_circle(tmp_path: Path) -> None:
    import sys

    pkg = tmp_path / "circle_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "run.py").write_text("X = 1\n\ndef go():\n    from circle_pkg.plot import draw\n    return draw\n")
    (pkg / "plot.py").write_text("from circle_pkg.run import X\n\ndef draw():\n    return X\n")
    sys.path.insert(0, str(tmp_path))
    try:
        graph = grimp.build_graph("circle_pkg", include_external_packages=False, cache_dir=None)
    finally:
        sys.path.remove(str(tmp_path))
    assert ("circle_pkg.plot", "circle_pkg.run") in cycles(graph)


def test_the_root_lists_benchmarks_and_folders_only() -> None:
    stray = [p.name for p in sorted(BENCH.glob("*.py")) if p.name not in RUNNER and not _registers(p)]
    assert stray == [], f"modules at bench/'s root that register no benchmark: {stray}"


def test_every_folder_holds_a_benchmark() -> None:
    folders = [p for p in sorted(BENCH.iterdir()) if (p / "__init__.py").is_file()]
    assert folders
    empty = [p.name for p in folders if not any(_registers(m) for m in p.rglob("*.py"))]
    assert empty == [], f"folders under bench/ that register no benchmark: {empty}"
