"""Build hook: the README that PyPI shows, with links that lead somewhere there.

Why.  The README links to ``docs/...`` and ``samples/...`` relative to the repository, which GitHub
resolves and PyPI does not: on PyPI every one would 404.  At build time this hook reads README.md and
makes each relative Markdown link absolute, to the file on GitHub's main branch, so the long
description in the wheel and sdist works where it is read.  Hand-written rather than
hatch-fancy-pypi-readme so that building the wheels needs nothing beyond hatchling (air-gapped
builds of the wheelhouse).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from hatchling.metadata.plugin.interface import MetadataHookInterface

BLOB = "https://github.com/dynamic-scoring/dynamic-scoring/blob/main/"
"""Where a relative link points once the README is read away from the repository."""

_RELATIVE = re.compile(r"\]\((?!https?://|mailto:)([^)\s]+)\)")


def absolute_links(text: str) -> str:
    """``text`` with every relative Markdown link ``](path)`` made ``](BLOB + path)``.

    A link to a heading of the README itself (``](#install)``) goes to the README on GitHub, since
    PyPI gives its headings no anchors.
    """

    def absolute(m: re.Match[str]) -> str:
        target = m.group(1).removeprefix("./")
        return f"]({BLOB}{'README.md' if target.startswith('#') else ''}{target})"

    return _RELATIVE.sub(absolute, text)


class ReadmeLinksHook(MetadataHookInterface):
    """Sets ``readme`` (declared dynamic in pyproject.toml) from README.md with absolute links."""

    PLUGIN_NAME = "custom"

    def update(self, metadata: dict[str, Any]) -> None:
        """Hatchling calls this with the project's metadata before writing it."""
        text = (Path(self.root) / "README.md").read_text(encoding="utf-8")
        metadata["readme"] = {"content-type": "text/markdown", "text": absolute_links(text)}
