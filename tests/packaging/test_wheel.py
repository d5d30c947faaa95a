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

pytestmark = pytest.mark.packaging

RENDER = """
import json, addon.render.templating as t
from addon.render.agent import render_agent
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
    prefix = "addon/templates/"
    packaged = {n.removeprefix(prefix) for n in names if n.startswith(prefix)}
    assert in_repo, "no templates in the repository?"
    assert packaged == in_repo


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
