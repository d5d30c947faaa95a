"""`accept_clusters` tries `clusteradm accept` again while the hub is still catching up, within a deadline."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from e2e.ocm import accept_clusters
from e2e.tools import DEFAULT_OCM_VERSION, RELEASES, Tools

NOT_YET = (
    "Error: managedclusters.cluster.open-cluster-management.io cluster1 not found, no csr is approved yet"
)


def _tools(tmp_path: Path, fails: int) -> Tools:
    """Tools whose clusteradm is a script that fails `fails` times as the real one does, then accepts."""
    script = tmp_path / "clusteradm"
    calls = tmp_path / "calls"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {calls}\n'
        f'if [ "$(wc -l < {calls})" -le {fails} ]; then echo "{NOT_YET}" >&2; exit 1; fi\n'
        'echo "Starting approve csrs for the cluster cluster1"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    nothing = tmp_path / "absent"
    return Tools(
        *(nothing,) * 8,
        clusteradm=script,
        ocm=RELEASES[DEFAULT_OCM_VERSION],
        hub_crds=(),
        spoke_crds=(),
    )


def test_a_not_yet_known_cluster_is_accepted_on_a_later_attempt(tmp_path: Path) -> None:
    out = accept_clusters(
        _tools(tmp_path, fails=2), tmp_path / "kubeconfig", ["cluster1", "cluster2"], pause=0.01
    )
    assert "approve csrs" in out
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls == [f"--kubeconfig={tmp_path / 'kubeconfig'} accept --clusters cluster1,cluster2"] * 3


def test_a_cluster_that_never_appears_fails_with_clusteradms_words_and_the_attempts(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError) as err:
        accept_clusters(_tools(tmp_path, fails=10**6), tmp_path / "kc", ["cluster1"], timeout=0.2, pause=0.05)
    assert NOT_YET in str(err.value)
    attempts = len((tmp_path / "calls").read_text().splitlines())
    assert attempts >= 2 and f"after {attempts} attempts in 0.2 s" in str(err.value)
