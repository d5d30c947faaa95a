"""The wheel renders the agent exactly as the checkout does, templates included.

The Containerfile and any `pip install dynamic-scoring` use the wheel, not the checkout; the agent's
Jinja templates live outside the Python packages in the repository, so a wheel without them renders
nothing (it did: the first wheels shipped none).  This builds the real wheel, installs it into a
private directory and renders one cluster's agent from there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


RENDER = """
import json, dynamic_scoring.addon.render.templating as t
from dynamic_scoring.addon.render.agent import render_agent
mca = {"metadata": {"name": "dynamic-scoring", "namespace": "cluster1"}, "spec": {}}
print(json.dumps({"dir": str(t.TEMPLATES_DIR), "manifests": render_agent(mca=mca, adc=None).manifests}))
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(REPO)],
        check=True,
        timeout=300,
    )
    (built,) = out.glob("dynamic_scoring-*.whl")
    return built


def test_wheel_carries_every_template(wheel: Path) -> None:
    in_repo = {p.relative_to(REPO / "templates").as_posix() for p in (REPO / "templates").rglob("*.j2")}
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    prefix = "dynamic_scoring/addon/templates/"
    packaged = {n.removeprefix(prefix) for n in names if n.startswith(prefix)}
    assert in_repo, "no templates in the repository?"
    assert packaged == in_repo


def test_wheel_installs_one_import_name(wheel: Path) -> None:
    """Only ``dynamic_scoring`` lands in site-packages: a scorer author's own ``agent`` or ``samples``
    module must not collide with ours (the first wheels installed ``addon``, ``agent``, ``ctl`` and
    ``samples`` as top-level packages)."""
    with zipfile.ZipFile(wheel) as zf:
        top = {n.split("/", 1)[0] for n in zf.namelist()}
        entry_points = zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt")))
    assert {t for t in top if not t.endswith(".dist-info")} == {"dynamic_scoring"}
    scripts = [line.split("=", 1)[1].strip() for line in entry_points.decode().splitlines() if "=" in line]
    assert scripts and all(s.startswith("dynamic_scoring.") for s in scripts), scripts


def test_every_console_script_resolves_from_the_installed_wheel(wheel: Path, tmp_path: Path) -> None:
    """Each ``[project.scripts]`` target imports from the wheel alone (not the checkout) and is callable."""
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        timeout=300,
    )
    check = (
        "import importlib, importlib.metadata as md, sys\n"
        "eps = [e for e in md.distribution('dynamic-scoring').entry_points if e.group == 'console_scripts']\n"
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
    assert int(done.stdout) == 6


def test_installed_wheel_renders_what_the_checkout_renders(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
        check=True,
        timeout=300,
    )

    def render(pythonpath: str) -> dict[str, object]:
        env = {**os.environ, "PYTHONPATH": pythonpath}
        done = subprocess.run(
            [sys.executable, "-c", RENDER], env=env, cwd=tmp_path, capture_output=True, text=True, check=True
        )
        return dict(json.loads(done.stdout))

    from_wheel = render(str(site))
    from_checkout = render(str(REPO))
    assert Path(str(from_wheel["dir"])).is_relative_to(site), from_wheel["dir"]
    assert Path(str(from_checkout["dir"])) == REPO / "templates"
    assert from_wheel["manifests"] == from_checkout["manifests"]
    assert from_wheel["manifests"], "nothing rendered"
