"""The distribution's base requirements are a scorer's only: pydantic and httpx.

``pip install dynamic-scoring`` is what a scorer image runs (docs/scorer-library.md); the hub and
the agent are distributions of their own (``dynamic-scoring-addon``, ``dynamic-scoring-agent``),
which the root's extras name, and they carry their own dependencies: an agent-only install has none
of the hub's.  This reads the built wheels' ``Requires-Dist``, the metadata pip resolves from, rather
than the pyproject.toml files, so a build-backend surprise shows too.
(Installing the wheel into a fresh venv and importing the library takes about 85 s here: measured
once and written down in docs/scorer-library.md instead of being run every time.)
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from e2e.image import DISTRIBUTIONS

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three wheels, side by side."""
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "-w",
            str(out),
            *(str(REPO / d) for d in DISTRIBUTIONS),
        ],
        check=True,
        timeout=300,
    )
    return out


def metadata_requires(wheel: Path) -> dict[str, set[str]]:
    """A wheel's ``Requires-Dist`` by extra ("" for the base), as lower-case project names."""
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


@pytest.fixture(scope="module")
def requires(built: Path) -> dict[str, set[str]]:
    (wheel,) = built.glob("dynamic_scoring-*.whl")
    return metadata_requires(wheel)


@pytest.fixture(scope="module")
def hub_requires(built: Path) -> set[str]:
    (wheel,) = built.glob("dynamic_scoring_addon-*.whl")
    return metadata_requires(wheel)[""]


@pytest.fixture(scope="module")
def agent_requires(built: Path) -> set[str]:
    (wheel,) = built.glob("dynamic_scoring_agent-*.whl")
    return metadata_requires(wheel)[""]


def test_base_requirements_are_what_a_scorer_needs(requires: dict[str, set[str]]) -> None:
    assert requires[""] == {"pydantic", "httpx"}


def test_the_hub_and_the_agent_are_extras_of_the_root(requires: dict[str, set[str]]) -> None:
    assert requires["agent"] == {"dynamic-scoring-agent"}
    assert requires["hub"] == {"dynamic-scoring-addon"}
    # The build backend writes self-referencing extras (cli = [agent,hub], ...) out in full.
    assert requires["agent"] | requires["hub"] <= requires["cli"]
    assert requires["cli"] <= requires["all"] <= requires["dev"]
    assert {"pytest", "mypy"} <= requires["dev"]
    for heavy in ("kubernetes", "jinja2", "prometheus-client", "click", "google-re2", "cryptography"):
        assert heavy not in requires[""]


def test_the_hub_and_the_agent_carry_their_own_dependencies(
    hub_requires: set[str], agent_requires: set[str]
) -> None:
    assert {"dynamic-scoring", "kubernetes", "prometheus-client", "msgspec", "click"} <= agent_requires
    assert {"dynamic-scoring", "kubernetes", "jinja2", "click", "pyyaml", "cryptography"} <= hub_requires
    # Selector regexes are compiled with RE2 by the agent and validated with it by the hub.
    assert "google-re2" in agent_requires & hub_requires
    # What only the hub needs stays out of the agent's distribution.
    assert not {"jinja2", "cryptography", "pyyaml"} & agent_requires


def test_an_agent_only_install_resolves_without_the_hubs_dependencies(built: Path, tmp_path: Path) -> None:
    """What pip would install for the agent alone, resolved from the index (the agent's wheel and the
    root's given as the built files, so no index copy of a name can stand in): neither jinja2 nor
    cryptography, at any depth."""
    report = tmp_path / "report.json"
    own = [str(next(built.glob(f"{name}-*.whl"))) for name in ("dynamic_scoring_agent", "dynamic_scoring")]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--dry-run",
            "--ignore-installed",
            "--report",
            str(report),
            *own,
        ],
        check=True,
        timeout=600,
    )
    names = {item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]}
    assert {"dynamic-scoring", "dynamic-scoring-agent", "kubernetes"} <= names
    assert not {"jinja2", "cryptography", "dynamic-scoring-addon"} & names, sorted(names)


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


BLOCKED_RUN = """
import sys
for name in {extras!r}:
    sys.modules[name] = None
sys.argv = {argv!r}
from {module} import main
main()
"""


def run_without_extras(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """A console script's function as a base install runs it: no extra importable."""
    code = BLOCKED_RUN.format(extras=EXTRAS, argv=[module, *args], module=module)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)


def test_the_cli_without_its_extra_says_what_to_install_instead_of_a_traceback() -> None:
    """`dynamic-scoring` is installed by the base wheel; without the cli extra it names the extra."""
    done = run_without_extras("dynamic_scoring.ctl.entry", "--help")
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and "ModuleNotFoundError" not in done.stderr, done.stderr
    assert "is not installed" in done.stderr and "pip install 'dynamic-scoring[cli]'" in done.stderr


def test_the_sample_scorers_of_the_base_wheel_run_without_any_extra() -> None:
    """The base wheel's other console scripts, the sample scorers, need no extra at all.

    These and the CLI are all of its scripts: the agent's and the hub's are in their own wheels.
    """
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    samples = ("cpu", "predict", "seasonal", "gpu", "cost", "power", "latency")
    assert {v.split(":")[0] for v in scripts.values()} == {
        "dynamic_scoring.ctl.entry",
        *(f"dynamic_scoring.samples.scorers.{m}" for m in samples),
    }
    for module in samples:
        done = run_without_extras(f"dynamic_scoring.samples.scorers.{module}", "--help")
        assert done.returncode == 0, (module, done.stderr[-2000:])
        assert "usage:" in done.stdout, (module, done.stdout)
