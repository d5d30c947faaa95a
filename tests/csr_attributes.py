"""Certificate requests whose CertificationRequestInfo attributes are chosen byte by byte.

`cryptography`'s builder writes at most one extensionRequest attribute, so requests that carry two,
Microsoft's extension-request OID, a challengePassword or an attribute of several values are
assembled here in DER and signed with ECDSA P-256/SHA-256.  The unit tests and the Go-reader
differential test share them, so both tiers try the same requests.
"""

from __future__ import annotations

import ipaddress
import warnings

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

EXTENSION_REQUEST = "1.2.840.113549.1.9.14"
MS_EXTENSION_REQUEST = "1.3.6.1.4.1.311.2.1.14"
CHALLENGE_PASSWORD = "1.2.840.113549.1.9.7"
ECDSA_WITH_SHA256 = "1.2.840.10045.4.3.2"

AGENT_DNS = "dynamic-scoring.addon.open-cluster-management.io"
KLUSTERLET_SAN = x509.SubjectAlternativeName([x509.DNSName(AGENT_DNS)])
HOSTILE_SAN = x509.SubjectAlternativeName(
    [
        x509.DNSName("kubernetes.default.svc"),
        x509.IPAddress(ipaddress.ip_address("10.96.0.1")),
        x509.UniformResourceIdentifier("spiffe://cluster.local/ns/kube-system/sa/admin"),
        x509.RFC822Name("admin@example.com"),
    ]
)
"""What a hostile request hides in an attribute the approver did not read: every SAN type Go copies."""


def tlv(tag: int, content: bytes) -> bytes:
    """One DER element: `tag`, the minimal length, `content`."""
    n = len(content)
    if n < 0x80:
        return bytes([tag, n]) + content
    size = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(size)]) + size + content


def oid(dotted: str) -> bytes:
    """The DER OBJECT IDENTIFIER of a dotted OID."""
    arcs = [int(a) for a in dotted.split(".")]
    body = bytearray()
    for arc in [40 * arcs[0] + arcs[1], *arcs[2:]]:
        chunk = [arc & 0x7F]
        arc >>= 7
        while arc:
            chunk.append(0x80 | (arc & 0x7F))
            arc >>= 7
        body += bytes(reversed(chunk))
    return tlv(0x06, bytes(body))


def extensions_value(*extensions: x509.ExtensionType) -> bytes:
    """`Extensions` (SEQUENCE OF Extension, none critical): the value of an extension-request attribute."""
    return tlv(
        0x30,
        b"".join(tlv(0x30, oid(e.oid.dotted_string) + tlv(0x04, e.public_bytes())) for e in extensions),
    )


def attribute(type_oid: str, *values: bytes) -> bytes:
    """One `Attribute`: its type and the SET of its values, in the order given."""
    return tlv(0x30, oid(type_oid) + tlv(0x31, b"".join(values)))


def extension_request(*extensions: x509.ExtensionType, type_oid: str = EXTENSION_REQUEST) -> bytes:
    """An extension-request attribute (the standard OID unless `type_oid` says otherwise)."""
    return attribute(type_oid, extensions_value(*extensions))


def challenge_password(password: str = "secret") -> bytes:
    """A challengePassword attribute (a UTF8String), as SCEP clients send."""
    return attribute(CHALLENGE_PASSWORD, tlv(0x0C, password.encode()))


def request_with_attributes(
    common_name: str,
    organizations: list[str],
    attributes: list[bytes],
    key: ec.EllipticCurvePrivateKey | None = None,
) -> bytes:
    """The DER of a signed request whose attributes are exactly `attributes`, in that order."""
    key = key or ec.generate_private_key(ec.SECP256R1())
    with warnings.catch_warnings():  # the framework's CN is longer than X.509's 64 characters
        warnings.simplefilter("ignore", UserWarning)
        subject = x509.Name(
            [
                *(x509.NameAttribute(NameOID.ORGANIZATION_NAME, o, _validate=False) for o in organizations),
                x509.NameAttribute(NameOID.COMMON_NAME, common_name, _validate=False),
            ]
        )
    spki = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    info = tlv(0x30, tlv(0x02, b"\x00") + subject.public_bytes() + spki + tlv(0xA0, b"".join(attributes)))
    signature = key.sign(info, ec.ECDSA(hashes.SHA256()))
    return tlv(0x30, info + tlv(0x30, oid(ECDSA_WITH_SHA256)) + tlv(0x03, b"\x00" + signature))
