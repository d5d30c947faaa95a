"""The distribution's base requirements are a scorer's only: pydantic and httpx.

``pip install dynamic-scoring`` is what a scorer image runs (docs/scorer-library.md); the hub's,
the agent's and the CLI's dependencies are extras.  This reads the built wheel's ``Requires-Dist``,
the metadata pip resolves from, rather than pyproject.toml, so a build-backend surprise shows too.
(Installing the wheel into a fresh venv and importing the library takes about 85 s here: measured
once and written down in docs/scorer-library.md instead of being run every time.)
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


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


# What a base install lacks: every extra's import name.  Blocking them in sys.modules makes any
# import of one fail as it would there, without the 85 s of a fresh venv.
EXTRAS = ("kubernetes", "jinja2", "prometheus_client", "click", "msgspec", "yaml", "re2", "opentelemetry")
BASE_ONLY = """
import json, sys
for name in {extras!r}:
    sys.modules[name] = None
from dynamic_scoring.scorer import ScorerApp, result
from dynamic_scoring.scorer.testing import check_app
from dynamic_scoring.contract.score_size import scores_bytes
score = lambda r: [result(s.mean(), pod=s.label("pod")) for s in r.with_points()]
report = check_app(ScorerApp(score, name="x", query="up"), large=False)
items = [(f"pod-{{i}}", i - 50) for i in range(100)]
print(json.dumps({{"ok": report.ok, "size": scores_bytes(items),
    "project": sorted(m for m in sys.modules if m.split(".")[:2] in (
        ["dynamic_scoring", "addon"], ["dynamic_scoring", "agent"], ["dynamic_scoring", "ctl"], ["e2e"]))}}))
"""


def test_the_scorer_library_runs_without_any_extra() -> None:
    """Import, a conformance check and the size rule of the results, with no extra importable."""
    from dynamic_scoring.contract.score_size import scores_bytes

    done = subprocess.run(
        [sys.executable, "-c", BASE_ONLY.format(extras=EXTRAS)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["ok"] and report["project"] == []
    # the standard library's encoding sizes plain names as msgspec's does
    assert report["size"] == scores_bytes([(f"pod-{i}", i - 50) for i in range(100)])
