"""The approver approves only requests that Go reads as the subject the approver checked.

Each generated `spec.request` text goes to the approver and to `csr_reader`, a small Go program
that reads it as Kubernetes does (`encoding/pem.Decode`, `x509.ParseCertificateRequest`, the
signature check, and a certificate issued from the parsed subject).  Whenever the approver says
yes, Go must read the same CN and the same Organizations, and the certificate must carry exactly
those as user and groups.  The texts are the named forging shapes and thousands of random
framings and edits of an honest and a forged block (seeded; `DS_CSR_FUZZ_SEED` and
`DS_CSR_FUZZ_COUNT` explore further).
"""

from __future__ import annotations

import base64
import json
import os
import random
import subprocess
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import ec

from dynamic_scoring.addon.registration.csr_approval import decide
from dynamic_scoring.addon.registration.identity import default_groups, default_user
from dynamic_scoring.jsontypes import JSON
from e2e.csr_shapes import FORGING_SHAPES, agent_request, framed_texts, pem_block
from e2e.gobuild import go_program

CLUSTER = "cluster1"
USER = default_user(CLUSTER)
GROUPS = default_groups(CLUSTER)
STOLEN = "system:open-cluster-management:cluster2"  # cluster2's klusterlet group
SOURCE = Path(__file__).resolve().parent / "csr_reader"


def go_readings(texts: list[bytes]) -> list[JSON]:
    """What Go reads from each text, in order (one run of the reader for all of them)."""
    binary = go_program(SOURCE, "csr-reader", about="the Go CSR reader (standard library only; ~1 min cold)")
    lines = "".join(
        json.dumps({"id": i, "request": base64.b64encode(t).decode()}) + "\n" for i, t in enumerate(texts)
    )
    done = subprocess.run([str(binary)], input=lines, capture_output=True, text=True, check=True, timeout=300)
    readings = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["id"] for r in readings] == list(range(len(texts)))
    return readings


def csr_of(text: bytes) -> JSON:
    """cluster1's agent CSR as its klusterlet files it, with `text` as the request."""
    return {
        "metadata": {
            "name": "addon-cluster1-dynamic-scoring-x",
            "labels": {
                "open-cluster-management.io/addon-name": "dynamic-scoring",
                "open-cluster-management.io/cluster-name": CLUSTER,
            },
        },
        "spec": {
            "signerName": "kubernetes.io/kube-apiserver-client",
            "request": base64.b64encode(text).decode(),
            "usages": ["digital signature", "key encipherment", "client auth"],
            "username": f"system:open-cluster-management:{CLUSTER}:agent-x",
        },
    }


def approved(text: bytes) -> bool:
    return decide(
        csr_of(text), cluster={"metadata": {"name": CLUSTER}}, addon={"metadata": {"namespace": CLUSTER}}
    ).approve


def test_every_approved_request_is_read_by_go_as_the_subject_the_approver_checked() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    honest = agent_request(USER, GROUPS, key)
    forged = agent_request(USER, [*GROUPS, STOLEN], key)
    seed = int(os.environ.get("DS_CSR_FUZZ_SEED", "20261128"))
    count = int(os.environ.get("DS_CSR_FUZZ_COUNT", "4000"))
    texts = [
        pem_block(honest),
        pem_block(honest).rstrip(b"\n"),
        *(shape(pem_block(honest), pem_block(forged)) for shape in FORGING_SHAPES.values()),
        *framed_texts(honest, forged, random.Random(seed), count),
    ]
    readings = go_readings(texts)

    approvals = 0
    go_read_forged = 0
    for text, go in zip(texts, readings, strict=True):
        if not go.get("error") and STOLEN in go["groups"]:
            go_read_forged += 1
        if not approved(text):
            continue
        approvals += 1
        # The approver approves only the agent's own CN and groups, so that is what it checked.
        where = f"seed {seed}, text {text!r}"
        assert not go.get("error"), f"approved, but Go cannot read it ({go['error']}); {where}"
        assert go["commonName"] == go["user"] == USER, where
        # The certificate's Organizations are one DER SET, sorted by encoding: compare as sets.
        assert sorted(go["organizations"]) == sorted(go["groups"]) == sorted(GROUPS), where
        assert go["attributes"] == ["2.5.4.10", "2.5.4.10", "2.5.4.3"], where

    # The test has teeth: the honest request and its variant without a final newline are approved,
    # and many texts are ones Go reads as the forged subject, so an approver that took the first
    # block it likes would fail above.
    assert approved(texts[0]) and approved(texts[1])
    assert approvals >= 2
    assert go_read_forged > count // 10, go_read_forged


def test_go_reads_the_named_shapes_as_the_forged_request() -> None:
    """Guard for the shapes themselves: each is a text Kubernetes reads as the forged block."""
    key = ec.generate_private_key(ec.SECP256R1())
    honest = pem_block(agent_request(USER, GROUPS, key))
    forged = pem_block(agent_request(USER, [*GROUPS, STOLEN], key))
    named = [
        "END line with trailing bytes, then a forged block",
        "no newline before END, then a forged block",
    ]
    readings = go_readings([FORGING_SHAPES[name](honest, forged) for name in named])
    for name, go in zip(named, readings, strict=True):
        assert not go.get("error"), (name, go)
        assert STOLEN in go["groups"], (name, go)
