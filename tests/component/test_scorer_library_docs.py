"""docs/scorer-library.md's examples, run as written: the scorer module and the two tests beside it.

The module must import without serving (it guards ``serve`` with ``__main__``), its own tests must pass
against it in-process and over HTTP, and nothing but the token file's path is changed: a test cannot
write /var/run/secrets.
"""

from __future__ import annotations

import re
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from dynamic_scoring.scorer import ScorerServer

DOC = Path(__file__).resolve().parents[2] / "docs" / "scorer-library.md"
TOKEN_PATH = "/var/run/secrets/scorer/token"


def blocks() -> list[str]:
    return [str(b) for b in re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)]


@pytest.fixture
def module(tmp_path: Path) -> types.ModuleType:
    scorer, _tests = blocks()
    assert TOKEN_PATH in scorer
    (tmp_path / "token").write_text("s3cret")
    mod = types.ModuleType("pod_trend")
    code = scorer.replace(TOKEN_PATH, str(tmp_path / "token"))
    exec(compile(code, str(DOC), "exec"), mod.__dict__)  # importing must not serve: it returns
    return mod


@pytest.fixture
def served(module: types.ModuleType) -> Iterator[str]:
    server = ScorerServer(module.app, "127.0.0.1", 0)
    thread = server.start_in_thread()
    yield server.base_url
    server.shutdown()
    thread.join(timeout=10)


def test_the_documented_scorer_and_its_tests_pass_as_written(module: types.ModuleType, served: str) -> None:
    _scorer, tests = blocks()
    namespace = dict(module.__dict__)
    exec(compile(tests, str(DOC), "exec"), namespace)
    namespace["test_my_scorer_conforms"]()
    namespace["test_against_a_running_one"](served, "s3cret")


def test_the_documented_scorer_publishes_one_item_per_pod(module: types.ModuleType) -> None:
    config = module.app.config().model_dump(by_alias=True)
    assert config["scoring"]["params"]["scoreDimensionFormat"] == "${scoreName}-${namespace}-${pod}"
