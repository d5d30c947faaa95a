"""The approver approves only requests that Go reads as the request the approver checked.

Each generated `spec.request` text goes to the approver and to `csr_reader`, a small Go program
that reads it as Kubernetes does (`encoding/pem.Decode`, `x509.ParseCertificateRequest`, the
signature check, and a certificate issued from the template kube-controller-manager's signer
builds: the parsed subject, SANs and extensions).  Whenever the approver says yes, Go must read the
same CN and the same Organizations, the same subject alternative names (DNS, IP, URI, e-mail) and
extensions as `cryptography` read for the approver, and the certificate must carry exactly those as
user, groups and SANs.  The texts are the named forging shapes, thousands of random framings and
edits of an honest and a forged block (seeded; `DS_CSR_FUZZ_SEED` and `DS_CSR_FUZZ_COUNT` explore
further), and requests whose attributes Go merges while `cryptography` reads only the first.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import random
import subprocess
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from dynamic_scoring.addon.registration.csr_approval import agent_dns_name, decide
from dynamic_scoring.addon.registration.csr_request import request_der
from dynamic_scoring.addon.registration.identity import default_groups, default_user
from dynamic_scoring.kube.jsontypes import JSON
from e2e.csr_shapes import FORGING_SHAPES, agent_request, framed_texts, pem_block
from e2e.gobuild import go_program
from tests.csr_attributes import (
    EXTENSION_REQUEST,
    HOSTILE_SAN,
    KLUSTERLET_SAN,
    MS_EXTENSION_REQUEST,
    attribute,
    challenge_password,
    extension_request,
    extensions_value,
    request_with_attributes,
    tlv,
)

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


NO_NAMES: JSON = {"dns": [], "ip": [], "uri": [], "email": []}


def python_reading(text: bytes) -> JSON:
    """The SANs and extension OIDs `cryptography` reads from an approved text, in Go's reading's shape."""
    csr = x509.load_der_x509_csr(request_der(text))
    sans: JSON = {"dns": [], "ip": [], "uri": [], "email": []}
    for extension in csr.extensions:
        if isinstance(extension.value, x509.SubjectAlternativeName):
            sans["dns"] += extension.value.get_values_for_type(x509.DNSName)
            sans["ip"] += [str(ip) for ip in extension.value.get_values_for_type(x509.IPAddress)]
            sans["uri"] += extension.value.get_values_for_type(x509.UniformResourceIdentifier)
            sans["email"] += extension.value.get_values_for_type(x509.RFC822Name)
    return {"sans": sans, "extensions": [e.oid.dotted_string for e in csr.extensions]}


def assert_go_reads_what_was_approved(text: bytes, go: JSON, where: str) -> None:
    """Go reads the agent's identity, and the SANs and extensions `cryptography` read, into the cert."""
    assert not go.get("error"), f"approved, but Go cannot read it ({go['error']}); {where}"
    assert go["commonName"] == go["user"] == USER, where
    # The certificate's Organizations are one DER SET, sorted by encoding: compare as sets.
    assert sorted(go["organizations"]) == sorted(go["groups"]) == sorted(GROUPS), where
    assert go["attributes"] == ["2.5.4.10", "2.5.4.10", "2.5.4.3"], where
    python = python_reading(text)
    assert go["sans"] == go["certSans"] == python["sans"], where
    assert go["extensions"] == python["extensions"], where
    # And what both read is at most the klusterlet's one DNS name.
    assert go["sans"] in (NO_NAMES, {**NO_NAMES, "dns": [agent_dns_name()]}), where
    assert go["extensions"] in ([], ["2.5.29.17"]), where


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
        assert_go_reads_what_was_approved(text, go, f"seed {seed}, text {text!r}")

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


ATTRIBUTE_POOL: dict[str, bytes] = {
    "extensionRequest(klusterlet SAN)": extension_request(KLUSTERLET_SAN),
    "extensionRequest(URI, IP, DNS, e-mail)": extension_request(HOSTILE_SAN),
    "extensionRequest(basicConstraints CA)": extension_request(
        x509.BasicConstraints(ca=True, path_length=None)
    ),
    "extensionRequest()": extension_request(),
    "MS extensionRequest(klusterlet SAN)": extension_request(KLUSTERLET_SAN, type_oid=MS_EXTENSION_REQUEST),
    "MS extensionRequest(URI, IP, DNS, e-mail)": extension_request(
        HOSTILE_SAN, type_oid=MS_EXTENSION_REQUEST
    ),
    "extensionRequest of two values": attribute(
        EXTENSION_REQUEST, extensions_value(KLUSTERLET_SAN), extensions_value(HOSTILE_SAN)
    ),
    "extensionRequest of no value": attribute(EXTENSION_REQUEST),
    "challengePassword": challenge_password(),
    "unknown attribute 1.2.3.4": attribute("1.2.3.4", tlv(0x0C, b"x")),
}
"""Attributes a request may carry; the test sends every sequence of up to two and random ones of three."""


def test_every_approved_request_is_read_by_go_with_the_sans_the_approver_checked() -> None:
    """Go merges every extensionRequest attribute: an approved request still gets only the agent's SAN."""
    key = ec.generate_private_key(ec.SECP256R1())
    rng = random.Random(int(os.environ.get("DS_CSR_FUZZ_SEED", "20261128")))
    pool = list(ATTRIBUTE_POOL)
    sequences: list[tuple[str, ...]] = [
        *(seq for n in range(3) for seq in itertools.product(pool, repeat=n)),
        *(tuple(rng.choice(pool) for _ in range(3)) for _ in range(200)),
    ]
    texts = [
        pem_block(request_with_attributes(USER, GROUPS, [ATTRIBUTE_POOL[a] for a in seq], key))
        for seq in sequences
    ]
    readings = go_readings(texts)

    approved_sequences = []
    hostile_in_certificate = 0
    for seq, text, go in zip(sequences, texts, readings, strict=True):
        if not go.get("error") and "10.96.0.1" in go["certSans"]["ip"]:
            hostile_in_certificate += 1
        if approved(text):
            approved_sequences.append(seq)
            assert_go_reads_what_was_approved(text, go, f"attributes {seq}")
    # Only the klusterlet's shapes are approved: no attribute, or its one extensionRequest (an empty
    # one too, which both readers read as no extension).
    assert sorted(set(approved_sequences)) == [
        (),
        ("extensionRequest()",),
        ("extensionRequest(klusterlet SAN)",),
    ]
    # The test has teeth: Go signs the hostile SANs into the certificate for many of these requests,
    # among them two in which `cryptography` reads no SAN but the klusterlet's: only the attribute
    # rule refuses those.  (Go refuses a request in which two attributes ask for the same extension,
    # so the hidden SANs come after an attribute without a SAN, or after Microsoft's OID.)
    assert hostile_in_certificate > 20, hostile_in_certificate
    for seq in (
        ("extensionRequest()", "extensionRequest(URI, IP, DNS, e-mail)"),
        ("MS extensionRequest(klusterlet SAN)", "extensionRequest(URI, IP, DNS, e-mail)"),
    ):
        go = readings[sequences.index(seq)]
        assert not go.get("error"), (seq, go)
        assert go["certSans"]["uri"] == ["spiffe://cluster.local/ns/kube-system/sa/admin"], (seq, go)
        assert go["certSans"]["ip"] == ["10.96.0.1"], (seq, go)
        python = python_reading(texts[sequences.index(seq)])
        assert python["sans"] in (NO_NAMES, {**NO_NAMES, "dns": [agent_dns_name()]}), (seq, python)
