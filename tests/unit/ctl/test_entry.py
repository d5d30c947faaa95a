from __future__ import annotations

import subprocess
import sys

# Imports of click fail as they would on a base install (no `cli` extra).
BLOCK_CLICK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "click" or name.startswith("click."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Block())
from dynamic_scoring.ctl.entry import main
main()
"""


def test_without_click_the_script_says_which_extra_to_install() -> None:
    done = subprocess.run([sys.executable, "-c", BLOCK_CLICK], capture_output=True, text=True, timeout=60)
    assert done.returncode == 3
    assert "click is not installed" in done.stderr
    assert "pip install 'dynamic-scoring[cli]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_with_click_the_script_runs_the_group() -> None:
    code = (
        "import sys; sys.argv = ['dynamic-scoring', '--help']\n"
        "from dynamic_scoring.ctl.entry import main\n"
        "main()"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "why" in done.stdout and "status" in done.stdout
