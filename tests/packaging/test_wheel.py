"""The wheels render the agent exactly as the checkout does, templates included.

The Containerfile and any `pip install dynamic-scoring` use the wheels, not the checkout: three
distributions under one import name (the root's shared rooms, CLI and scorer library; the hub's
`addon/`; the agent's `agent/`).  The agent's Jinja templates live outside the Python packages in the
repository, so a hub wheel without them renders nothing (it did: the first wheels shipped none).
This builds the real wheels, installs them into a private directory and renders one cluster's agent
from there.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from e2e.image import DISTRIBUTIONS as DISTRIBUTION_DIRS

REPO = Path(__file__).resolve().parents[2]


RENDER = """
import json, dynamic_scoring.addon.render.templating as t
from dynamic_scoring.addon.render.agent import render_agent
mca = {"metadata": {"name": "dynamic-scoring", "namespace": "cluster1"}, "spec": {}}
print(json.dumps({"dir": str(t.TEMPLATES_DIR), "manifests": render_agent(mca=mca, adc=None).manifests}))
"""


DISTRIBUTIONS = {
    "dynamic_scoring": REPO,
    "dynamic_scoring_addon": REPO / "addon",
    "dynamic_scoring_agent": REPO / "agent",
}
"""Each wheel's file-name prefix and the directory it is built from."""


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
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
            *map(str, DISTRIBUTIONS.values()),
        ],
        check=True,
        timeout=300,
    )
    built = {name: next(out.glob(f"{name}-*.whl")) for name in DISTRIBUTIONS}
    assert len(list(out.glob("*.whl"))) == len(DISTRIBUTIONS)
    return built


@pytest.fixture(scope="module")
def site(wheels: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three wheels installed together into a private directory, as the image installs them."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            *map(str, wheels.values()),
        ],
        check=True,
        timeout=300,
    )
    return target


def test_the_hub_wheel_carries_every_template(wheels: dict[str, Path]) -> None:
    in_repo = {p.relative_to(REPO / "templates").as_posix() for p in (REPO / "templates").rglob("*.j2")}
    with zipfile.ZipFile(wheels["dynamic_scoring_addon"]) as zf:
        names = zf.namelist()
    prefix = "dynamic_scoring/addon/templates/"
    packaged = {n.removeprefix(prefix) for n in names if n.startswith(prefix)}
    assert in_repo, "no templates in the repository?"
    assert packaged == in_repo


