"""The distribution's base requirements are a scorer's only: pydantic and httpx.

``pip install dynamic-scoring`` is what a scorer image runs (docs/scorer-library.md); the hub's,
the agent's and the CLI's dependencies are extras.  This reads the built wheel's ``Requires-Dist``,
the metadata pip resolves from, rather than pyproject.toml, so a build-backend surprise shows too.
(Installing the wheel into a fresh venv and importing the library takes about 85 s here: measured
once and written down in docs/scorer-library.md instead of being run every time.)
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.packaging


@pytest.fixture(scope="module")
def requires(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(REPO)],
        check=True,
        timeout=300,
    )
    (wheel,) = out.glob("dynamic_scoring-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = Parser().parsestr(zf.read(name).decode())
    by_extra: dict[str, set[str]] = {}
    for line in metadata.get_all("Requires-Dist") or []:
        requirement, _, marker = line.partition(";")
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", marker)
        project = re.match(r"[A-Za-z0-9._-]+(\[[^\]]*\])?", requirement.strip())
        assert project is not None, line
        by_extra.setdefault(extra.group(1) if extra else "", set()).add(project.group(0).lower())
    return by_extra


def test_base_requirements_are_what_a_scorer_needs(requires: dict[str, set[str]]) -> None:
    assert requires[""] == {"pydantic", "httpx"}


def test_hub_agent_and_cli_dependencies_are_extras(requires: dict[str, set[str]]) -> None:
    assert {"kubernetes", "prometheus-client", "msgspec", "click"} <= requires["agent"]
    assert {"kubernetes", "jinja2", "click", "pyyaml"} <= requires["hub"]
    # The build backend writes self-referencing extras (cli = [agent,hub], ...) out in full.
    assert requires["agent"] | requires["hub"] <= requires["cli"]
    assert requires["cli"] <= requires["all"] <= requires["dev"]
    assert {"pytest", "mypy"} <= requires["dev"]
    # Selector regexes are compiled with RE2 by the agent and validated with it by the hub.
    assert "google-re2" in requires["agent"] & requires["hub"]
    for heavy in ("kubernetes", "jinja2", "prometheus-client", "click", "google-re2"):
        assert heavy not in requires[""]
