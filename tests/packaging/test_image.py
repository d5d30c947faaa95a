"""`make image` builds a real image, and what it writes is usable as users will use it.

Runs `python -m e2e.image build` as a user would (warm after the first build in a run: seconds),
then checks the OCI archive with the tools users load it with (`skopeo`, `podman load`), and runs
the image under the agent's own security context.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from e2e.image import (
    REPO,
    WHEELHOUSE,
    archive_path,
    default_tag,
    host_arch,
    image_id,
    podman,
    project_version,
    ulimits,
)


@pytest.fixture(scope="module")
def built() -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "e2e.image", "build"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    # it reports its size and its time, as `make image` promises
    assert re.search(
        r"^built \S+: [0-9.]+ MB, archive \S+ \([0-9.]+ MB\), in [0-9.]+ s$", proc.stdout, re.M
    ), proc.stdout
    return image_id(default_tag())


def test_the_oci_archive_is_accepted_by_skopeo_and_podman_load(built: str, tmp_path: Path) -> None:
    archive = archive_path(project_version())
    out = tmp_path / "copied"
    subprocess.run(
        ["skopeo", "copy", "--quiet", f"oci-archive:{archive}", f"dir:{out}"], check=True, timeout=300
    )
    assert (out / "manifest.json").is_file()
    loaded = podman("load", "--input", str(archive))
    assert "Loaded image" in loaded, loaded
    loaded_id = loaded.strip().rsplit("sha256:", 1)[-1] if "sha256:" in loaded else ""
    if loaded_id:  # podman names the ID when the archive carries no tag
        assert loaded_id == built.removeprefix("sha256:")


def test_the_image_runs_its_entry_points_as_65532_on_a_read_only_root(built: str) -> None:
    script = (
        "id -u; id -g; dynamic-scoring-agent --help | head -1;"
        " dynamic-scoring-addon manager --help | head -1; dynamic-scoring-sample-gpu --help | head -1;"
        " dynamic-scoring-sample-cost --help | head -1;"
        " python -c 'from zoneinfo import ZoneInfo; print(ZoneInfo(\"Europe/Paris\"))'"
    )
    out = podman(
        "run",
        "--rm",
        *ulimits(),
        "--network",
        "none",
        "--read-only",
        "--read-only-tmpfs=false",
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        default_tag(),
        "sh",
        "-c",
        script,
    )
    uid, gid, agent, manager, gpu, cost, zone = out.strip().splitlines()
    assert (uid, gid) == ("65532", "65532")
    assert agent.startswith("Usage: dynamic-scoring-agent")
    assert manager.startswith("Usage: dynamic-scoring-addon manager")
    assert gpu.startswith("usage: dynamic-scoring-sample-gpu")  # the sample scorers ship in the image too
    assert cost.startswith("usage: dynamic-scoring-sample-cost")
    assert zone == "Europe/Paris"  # the cost sample's price schedules need the time zone database


def test_the_image_holds_the_agent_templates_and_no_source_tree(built: str) -> None:
    out = podman(
        "run",
        "--rm",
        *ulimits(),
        "--network",
        "none",
        default_tag(),
        "python",
        "-c",
        "import dynamic_scoring.addon.render.templating as t, os;"
        " print(t.TEMPLATES_DIR); print(os.path.exists('/src'))",
    )
    templates, src = out.strip().splitlines()
    assert templates == "/opt/venv/lib/python3.11/site-packages/dynamic_scoring/addon/templates"
    assert src == "False"


def test_the_wheelhouse_pins_exactly_the_wheels_it_holds(built: str) -> None:
    arch_dir = WHEELHOUSE / f"linux-{host_arch()}"
    pins = [line for line in (arch_dir / "requirements.txt").read_text().splitlines() if "==" in line]
    wheels = list(arch_dir.glob("*.whl"))
    assert pins and len(pins) == len(wheels)
    names = {w.name.split("-")[0].lower().replace("_", "-") for w in wheels}
    assert {p.split("==")[0].lower() for p in pins} == names
    assert "kubernetes" in names and "pydantic" in names and "jinja2" in names
