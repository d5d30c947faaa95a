"""Where ``serve`` listens by default: every interface in a pod or container, loopback elsewhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from dynamic_scoring.scorer.serve import default_host, in_container


@pytest.fixture(autouse=True)
def no_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


def test_a_plain_host_keeps_loopback(tmp_path: Path) -> None:
    markers = (str(tmp_path / "absent"),)
    assert in_container(markers) is None
    assert default_host(markers) == "127.0.0.1"


def test_a_pod_listens_on_every_interface(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    markers = (str(tmp_path / "absent"),)
    assert in_container(markers) == "in a Kubernetes pod (KUBERNETES_SERVICE_HOST is set)"
    assert default_host(markers) == "0.0.0.0"


def test_a_container_is_known_by_its_engine_marker(tmp_path: Path) -> None:
    marker = tmp_path / ".containerenv"
    marker.write_text("")
    assert in_container((str(tmp_path / "absent"), str(marker))) == f"in a container ({marker} exists)"
    assert default_host((str(marker),)) == "0.0.0.0"
