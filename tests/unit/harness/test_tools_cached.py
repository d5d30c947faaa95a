"""`python -m e2e.tools path`, which `make lint` uses to find actionlint: it never builds, and a tool
that is not built yet is an error that says to run `make tools`."""

from __future__ import annotations

import shutil

import pytest

from e2e import tools

pytestmark = pytest.mark.skipif(
    shutil.which("go") is None, reason="build-tools.sh keys its cache by `go env`"
)


def test_an_unbuilt_version_is_reported_not_built(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A version nobody builds: the cache has no directory for it, and a build would fail at the proxy.
    monkeypatch.setenv("ACTIONLINT_VERSION", "v0.0.0-never-built")
    with pytest.raises(tools.ToolsError, match="run 'make tools'"):
        tools.cached_binary("actionlint")
    assert tools.main(["path", "actionlint"]) == 1
    assert "make tools" in capsys.readouterr().err
