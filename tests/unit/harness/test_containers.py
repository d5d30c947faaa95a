"""The container mode's pod-spec semantics: what the kubelet would refuse, and what podman gets."""

from __future__ import annotations

from typing import Any

import pytest

from e2e import containers
from e2e.containers import Identity, NonRootError, identity, memory_bytes, run_argv


@pytest.mark.parametrize(
    ("quantity", "expected"),
    [("128Mi", 128 * 2**20), ("1Gi", 2**30), ("500M", 500 * 10**6), ("1048576", 1048576), ("5e8", 5 * 10**8)],
)
def test_memory_quantities(quantity: str, expected: int) -> None:
    assert memory_bytes(quantity) == expected


def test_a_memory_quantity_that_is_not_one_is_refused() -> None:
    with pytest.raises(ValueError, match="not understood"):
        memory_bytes("lots")


def pod(**sc: Any) -> dict[str, Any]:
    return {"securityContext": sc}


@pytest.mark.parametrize(
    ("pod_sc", "container_sc", "image_user", "message"),
    [
        ({"runAsNonRoot": True}, {}, "", "image will run as root"),
        ({"runAsNonRoot": True}, {}, "0:0", "image will run as root"),
        ({"runAsNonRoot": True}, {}, "nobody", r"non-numeric user \(nobody\)"),
        ({"runAsNonRoot": True, "runAsUser": 1000}, {"runAsUser": 0}, "65532", "runAsUser breaks non-root"),
        ({}, {"runAsNonRoot": True, "runAsUser": 0}, "65532", "runAsUser breaks non-root"),
    ],
)
def test_run_as_non_root_refusals_match_the_kubelet(
    pod_sc: dict[str, Any], container_sc: dict[str, Any], image_user: str, message: str
) -> None:
    with pytest.raises(NonRootError, match=message):
        identity(pod(**pod_sc), {"securityContext": container_sc}, image_user)


def test_container_level_wins_and_groups_collect() -> None:
    who = identity(
        pod(runAsNonRoot=True, runAsUser=1, runAsGroup=2, supplementalGroups=[5, 6], fsGroup=7),
        {"securityContext": {"runAsUser": 65532}},
        "",
    )
    assert who == Identity(uid=65532, gid=2, groups=(5, 6, 7))
    assert identity(pod(runAsNonRoot=True), {}, "65532:65532") == Identity(uid=None, gid=None, groups=())


def argv_for(container: dict[str, Any], env: dict[str, str]) -> list[str]:
    return run_argv(
        name="n",
        runner_label="l",
        image="img:1",
        hostname="h",
        pod_spec={},
        container=container,
        who=Identity(uid=65532, gid=None, groups=(7,)),
        image_user="65532:65532",
        mounts=[("/src", "/dst", True), ("/tmp/e", "/scratch", False)],
        env_names=sorted(env),
        env=env,
        command=["dynamic-scoring-agent"],
        args=["--x=1"],
    )


def test_the_podman_command_carries_the_security_context_and_never_a_secret_value() -> None:
    container = {
        "securityContext": {
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
        },
        "resources": {"limits": {"memory": "64Mi", "cpu": "1"}},
    }
    argv = argv_for(container, {"TOKEN": "s3cr3t", "PATH": "/custom"})
    text = " ".join(argv)
    assert "s3cr3t" not in text, "an env value must travel in podman's environment, not its argv"
    assert "--env TOKEN" in text and "--env PATH=/custom" in text
    for expected in (
        "--pull never",
        "--network host",
        "--user 65532",
        "--group-add 7",
        "--read-only --read-only-tmpfs=false",
        "--cap-drop ALL",
        "--cap-add NET_BIND_SERVICE",
        "--security-opt no-new-privileges",
        f"--memory {64 * 2**20}",
        "--volume /src:/dst:ro",
        "--volume /tmp/e:/scratch:rw",
        f"--label {containers.LABEL}=l",
        '--entrypoint ["dynamic-scoring-agent"] img:1 --x=1',
    ):
        assert expected in text, expected
    assert argv[-2:] == ["img:1", "--x=1"]


def test_a_writable_root_and_no_limits_add_no_flags() -> None:
    text = " ".join(argv_for({}, {}))
    assert "--read-only" not in text and "--memory" not in text and "--cap-drop" not in text


# --- OpenShift's restricted-v2 SCC, emulated where a namespace carries its UID range -----------------
OPENSHIFT_NS = {
    "openshift.io/sa.scc.uid-range": "1000680000/10000",
    "openshift.io/sa.scc.supplemental-groups": "1000680000/10000",
}
UNPINNED: dict[str, Any] = {
    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [{"name": "c", "securityContext": {"allowPrivilegeEscalation": False}}],
}


def test_a_namespace_without_an_scc_range_is_not_openshift() -> None:
    assert containers.admit_restricted_v2(UNPINNED, {}) is None
    assert containers.admit_restricted_v2(UNPINNED, {"other": "x"}) is None


def test_the_scc_gives_an_unpinned_pod_the_namespaces_first_uid_and_group() -> None:
    admitted = containers.admit_restricted_v2(UNPINNED, OPENSHIFT_NS)
    assert admitted is not None
    assert admitted["securityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
        "runAsUser": 1000680000,
        "fsGroup": 1000680000,
    }
    assert "runAsUser" not in UNPINNED["securityContext"]  # the declared spec is left alone
    who = identity(admitted, admitted["containers"][0], "65532:65532")
    assert who == Identity(uid=1000680000, gid=None, groups=(1000680000,))  # GID 0 from the runtime
    argv = run_argv(
        name="n",
        runner_label="l",
        image="img",
        hostname="h",
        pod_spec=admitted,
        container=admitted["containers"][0],
        who=who,
        image_user="65532:65532",
        mounts=[],
        env_names=[],
        env={},
        command=["x"],
        args=[],
    )
    assert argv[argv.index("--user") + 1] == "1000680000"
    assert argv[argv.index("--group-add") + 1] == "1000680000"


def test_a_uid_inside_the_range_is_kept() -> None:
    spec = {**UNPINNED, "securityContext": {"runAsUser": 1000680005}}
    admitted = containers.admit_restricted_v2(spec, OPENSHIFT_NS)
    assert admitted is not None and admitted["securityContext"]["runAsUser"] == 1000680005


@pytest.mark.parametrize(
    ("where", "message"),
    [
        (
            "pod",
            "spec.securityContext.runAsUser: Invalid value: 65532: "
            "must be in the ranges: [1000680000, 1000689999]",
        ),
        ("container", "spec.containers[0].securityContext.runAsUser: Invalid value: 65532"),
        (
            "fsGroup",
            "spec.securityContext.fsGroup: Invalid value: []int64{65532}: 65532 is not an allowed group",
        ),
    ],
)
def test_a_pod_pinning_a_uid_outside_the_range_is_refused(where: str, message: str) -> None:
    spec: dict[str, Any] = {
        "securityContext": {"runAsNonRoot": True},
        "containers": [{"name": "c", "securityContext": {}}],
    }
    if where == "pod":
        spec["securityContext"]["runAsUser"] = 65532
    elif where == "container":
        spec["containers"][0]["securityContext"]["runAsUser"] = 65532
    else:
        spec["securityContext"]["fsGroup"] = 65532
    with pytest.raises(containers.SCCRefusedError) as refused:
        containers.admit_restricted_v2(spec, OPENSHIFT_NS)
    assert 'unable to validate against any security context constraint: [provider "restricted-v2"' in str(
        refused.value
    )
    assert message in str(refused.value)
