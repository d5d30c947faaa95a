"""The one reading of a CSR's `spec.request` the approver trusts: the one Kubernetes signs.

The approver checks a subject, and kube-controller-manager signs a subject; they must be the same
one.  Kubernetes reads `spec.request` with Go's `encoding/pem.Decode`, which skips any block it
finds malformed and takes the next, and whose scanning rules have changed between Go releases.
A lenient PEM reader on our side (any "first block" rule) can therefore pick an honest block
while Go picks a forged one after it: an honest block whose END line has trailing bytes, or one
with no newline before `-----END`, followed by a block whose Organizations name another cluster.

So the approver does not try to agree with Go's scanner.  It accepts only the one text that every
PEM reader reads the same way: exactly `pem.EncodeToMemory` of the DER it decodes, that is the
BEGIN line, the base64 in 64-character lines, the END line, a final newline (which may be
missing), and nothing else: no headers, no text around it, no second block, no CRLF.  The text is
decoded, re-encoded and compared byte for byte, so the rule holds by construction rather than by a
list of shapes.  The klusterlet builds its request with `pem.EncodeToMemory`, so honest requests
always pass.

Then the request's attributes are read from the DER by a walk of our own (below), and only then is
the DER parsed by `cryptography` and its self-signature checked, as the apiserver does.

The attributes are where the requested extensions live, and the two readers disagree about them.
Go's `x509.ParseCertificateRequest` merges the extensions of every extensionRequest attribute
(1.2.840.113549.1.9.14), reading each one's first value and skipping one with no value, and the
signer copies the subject alternative names it finds into the certificate.  `cryptography` reads
only the first extension-request attribute, and takes Microsoft's OID (1.3.6.1.4.1.311.2.1.14),
which Go ignores, for one.  So a second extensionRequest asking for URI, IP or DNS names would be
signed into the certificate without the approver having seen it.  The approver therefore accepts
only the attributes on which both readers agree, which are also the only ones the klusterlet sends:
none, or one extensionRequest holding one value.  Any other attribute is refused too,
challengePassword included: Kubernetes ignores them today, but the agent's request never carries
them, and an attribute nobody checked is one a future reader could map to something.
"""

from __future__ import annotations

import base64
import binascii
import warnings
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.x509.oid import ExtensionOID, NameOID

BEGIN = b"-----BEGIN CERTIFICATE REQUEST-----\n"
END = b"-----END CERTIFICATE REQUEST-----\n"
LINE_LENGTH = 64
"""Go's `encoding/pem` (and OpenSSL, and `cryptography`) break base64 at 64 characters."""

NOT_CANONICAL = (
    "spec.request is not exactly one PEM CERTIFICATE REQUEST block in canonical form "
    "(64-character base64 lines, no headers, nothing before or after it)"
)

EXTENSION_REQUEST = "1.2.840.113549.1.9.14"
"""PKCS#9 extensionRequest: the one attribute the klusterlet's request may carry (Go writes it)."""
MS_EXTENSION_REQUEST = "1.3.6.1.4.1.311.2.1.14"
"""Microsoft's extension-request OID: `cryptography` reads it as the extension request, Go does not."""
_ATTRIBUTE_NAMES = {
    EXTENSION_REQUEST: "extensionRequest",
    MS_EXTENSION_REQUEST: "Microsoft's extension request",
    "1.2.840.113549.1.9.7": "challengePassword",
    "1.2.840.113549.1.9.2": "unstructuredName",
}
"""Names for the refusal message, so the Event says what the attribute is and not only its OID."""

_KNOWN_SUBJECT = frozenset({NameOID.COMMON_NAME, NameOID.ORGANIZATION_NAME, NameOID.ORGANIZATIONAL_UNIT_NAME})
"""What the klusterlet puts in an addon's subject (user, groups, optional organization units)."""


class RequestError(ValueError):
    """`spec.request` is not a request the approver can read the way Kubernetes does."""


@dataclass(frozen=True)
class RequestSubject:
    """The subject of a request: CNs and Os in request order, and the dotted OIDs of anything else.

    The other attributes are reported because the apiserver may read more than CN and O: since
    Kubernetes 1.34 (AllowParsingUserUIDFromCertAuth, on by default) the attribute
    ``1.3.6.1.4.1.57683.2`` becomes the user's UID, and later releases may map others.
    """

    common_names: list[str]
    organizations: list[str]
    others: list[str]
    dns_names: list[str] = field(default_factory=list)
    """The DNS names of its subjectAlternativeName extension (the klusterlet asks for one)."""
    other_extensions: list[str] = field(default_factory=list)
    """Anything else it asks to have in the certificate: other extensions' dotted OIDs, and
    ``subjectAltName:<type>`` for a non-DNS name (IP, e-mail, URI, ...)."""


