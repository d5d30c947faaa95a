"""The ``dynamic-scoring`` console script, importable without the CLI's dependencies.

The base install carries only the scorer library (docs/scorer-library.md), but it still installs
this script.  Without the ``cli`` extra, importing the click group fails deep in a traceback; this
shim turns that into one line saying what to install.
"""

from __future__ import annotations

import sys

MISSING_HINT = (
    "error: the dynamic-scoring CLI needs its extra dependencies ({missing} is not installed)\n"
    "hint: pip install 'dynamic-scoring[cli]' (before the first release reaches PyPI, from a checkout: "
    "pip install ./agent ./addon '.[cli]')"
)


def main() -> None:
    """Run the click group, or say which extra is missing."""
    try:
        from dynamic_scoring.ctl.main import main as group
    except ModuleNotFoundError as exc:
        print(MISSING_HINT.format(missing=exc.name or "a module"), file=sys.stderr)
        sys.exit(3)
    group()
