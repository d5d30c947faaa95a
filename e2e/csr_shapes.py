"""Certificate signing request texts for the approver's tests: honest, forged, and framed to fool a reader.

An approver and Kubernetes must read the same subject out of one `spec.request`.  Go's
`encoding/pem.Decode` skips a block it finds malformed and takes the next one, so a text can
hold an honest block that a lenient reader takes and a forged one that Go takes.  The unit,
differential and e2e tests build those texts here, from real signed requests, so that each tier
tries the same shapes.
"""

from __future__ import annotations

import base64
import random
import warnings
from collections.abc import Callable

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

REQUEST = "CERTIFICATE REQUEST"


def agent_request(
    common_name: str,
    organizations: list[str],
    key: ec.EllipticCurvePrivateKey | None = None,
    *,
    extensions: list[x509.ExtensionType] | None = None,
) -> bytes:
    """The DER of a request signed by `key` for this CN and these Organizations (in this order).

    `extensions` are added as they are (the klusterlet adds a subjectAlternativeName with the DNS
    name `<addon>.addon.open-cluster-management.io`).
    """
    # The framework's CN is longer than X.509's 64-character upper bound; Go does not care, and
    # neither does the klusterlet, so these requests carry it too.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        subject = x509.Name(
            [
                *(x509.NameAttribute(NameOID.ORGANIZATION_NAME, o, _validate=False) for o in organizations),
                x509.NameAttribute(NameOID.COMMON_NAME, common_name, _validate=False),
            ]
        )
    key = key or ec.generate_private_key(ec.SECP256R1())
    builder = x509.CertificateSigningRequestBuilder().subject_name(subject)
    for extension in extensions or []:
        builder = builder.add_extension(extension, critical=False)
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.DER)


def pem_block(
    der: bytes,
    kind: str = REQUEST,
    *,
    headers: dict[str, str] | None = None,
    line: int = 64,
    eol: bytes = b"\n",
) -> bytes:
    """One PEM block, canonical by default (Go's `pem.EncodeToMemory`); each knob makes it less so."""
    body = base64.b64encode(der)
    out = b"-----BEGIN " + kind.encode() + b"-----" + eol
    for name, value in (headers or {}).items():
        out += f"{name}: {value}".encode() + eol
    if headers:
        out += eol
    out += b"".join(body[i : i + line] + eol for i in range(0, len(body), line))
    return out + b"-----END " + kind.encode() + b"-----" + eol


def _trailing_bytes_after_end(honest: bytes, forged: bytes) -> bytes:
    """The honest block's END line carries trailing bytes, so Go skips it and reads the forged one."""
    return honest.rstrip(b"\n") + b"x\n" + forged


def _no_newline_before_end(honest: bytes, forged: bytes) -> bytes:
    """The honest block's END follows its base64 on the same line, which Go does not take for an END."""
    head, _, tail = honest.rpartition(b"\n-----END ")
    return head + b"-----END " + tail + forged


FORGING_SHAPES: dict[str, Callable[[bytes, bytes], bytes]] = {
    "END line with trailing bytes, then a forged block": _trailing_bytes_after_end,
    "no newline before END, then a forged block": _no_newline_before_end,
    "two blocks, honest first": lambda honest, forged: honest + forged,
    "two blocks, forged first": lambda honest, forged: forged + honest,
    "two blocks, text between": lambda honest, forged: honest + b"see below\n" + forged,
}
"""Two-block texts: (honest canonical block, forged canonical block) -> text.  The first two are
the shapes a lenient reader took for the honest block while Kubernetes signed the forged one."""


_TOKENS = (
    b"\n",
    b"\r",
    b"\r\n",
    b" ",
    b"\t",
    b"x",
    b":",
    b"=",
    b"A",
    b"-----",
    b"\n-----END CERTIFICATE REQUEST-----\n",
    b"-----BEGIN CERTIFICATE REQUEST-----\n",
    b"-----END CERTIFICATE REQUEST-----",
    b"Proc-Type: 4,ENCRYPTED\n",
    b"\n\n",
)


def mutate(text: bytes, rng: random.Random, *, edits: int) -> bytes:
    """`text` with `edits` random insertions, deletions, line duplications or newline removals."""
    out = bytearray(text)
    for _ in range(edits):
        op = rng.randrange(5)
        at = rng.randrange(len(out) + 1)
        if op == 0:
            out[at:at] = rng.choice(_TOKENS)
        elif op == 1 and out:
            del out[at : at + rng.randint(1, 3)]
        elif op == 2:
            lines = bytes(out).split(b"\n")
            i = rng.randrange(len(lines))
            lines.insert(i, lines[i])
            out = bytearray(b"\n".join(lines))
        elif op == 3:
            newlines = [i for i, c in enumerate(out) if c == 0x0A]
            if newlines:
                del out[rng.choice(newlines)]
        else:
            out[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
    return bytes(out)


def framed_texts(honest_der: bytes, forged_der: bytes, rng: random.Random, count: int) -> list[bytes]:
    """`count` texts built from an honest and a forged request: reframed, combined and mutated.

    Each starts from one or two blocks (in either order, canonical or with other line lengths,
    CRLF, headers or another type), puts random framing before, between and after them, and
    then applies a few random edits, so that the texts cover what the named shapes cover and the
    shapes nobody named.
    """

    def block(der: bytes) -> bytes:
        choice = rng.randrange(8)
        if choice == 0:
            return pem_block(der, line=rng.choice((16, 63, 65, 76)))
        if choice == 1:
            return pem_block(der, eol=b"\r\n")
        if choice == 2:
            return pem_block(der, headers={"Proc-Type": "4,ENCRYPTED"})
        if choice == 3:
            return pem_block(der, kind=rng.choice(("CERTIFICATE", "NEW CERTIFICATE REQUEST", "X509 CRL")))
        return pem_block(der)

    frames = (b"", b"", b"", b"\n", b" ", b"junk\n", b"x", b"-----", b"\r\n")
    texts = []
    for _ in range(count):
        blocks = [block(honest_der)]
        if rng.random() < 0.6:
            blocks.insert(rng.randrange(2), block(forged_der))
        text = rng.choice(frames)
        for b in blocks:
            text += b + rng.choice(frames)
        if rng.random() < 0.5:
            text = rng.choice(list(FORGING_SHAPES.values()))(pem_block(honest_der), pem_block(forged_der))
        texts.append(mutate(text, rng, edits=rng.choice((0, 0, 1, 1, 2, 3, 5))))
    return texts