def test_the_long_description_pypi_shows_has_only_links_that_resolve(wheels: dict[str, Path]) -> None:
    """PyPI resolves no relative link: each of the README's must be absolute, to a file that exists."""
    with zipfile.ZipFile(wheels["dynamic_scoring"]) as zf:
        (meta,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        text = zf.read(meta).decode()
    description = text.split("\n\n", 1)[1]
    assert description.startswith("# dynamic-scoring")
    targets = re.findall(r"\]\(([^)\s]+)\)", description)
    assert len(targets) > 20, targets
    blob = "https://github.com/dynamic-scoring/dynamic-scoring/blob/main/"
    assert [t for t in targets if not t.startswith(("https://", "http://"))] == []
    ours = [t.removeprefix(blob).partition("#")[0] for t in targets if t.startswith(blob)]
    assert ours and [t for t in ours if not (REPO / t).exists()] == []


def test_the_hub_wheel_carries_the_crds_lint_checks_against(wheels: dict[str, Path], site: Path) -> None:
    in_repo = {p.name for p in (REPO / "manifests" / "crds").glob("*.yaml")}
    with zipfile.ZipFile(wheels["dynamic_scoring_addon"]) as zf:
        names = zf.namelist()
    prefix = "dynamic_scoring/addon/crds/"
    assert {n.removeprefix(prefix) for n in names if n.startswith(prefix)} == in_repo
    done = subprocess.run(
        [sys.executable, "-c", "from dynamic_scoring.addon.registry import crds; print(crds.crds_dir())"],
        env={**os.environ, "PYTHONPATH": str(site)},
        cwd=site,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(done.stdout.strip()).is_relative_to(site), done.stdout


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_each_wheel_installs_one_import_name(wheels: dict[str, Path], name: str) -> None:
    """Only ``dynamic_scoring`` lands in site-packages: a scorer author's own ``agent`` or ``samples``
    module must not collide with ours (the first wheels installed ``addon``, ``agent``, ``ctl`` and
    ``samples`` as top-level packages).  It is a namespace package: no wheel ships its
    ``__init__.py``, so the three install side by side without overwriting each other."""
    with zipfile.ZipFile(wheels[name]) as zf:
        names = zf.namelist()
        entry_points = zf.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt")))
    top = {n.split("/", 1)[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"dynamic_scoring"}
    assert "dynamic_scoring/__init__.py" not in names
    scripts = [line.split("=", 1)[1].strip() for line in entry_points.decode().splitlines() if "=" in line]
    assert scripts and all(s.startswith("dynamic_scoring.") for s in scripts), scripts


def test_the_hub_and_the_agent_each_ship_only_their_own_package(wheels: dict[str, Path]) -> None:
    """The split is real: the hub's wheel holds ``dynamic_scoring.addon`` alone, the agent's
    ``dynamic_scoring.agent`` alone, and the root's neither."""

    def packages(name: str) -> set[str]:
        with zipfile.ZipFile(wheels[name]) as zf:
            return {
                n.split("/")[1]
                for n in zf.namelist()
                if n.startswith("dynamic_scoring/") and n.count("/") > 1
            }

    assert packages("dynamic_scoring_addon") == {"addon"}
    assert packages("dynamic_scoring_agent") == {"agent"}
    assert not {"addon", "agent"} & packages("dynamic_scoring")


def test_every_console_script_resolves_from_the_installed_wheels(site: Path, tmp_path: Path) -> None:
    """Each ``[project.scripts]`` target of the three imports from the wheels alone (not the checkout)
    and is callable."""
    check = (
        "import importlib, importlib.metadata as md, sys\n"
        "eps = [e for d in ('dynamic-scoring', 'dynamic-scoring-addon', 'dynamic-scoring-agent')\n"
        "       for e in md.distribution(d).entry_points if e.group == 'console_scripts']\n"
        "assert eps, 'no console scripts'\n"
        "for e in eps:\n"
        "    fn = e.load()\n"
        "    assert callable(fn), e\n"
        "    where = sys.modules[e.module].__file__\n"
        "    assert where.startswith(sys.argv[1]), (e, where)\n"
        "print(len(eps))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run(
        [sys.executable, "-c", check, str(site)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    declared = sum(
        len(tomllib.loads((REPO / path / "pyproject.toml").read_text())["project"]["scripts"])
        for path in (".", "agent", "addon")
    )
    assert int(done.stdout) == declared == 10  # the CLI, 7 sample scorers, the agent, the addon manager


def test_installed_wheels_render_what_the_checkout_renders(site: Path, tmp_path: Path) -> None:
    def render(pythonpath: str) -> dict[str, object]:
        env = {**os.environ, "PYTHONPATH": pythonpath}
        done = subprocess.run(
            [sys.executable, "-c", RENDER], env=env, cwd=tmp_path, capture_output=True, text=True, check=True
        )
        return dict(json.loads(done.stdout))

    from_wheel = render(str(site))
    from_checkout = render(os.pathsep.join(str(REPO / d) for d in DISTRIBUTION_DIRS))
    assert Path(str(from_wheel["dir"])).is_relative_to(site), from_wheel["dir"]
    assert Path(str(from_checkout["dir"])) == REPO / "templates"
    assert from_wheel["manifests"] == from_checkout["manifests"]
    assert from_wheel["manifests"], "nothing rendered"
