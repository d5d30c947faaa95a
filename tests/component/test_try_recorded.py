"""The scorer guide's "Try it on recorded data", as written: the README scorer, the shipped recording
replayed as its Prometheus, and one agent cycle through ``explain`` with the documented flags.

The scorer is ``samples/my_scorer/cpu_free.py``'s own app and the DynamicScorer is
``samples/my_scorer/local.yaml``; only the two ports differ from the guide (free ones, so the test
never collides with a scorer a developer runs on 8000).
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from dynamic_scoring.ctl.main import main
from dynamic_scoring.ctl.recording import load
from dynamic_scoring.ctl.replay import Replay, ReplayServer
from dynamic_scoring.scorer import ScorerApp
from tests.component.harness import serving

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "my_scorer"
GUIDE = ROOT / "docs" / "scorer-library.md"


def sample_app() -> ScorerApp:
    spec = importlib.util.spec_from_file_location("cpu_free_sample", SAMPLE / "cpu_free.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    app = module.app
    assert isinstance(app, ScorerApp)
    return app


@pytest.fixture
def scorer() -> Iterator[str]:
    with serving(sample_app()) as base:
        yield base


def expected_item() -> int:
    """What the cycle must publish: the last five minutes of the recording through the scorer and the
    DynamicScorer's band, computed here from the file."""
    (recording,) = load(SAMPLE / "recording.json").recordings
    (series,) = recording.response["data"]["result"]
    busy = [float(v) for _, v in series["values"][-21:]]  # range 300 s at step 15 s, ending now
    free = 100 * (1 - min(sum(busy) / len(busy), 1))  # the recorded query is already a share of the cores
    return round((free - 20) / 60 * 200 - 100)


def test_the_guides_commands_run_one_cycle_on_the_recording(scorer: str, tmp_path: Path) -> None:
    guide = GUIDE.read_text()
    for line in (
        "python samples/my_scorer/cpu_free.py",
        "dynamic-scoring replay samples/my_scorer/recording.json",
        "dynamic-scoring explain cpu-free --cluster cluster1 --file samples/my_scorer/local.yaml "
        "--allow-cidr 127.0.0.0/8",
    ):
        assert line in guide, line
    with ReplayServer(Replay(load(SAMPLE / "recording.json").recordings)) as replay:
        local = (SAMPLE / "local.yaml").read_text()
        assert "http://127.0.0.1:8000/config" in local and "http://127.0.0.1:9090" in local
        local = local.replace("http://127.0.0.1:8000", scorer).replace(
            "http://127.0.0.1:9090", f"http://127.0.0.1:{replay.port}"
        )
        path = tmp_path / "local.yaml"
        path.write_text(local)
        args = ["explain", "cpu-free", "--cluster", "cluster1", "--file", str(path)]
        env = {"KUBECONFIG": str(tmp_path / "no-kubeconfig")}
        refused = CliRunner().invoke(main, args, env=env)
        assert refused.exit_code != 0 and "--allow-cidr" in refused.output  # why the flag is in the guide
        done = CliRunner().invoke(main, [*args, "--allow-cidr", "127.0.0.0/8"], env=env)
    assert done.exit_code == 0, done.output
    assert "1 series" in done.output
    written = re.search(r"cpu_free\s+would write (-?\d+)", done.output)
    assert written is not None, done.output
    assert abs(int(written.group(1)) - expected_item()) <= 1, done.output  # a step of alignment at most
