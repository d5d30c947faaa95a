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

Then the DER is parsed on its own and its self-signature checked, as the apiserver does.
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