def canonical_pem(der: bytes) -> bytes:
    """`der` as Go's `pem.EncodeToMemory` writes a `CERTIFICATE REQUEST` block with no headers."""
    body = base64.b64encode(der)
    lines = b"".join(body[i : i + LINE_LENGTH] + b"\n" for i in range(0, len(body), LINE_LENGTH))
    return BEGIN + lines + END


def request_der(text: bytes) -> bytes:
    """The DER of the one canonical block that is the whole of `text`; RequestError otherwise."""
    whole = text if text.endswith(b"\n") else text + b"\n"
    if not whole.startswith(BEGIN) or not whole.endswith(END) or len(whole) < len(BEGIN) + len(END):
        raise RequestError(NOT_CANONICAL)
    body = whole[len(BEGIN) : len(whole) - len(END)]
    try:
        der = base64.b64decode(body.replace(b"\n", b""), validate=True)
    except binascii.Error:
        raise RequestError(NOT_CANONICAL) from None
    if canonical_pem(der) != whole:
        raise RequestError(NOT_CANONICAL)
    return der


def read_subject(request: bytes) -> RequestSubject:
    """The subject of `request` (the PEM text of `spec.request`), after its signature is checked.

    The framework's CN is longer than X.509's 64-character upper bound, which Go ignores and
    `cryptography` warns about on every access; that one warning is silenced here (briefly and
    only for this message: `catch_warnings` swaps a process-wide filter list).
    """
    der = request_der(request)
    problem = attributes_problem(request_attributes(der))
    if problem:
        raise RequestError(problem)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Attribute's length must be", category=UserWarning)
        try:
            csr = x509.load_der_x509_csr(der)
            signed = csr.is_signature_valid
            subject = csr.subject
            common_names = [str(a.value) for a in subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
            organizations = [str(a.value) for a in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
            others = [a.oid.dotted_string for a in subject if a.oid not in _KNOWN_SUBJECT]
            dns_names, other_extensions = _extensions(csr)
        except (ValueError, UnsupportedAlgorithm, x509.DuplicateExtension) as e:
            raise RequestError(f"spec.request is not a certificate request: {type(e).__name__}") from None
    if not signed:
        raise RequestError("spec.request's signature does not verify with its own public key")
    return RequestSubject(common_names, organizations, others, dns_names, other_extensions)


def _extensions(csr: x509.CertificateSigningRequest) -> tuple[list[str], list[str]]:
    """The DNS names it asks for, and everything else it asks for (see `RequestSubject`).

    The signer copies a request's subject alternative names into the certificate; other requested
    extensions are not the approver's to judge, so any is reported and refused by the caller.
    """
    dns_names: list[str] = []
    other: list[str] = []
    for extension in csr.extensions:
        if extension.oid != ExtensionOID.SUBJECT_ALTERNATIVE_NAME:
            other.append(extension.oid.dotted_string)
            continue
        assert isinstance(extension.value, x509.SubjectAlternativeName)
        for name in extension.value:
            if isinstance(name, x509.DNSName):
                dns_names.append(name.value)
            else:
                other.append(f"subjectAltName:{type(name).__name__}")
    return dns_names, other


# --- the request's attributes, read from the DER -------------------------------------------------
# The rule above needs every attribute as written, with its number of values.  `cryptography` gives
# its extensions from the one extension-request attribute it picks, and its `attributes` raises on an
# attribute whose values are not exactly one, so it cannot say what was there.  No ASN.1 library is a
# dependency, and a strict DER walk of the few levels involved is short: definite minimal lengths,
# low tag numbers, and nothing before, between or after the elements where the structure has none.

SEQUENCE = 0x30
SET = 0x31
INTEGER = 0x02
OBJECT_IDENTIFIER = 0x06
ATTRIBUTES = 0xA0
"""`[0] IMPLICIT SET OF Attribute`, the last field of CertificationRequestInfo (RFC 2986)."""


def _not_der(why: str) -> RequestError:
    return RequestError(f"spec.request is not a certificate request: {why}")


def _elements(data: bytes) -> list[tuple[int, bytes]]:
    """The (tag, content) of each DER element that `data` is made of, exactly and in order."""
    out: list[tuple[int, bytes]] = []
    at = 0
    while at < len(data):
        if len(data) - at < 2:
            raise _not_der("a DER element is truncated")
        tag, first = data[at], data[at + 1]
        if tag & 0x1F == 0x1F:
            raise _not_der("a DER tag uses the high-tag-number form")
        at += 2
        if first < 0x80:
            length = first
        else:
            count = first & 0x7F
            raw = data[at : at + count]
            # 0x80 is BER's indefinite length; a leading zero or a long form where the short one fits
            # is BER too.  Four length bytes are more than any request needs.
            if not 0 < count <= 4 or len(raw) < count or raw[0] == 0:
                raise _not_der("a DER length is not in minimal definite form")
            length = int.from_bytes(raw, "big")
            if length < 0x80:
                raise _not_der("a DER length is not in minimal definite form")
            at += count
        if length > len(data) - at:
            raise _not_der("a DER element is truncated")
        out.append((tag, data[at : at + length]))
        at += length
    return out


def _dotted(body: bytes) -> str:
    """The dotted form of an OBJECT IDENTIFIER's content, which must be minimal base-128."""
    arcs: list[int] = []
    value = 0
    fresh = True
    for byte in body:
        if fresh and byte == 0x80:
            raise _not_der("an OBJECT IDENTIFIER has a padded sub-identifier")
        value = value << 7 | byte & 0x7F
        fresh = not byte & 0x80
        if fresh:
            arcs.append(value)
            value = 0
    if not arcs or not fresh:
        raise _not_der("an OBJECT IDENTIFIER is empty or truncated")
    first = min(arcs[0] // 40, 2)
    return ".".join(str(a) for a in [first, arcs[0] - 40 * first, *arcs[1:]])


def request_attributes(der: bytes) -> list[tuple[str, int]]:
    """The (type OID, number of values) of each attribute of the request, in the order written.

    Only the path to the attributes is walked (CertificationRequest, then CertificationRequestInfo's
    version, subject, subjectPKInfo and attributes); `cryptography` parses the rest afterwards.
    """
    outer = _elements(der)
    if len(outer) != 1 or outer[0][0] != SEQUENCE:
        raise _not_der("it is not one DER SEQUENCE")
    request = _elements(outer[0][1])
    if not request or request[0][0] != SEQUENCE:
        raise _not_der("it has no CertificationRequestInfo")
    info = _elements(request[0][1])
    if [tag for tag, _ in info] != [INTEGER, SEQUENCE, SEQUENCE, ATTRIBUTES]:
        raise _not_der("its CertificationRequestInfo is not version, subject, key and attributes")
    attributes: list[tuple[str, int]] = []
    for tag, content in _elements(info[3][1]):
        fields = _elements(content) if tag == SEQUENCE else []
        if [t for t, _ in fields] != [OBJECT_IDENTIFIER, SET]:
            raise _not_der("an attribute is not a type and a SET of values")
        attributes.append((_dotted(fields[0][1]), len(_elements(fields[1][1]))))
    return attributes


def attributes_problem(attributes: list[tuple[str, int]]) -> str:
    """Why these attributes are not ones Go and `cryptography` read alike ("" when they are).

    Accepted: none, or exactly one extensionRequest of exactly one value (what the klusterlet's Go
    `x509.CreateCertificateRequest` writes).  The message names the attribute, since it is what the
    requester sees in the Event.
    """
    extension_requests = 0
    for type_oid, values in attributes:
        if type_oid == EXTENSION_REQUEST:
            extension_requests += 1
            if extension_requests > 1:
                return (
                    f"spec.request carries a second extensionRequest attribute ({EXTENSION_REQUEST}): "
                    "Kubernetes merges the extensions of every one and signs their subject alternative "
                    "names into the certificate, and the agent's request carries at most one"
                )
            if values != 1:
                return (
                    f"spec.request's extensionRequest attribute ({EXTENSION_REQUEST}) holds {values} "
                    "values: Kubernetes reads only the first and skips the attribute when it has none, "
                    "so the agent's request holds exactly one"
                )
        elif type_oid == MS_EXTENSION_REQUEST:
            return (
                f"spec.request carries attribute {MS_EXTENSION_REQUEST} (Microsoft's extension request): "
                "Kubernetes ignores it while other readers take it for the extension request, and the "
                "agent's request never carries it"
            )
        else:
            name = f" ({_ATTRIBUTE_NAMES[type_oid]})" if type_oid in _ATTRIBUTE_NAMES else ""
            return (
                f"spec.request carries attribute {type_oid}{name}, which the agent's request never "
                "carries (it may carry only one extensionRequest)"
            )
    return ""
