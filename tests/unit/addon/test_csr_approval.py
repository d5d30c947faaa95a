from __future__ import annotations

import base64
import functools
import ipaddress
import warnings
from collections.abc import Callable

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from hypothesis import given
from hypothesis import strategies as st

from dynamic_scoring.addon.registration.csr_approval import Decision, approval_body, decide
from dynamic_scoring.addon.registration.csr_request import (
    NOT_CANONICAL,
    RequestError,
    canonical_pem,
    request_attributes,
    request_der,
)
from dynamic_scoring.kube.jsontypes import JSON
from e2e.csr_shapes import FORGING_SHAPES, agent_request, pem_block
from tests.csr_attributes import (
    CHALLENGE_PASSWORD,
    EXTENSION_REQUEST,
    HOSTILE_SAN,
    MS_EXTENSION_REQUEST,
    attribute,
    challenge_password,
    extension_request,
    extensions_value,
    request_with_attributes,
    tlv,
)

USER = "system:open-cluster-management:cluster:{c}:addon:{a}:agent:{a}"
GROUPS = ["system:open-cluster-management:cluster:{c}:addon:{a}", "system:open-cluster-management:addon:{a}"]


@functools.cache
def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def request_pem(cn: str | None, orgs: list[str]) -> str:
    # The framework's CN is longer than X.509's 64-character upper bound; Go does not care, and
    # neither does the klusterlet, so the test builds such requests too.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        names = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o, _validate=False) for o in orgs]
        if cn is not None:
            names.append(x509.NameAttribute(NameOID.COMMON_NAME, cn, _validate=False))
    csr = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(names)).sign(_key(), hashes.SHA256())
    return base64.b64encode(csr.public_bytes(serialization.Encoding.PEM)).decode()


def make_csr(
    cluster: str = "cluster1",
    addon: str = "dynamic-scoring",
    *,
    cn: str | None = None,
    orgs: list[str] | None = None,
    signer: str = "kubernetes.io/kube-apiserver-client",
    username: str | None = None,
    usages: list[str] | None = None,
    name: str | None = None,
    label_cluster: str | None = None,
    omit_cn: bool = False,
) -> JSON:
    return {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {
            "name": name or f"addon-{cluster}-{addon}-abcde",
            "labels": {
                "open-cluster-management.io/addon-name": addon,
                "open-cluster-management.io/cluster-name": label_cluster or cluster,
            },
        },
        "spec": {
            "signerName": signer,
            "request": request_pem(
                None if omit_cn else cn if cn is not None else USER.format(c=cluster, a=addon),
                orgs if orgs is not None else [g.format(c=cluster, a=addon) for g in GROUPS],
            ),
            "usages": usages
            if usages is not None
            else ["digital signature", "key encipherment", "client auth"],
            "username": username or f"system:open-cluster-management:{cluster}:agent-x",
            "groups": ["system:open-cluster-management:managed-clusters", "system:authenticated"],
        },
    }


def cluster(name: str = "cluster1") -> JSON:
    return {"metadata": {"name": name}}


def mca(name: str = "cluster1") -> JSON:
    return {"metadata": {"name": "dynamic-scoring", "namespace": name}}


def test_the_klusterlets_request_is_approved() -> None:
    d = decide(make_csr(), cluster=cluster(), addon=mca())
    assert d.approve, d.reason


def test_three_orgs_including_system_authenticated_are_accepted() -> None:
    orgs = [g.format(c="cluster1", a="dynamic-scoring") for g in GROUPS] + ["system:authenticated"]
    assert decide(make_csr(orgs=orgs), cluster=cluster(), addon=mca()).approve


OWN_GROUPS = [g.format(c="cluster1", a="dynamic-scoring") for g in GROUPS]


@pytest.mark.parametrize(
    "extra",
    [
        "system:open-cluster-management:cluster2",  # cluster2's klusterlet
        "system:open-cluster-management:cluster:cluster2:addon:dynamic-scoring",  # cluster2's agent
        "system:open-cluster-management:managed-clusters",
        "system:cluster-admins",  # cluster-admin on OpenShift-based hubs
        "system:masters",
        "",
    ],
)
def test_any_organization_beyond_the_agents_groups_is_refused(extra: str) -> None:
    """Each Organization is a group of the issued certificate: a third one is a stolen identity."""
    for orgs in ([*OWN_GROUPS, extra], [extra, *OWN_GROUPS], [*OWN_GROUPS, "system:authenticated", extra]):
        d = decide(make_csr(orgs=orgs), cluster=cluster(), addon=mca())
        assert not d.approve
        assert repr(extra) in d.reason and "not a group of this agent" in d.reason


def test_one_own_group_swapped_for_another_is_refused() -> None:
    orgs = [OWN_GROUPS[0], "system:open-cluster-management:cluster:cluster2:addon:dynamic-scoring"]
    d = decide(make_csr(orgs=orgs), cluster=cluster(), addon=mca())
    assert not d.approve and "not a group of this agent" in d.reason


def test_repeated_organizations_are_refused() -> None:
    d = decide(make_csr(orgs=[*OWN_GROUPS, OWN_GROUPS[0]]), cluster=cluster(), addon=mca())
    assert not d.approve and "repeat" in d.reason


def test_grpc_requester_is_taken_from_the_annotation() -> None:
    csr = make_csr(username="system:serviceaccount:open-cluster-management-hub:grpc-server-sa")
    assert not decide(csr, cluster=cluster(), addon=mca()).approve
    csr["metadata"]["annotations"] = {
        "open-cluster-management.io/csr-user": "system:open-cluster-management:cluster1:a"
    }
    assert decide(csr, cluster=cluster(), addon=mca()).approve


@pytest.mark.parametrize(
    ("csr", "why"),
    [
        (make_csr(addon="other-addon"), "not an addon CSR of this addon"),
        (make_csr(name="cluster1-csr"), "not an addon CSR"),
        (make_csr(signer="example.com/custom"), "signer"),
        (make_csr(signer="kubernetes.io/kubelet-serving"), "signer"),
        (
            make_csr(orgs=["system:open-cluster-management:cluster:cluster1:addon:dynamic-scoring", "wrong"]),
            "'wrong', which is not a group of this agent",
        ),
        (
            make_csr(orgs=["system:open-cluster-management:cluster:cluster1:addon:dynamic-scoring"]),
            "lack system:open-cluster-management:addon:dynamic-scoring",
        ),
        (make_csr(orgs=[]), "lack"),
        (make_csr(cn="system:open-cluster-management:cluster:cluster1:addon:dynamic-scoring:agent:x"), "CN"),
        (make_csr(omit_cn=True), "CN"),
        (make_csr(username="system:open-cluster-management:cluster2:agent"), "requester"),
        (make_csr(username="system:serviceaccount:default:someone"), "requester"),
        (
            make_csr(cluster="cluster1", username="system:open-cluster-management:cluster10:agent"),
            "requester",
        ),
        (make_csr(usages=["digital signature", "key encipherment", "server auth"]), "usages"),
        (make_csr(usages=["digital signature", "client auth", "server auth"]), "usages"),
    ],
)
def test_rejections(csr: JSON, why: str) -> None:
    d = decide(csr, cluster=cluster(), addon=mca())
    assert not d.approve
    assert why in d.reason


def test_subject_for_another_cluster_than_the_label_is_rejected() -> None:
    # A cluster2 identity requested under cluster1's label (and by cluster1's klusterlet).
    csr = make_csr(
        cluster="cluster1",
        cn=USER.format(c="cluster2", a="dynamic-scoring"),
        orgs=[g.format(c="cluster2", a="dynamic-scoring") for g in GROUPS],
    )
    d = decide(csr, cluster=cluster(), addon=mca())
    assert not d.approve and "CN" in d.reason


def test_cluster_name_label_must_name_an_existing_cluster_with_the_addon() -> None:
    assert "does not exist" in decide(make_csr(), cluster=None, addon=mca()).reason
    assert "does not exist" in decide(make_csr(), cluster=cluster("cluster2"), addon=mca()).reason
    assert "not enabled" in decide(make_csr(), cluster=cluster(), addon=None).reason
    csr = make_csr()
    del csr["metadata"]["labels"]["open-cluster-management.io/cluster-name"]
    assert not decide(csr, cluster=cluster(), addon=mca()).approve


def test_decided_csrs_are_left_alone() -> None:
    for kind in ("Approved", "Denied"):
        csr = make_csr()
        csr["status"] = {"conditions": [{"type": kind, "status": "True"}]}
        assert decide(csr, cluster=cluster(), addon=mca()).reason == "already approved or denied"


def test_garbage_request_is_rejected() -> None:
    csr = make_csr()
    csr["spec"]["request"] = base64.b64encode(b"-----BEGIN NOTHING-----").decode()
    assert "PEM" in decide(csr, cluster=cluster(), addon=mca()).reason


def test_approval_body_appends_the_frameworks_condition() -> None:
    csr = make_csr()
    body = approval_body(csr)
    assert body["status"]["conditions"] == [
        {
            "type": "Approved",
            "status": "True",
            "reason": "AutoApprovedByHubCSRApprovingController",
            "message": "Auto approving addon agent certificate.",
        }
    ]
    assert "status" not in csr  # the input is not modified


def _with_subject(rdns: list[list[x509.NameAttribute[str]]]) -> JSON:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        name = x509.Name([x509.RelativeDistinguishedName(attrs) for attrs in rdns])
    csr = x509.CertificateSigningRequestBuilder().subject_name(name).sign(_key(), hashes.SHA256())
    request = make_csr()
    request["spec"]["request"] = base64.b64encode(csr.public_bytes(serialization.Encoding.PEM)).decode()
    return request


def _attr(oid: x509.ObjectIdentifier, value: str) -> x509.NameAttribute[str]:
    with warnings.catch_warnings():  # the framework's CN is longer than 64 characters
        warnings.simplefilter("ignore", UserWarning)
        return x509.NameAttribute(oid, value, _validate=False)


def _own(c: str = "cluster1", a: str = "dynamic-scoring") -> list[list[x509.NameAttribute[str]]]:
    return [[_attr(NameOID.ORGANIZATION_NAME, g.format(c=c, a=a))] for g in GROUPS] + [
        [_attr(NameOID.COMMON_NAME, USER.format(c=c, a=a))]
    ]


KUBE_UID = x509.ObjectIdentifier("1.3.6.1.4.1.57683.2")  # the apiserver's user UID since 1.34


def test_a_subject_uid_or_any_other_unmapped_attribute_is_refused() -> None:
    """Kubernetes 1.34 turns 1.3.6.1.4.1.57683.2 into the user's UID: an identity the approver never saw."""
    for extra in (_attr(KUBE_UID, "0b1c8d"), _attr(NameOID.SERIAL_NUMBER, "1"), _attr(NameOID.USER_ID, "x")):
        decision = decide(_with_subject([*_own(), [extra]]), cluster=cluster(), addon=mca())
        assert not decision.approve and extra.oid.dotted_string in decision.reason


def test_organization_units_are_accepted_as_the_klusterlet_may_send_them() -> None:
    decision = decide(
        _with_subject([*_own(), [_attr(NameOID.ORGANIZATIONAL_UNIT_NAME, "team")]]),
        cluster=cluster(),
        addon=mca(),
    )
    assert decision.approve, decision.reason


def test_attributes_hidden_in_a_multi_valued_rdn_count() -> None:
    own = _own()
    hidden = [own[0][0], _attr(NameOID.ORGANIZATION_NAME, "system:masters")]
    decision = decide(_with_subject([hidden, *own[1:]]), cluster=cluster(), addon=mca())
    assert not decision.approve and "system:masters" in decision.reason
    second_cn = [own[2][0], _attr(NameOID.COMMON_NAME, "system:admin")]
    decision = decide(_with_subject([*own[:2], second_cn]), cluster=cluster(), addon=mca())
    assert not decision.approve and "CN" in decision.reason
    together = [[own[0][0], own[1][0], own[2][0]]]  # one RDN holding all three: same identity
    assert decide(_with_subject(together), cluster=cluster(), addon=mca()).approve


def test_an_addon_agent_is_not_the_klusterlet_of_a_cluster_named_cluster() -> None:
    """``system:open-cluster-management:cluster:`` starts every addon agent's user name, on any cluster."""
    other_addon_agent = "system:open-cluster-management:cluster:cluster2:addon:other:agent:other"
    csr = make_csr(cluster="cluster", username=other_addon_agent)
    decision = decide(csr, cluster=cluster("cluster"), addon=mca("cluster"))
    assert not decision.approve and "requester" in decision.reason
    own = make_csr(cluster="cluster", username="system:open-cluster-management:cluster:agent-x")
    assert decide(own, cluster=cluster("cluster"), addon=mca("cluster")).approve
    empty = make_csr(cluster="cluster1", username="system:open-cluster-management:cluster1:")
    assert not decide(empty, cluster=cluster(), addon=mca()).approve


# --- spec.request is read the way Kubernetes reads it -------------------------------------------
# Go's encoding/pem.Decode skips a block it finds malformed and takes the next; a lenient reader
# takes the first.  Only one canonical block and nothing else is read the same by both.

OWN_USER = USER.format(c="cluster1", a="dynamic-scoring")
STOLEN = "system:open-cluster-management:cluster2"


def _with_request(text: bytes) -> JSON:
    csr = make_csr()
    csr["spec"]["request"] = base64.b64encode(text).decode()
    return csr


def _decide_text(text: bytes) -> Decision:
    return decide(_with_request(text), cluster=cluster(), addon=mca())


@functools.cache
def _honest_and_forged() -> tuple[bytes, bytes]:
    return agent_request(OWN_USER, OWN_GROUPS, _key()), agent_request(OWN_USER, [*OWN_GROUPS, STOLEN], _key())


def test_the_canonical_block_is_approved_with_or_without_its_final_newline() -> None:
    honest, _ = _honest_and_forged()
    assert _decide_text(pem_block(honest)).approve
    assert _decide_text(pem_block(honest).rstrip(b"\n")).approve


@pytest.mark.parametrize("shape", list(FORGING_SHAPES))
def test_two_blocks_are_refused_however_they_are_framed(shape: str) -> None:
    """The first two shapes got cluster1's klusterlet a certificate in cluster2's group."""
    honest, forged = _honest_and_forged()
    decision = _decide_text(FORGING_SHAPES[shape](pem_block(honest), pem_block(forged)))
    assert not decision.approve and decision.reason == NOT_CANONICAL


@pytest.mark.parametrize(
    "framing",
    [
        pytest.param(lambda der: pem_block(der, kind="CERTIFICATE"), id="CERTIFICATE block"),
        pytest.param(
            lambda der: pem_block(der, kind="NEW CERTIFICATE REQUEST"), id="NEW CERTIFICATE REQUEST"
        ),
        pytest.param(lambda der: pem_block(der, headers={"Proc-Type": "4,ENCRYPTED"}), id="headers"),
        pytest.param(lambda der: pem_block(der, headers={"X": "y"}), id="any header"),
        pytest.param(lambda der: pem_block(der, eol=b"\r\n"), id="CRLF"),
        pytest.param(lambda der: pem_block(der, line=76), id="76-character lines"),
        pytest.param(lambda der: b"text\n" + pem_block(der), id="text before"),
        pytest.param(lambda der: b"\n" + pem_block(der), id="newline before"),
        pytest.param(lambda der: pem_block(der) + b"\n", id="blank line after"),
        pytest.param(lambda der: pem_block(der) + b"text", id="text after"),
        pytest.param(lambda der: pem_block(der).replace(b"-----\n", b"----- \n"), id="space after END"),
        pytest.param(lambda der: pem_block(der).replace(b"\n", b"\n ", 2), id="space in base64"),
        pytest.param(lambda der: pem_block(der).replace(b"\n", b"\n=", 2), id="padding inside"),
        pytest.param(lambda der: pem_block(der + b"\0"), id="trailing DER byte"),
        pytest.param(lambda der: pem_block(b""), id="empty block"),
        pytest.param(lambda der: b"", id="empty"),
    ],
)
def test_anything_but_one_canonical_block_is_refused(framing: Callable[[bytes], bytes]) -> None:
    honest, _ = _honest_and_forged()
    decision = _decide_text(framing(honest))
    assert not decision.approve
    assert "spec.request" in decision.reason


def test_a_request_whose_signature_does_not_verify_is_refused() -> None:
    honest, _ = _honest_and_forged()
    tampered = honest[:-1] + bytes([honest[-1] ^ 1])  # the last byte of the signature
    decision = _decide_text(pem_block(tampered))
    assert not decision.approve and "signature" in decision.reason


def test_a_request_field_that_is_not_base64_is_refused() -> None:
    csr = make_csr()
    csr["spec"]["request"] = "not base64!"
    assert decide(csr, cluster=cluster(), addon=mca()).reason == "spec.request is not base64"


@given(st.binary(max_size=600))
def test_the_canonical_text_of_any_der_reads_back_as_that_der(der: bytes) -> None:
    assert request_der(canonical_pem(der)) == der
    assert request_der(canonical_pem(der).rstrip(b"\n")) == der


KLUSTERLET_SAN = x509.SubjectAlternativeName(
    [x509.DNSName("dynamic-scoring.addon.open-cluster-management.io")]
)


def test_the_klusterlets_subject_alternative_name_is_accepted() -> None:
    """The klusterlet asks for `<addon>.addon.open-cluster-management.io` in every addon's request."""
    request = agent_request(OWN_USER, OWN_GROUPS, _key(), extensions=[KLUSTERLET_SAN])
    decision = _decide_text(pem_block(request))
    assert decision.approve, decision.reason


@pytest.mark.parametrize(
    ("extension", "why"),
    [
        (x509.SubjectAlternativeName([x509.DNSName("hub.example.com")]), "DNS names other than"),
        (
            x509.SubjectAlternativeName(
                [x509.DNSName("dynamic-scoring.addon.open-cluster-management.io"), x509.DNSName("*")]
            ),
            "DNS names other than",
        ),
        (x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("10.0.0.1"))]), "IPAddress"),
        (x509.SubjectAlternativeName([x509.UniformResourceIdentifier("spiffe://x")]), "Uniform"),
        (x509.SubjectAlternativeName([x509.RFC822Name("a@example.com")]), "RFC822Name"),
        (x509.BasicConstraints(ca=True, path_length=None), "2.5.29.19"),
        (x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), "2.5.29.37"),
    ],
)
def test_anything_else_the_request_asks_to_have_in_the_certificate_is_refused(
    extension: x509.ExtensionType, why: str
) -> None:
    decision = _decide_text(pem_block(agent_request(OWN_USER, OWN_GROUPS, _key(), extensions=[extension])))
    assert not decision.approve and why in decision.reason


# --- the request's attributes are read the way Go reads them ---------------------------------
# Go's x509.ParseCertificateRequest merges the extensions of EVERY extensionRequest attribute, and
# the signer copies the SANs it finds into the certificate; `cryptography` reads only the first
# extension-request attribute (and takes Microsoft's OID for one).  So only no attribute, or one
# standard extensionRequest of one value, is read the same by both.


def _decide_attributes(attributes: list[bytes]) -> Decision:
    return _decide_text(pem_block(request_with_attributes(OWN_USER, OWN_GROUPS, attributes, _key())))


def test_no_attribute_or_one_extension_request_is_approved() -> None:
    """The klusterlet's request: no attribute, or one extensionRequest with its DNS name."""
    assert _decide_attributes([]).approve
    decision = _decide_attributes([extension_request(KLUSTERLET_SAN)])
    assert decision.approve, decision.reason


@pytest.mark.parametrize(
    ("attributes", "why"),
    [
        pytest.param(
            # What Go signs: it merges both (no extension twice), and the signer copies the names.
            [extension_request(), extension_request(HOSTILE_SAN)],
            f"a second extensionRequest attribute ({EXTENSION_REQUEST})",
            id="empty extensionRequest, then one with URI, IP and DNS names",
        ),
        pytest.param(
            # Go refuses this one (subjectAltName twice), so the apiserver would not admit it.
            [extension_request(KLUSTERLET_SAN), extension_request(HOSTILE_SAN)],
            f"a second extensionRequest attribute ({EXTENSION_REQUEST})",
            id="second extensionRequest with URI, IP and DNS names",
        ),
        pytest.param(
            [
                extension_request(KLUSTERLET_SAN),
                extension_request(x509.BasicConstraints(ca=True, path_length=None)),
            ],
            "a second extensionRequest attribute",
            id="second extensionRequest with another extension",
        ),
        pytest.param(
            [extension_request(KLUSTERLET_SAN), extension_request()],
            "a second extensionRequest attribute",
            id="second, empty extensionRequest",
        ),
        pytest.param(
            [
                extension_request(KLUSTERLET_SAN, type_oid=MS_EXTENSION_REQUEST),
                extension_request(HOSTILE_SAN),
            ],
            f"attribute {MS_EXTENSION_REQUEST} (Microsoft's extension request)",
            id="Microsoft extension request, then a standard one",
        ),
        pytest.param(
            [extension_request(KLUSTERLET_SAN, type_oid=MS_EXTENSION_REQUEST)],
            f"attribute {MS_EXTENSION_REQUEST} (Microsoft's extension request)",
            id="Microsoft extension request alone",
        ),
        pytest.param(
            [extension_request(KLUSTERLET_SAN), challenge_password()],
            f"attribute {CHALLENGE_PASSWORD} (challengePassword)",
            id="challengePassword after the extensionRequest",
        ),
        pytest.param(
            [challenge_password()],
            f"attribute {CHALLENGE_PASSWORD} (challengePassword)",
            id="challengePassword alone",
        ),
        pytest.param([attribute("1.2.3.4", tlv(0x0C, b"x"))], "attribute 1.2.3.4", id="an unknown attribute"),
    ],
)
def test_attributes_go_and_the_approver_could_read_differently_are_refused(
    attributes: list[bytes], why: str
) -> None:
    decision = _decide_attributes(attributes)
    assert not decision.approve
    assert why in decision.reason, decision.reason


def test_an_extension_request_of_several_values_or_none_is_refused() -> None:
    """Go reads only an attribute's first value, and skips an attribute with none."""
    two = attribute(EXTENSION_REQUEST, extensions_value(KLUSTERLET_SAN), extensions_value(HOSTILE_SAN))
    decision = _decide_attributes([two])
    assert not decision.approve and "holds 2 values" in decision.reason, decision.reason
    decision = _decide_attributes([attribute(EXTENSION_REQUEST)])
    assert not decision.approve and "holds 0 values" in decision.reason, decision.reason


def test_attributes_that_are_not_der_are_refused() -> None:
    """A length in long form where the short one fits: BER, which Go's reader may take differently."""
    honest = extension_request(KLUSTERLET_SAN)
    ber = bytes([0x30, 0x81, honest[1]]) + honest[2:]
    decision = _decide_attributes([ber])
    assert not decision.approve and "spec.request" in decision.reason, decision.reason


def test_the_refusal_names_the_attribute_for_the_event() -> None:
    decision = _decide_attributes([extension_request(KLUSTERLET_SAN), extension_request(HOSTILE_SAN)])
    assert decision.reason.startswith("spec.request carries a second extensionRequest attribute")
    assert "Kubernetes" in decision.reason


_OIDS = st.builds(
    lambda first, second, rest: ".".join(str(a) for a in [first, second if first < 2 else second * 7, *rest]),
    st.integers(0, 2),
    st.integers(0, 39),
    st.lists(st.integers(0, 2**40), min_size=1, max_size=6),
)


@given(_OIDS, st.text(min_size=1, max_size=40))
def test_the_attribute_walk_reads_what_cryptography_wrote(type_oid: str, value: str) -> None:
    """The walk and `cryptography`'s writer agree on any attribute type OID (arcs up to 2**40)."""
    csr = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "x")]))
        .add_attribute(x509.ObjectIdentifier(type_oid), value.encode())
        .sign(_key(), hashes.SHA256())
    )
    assert request_attributes(csr.public_bytes(serialization.Encoding.DER)) == [(type_oid, 1)]


@given(st.binary(max_size=300))
def test_the_attribute_walk_raises_only_request_errors(data: bytes) -> None:
    try:
        request_attributes(data)
    except RequestError as e:
        assert str(e).startswith("spec.request is not a certificate request: ")


@given(st.integers(0, 2**32 - 1))
def test_every_truncation_of_a_request_is_refused_as_not_der(cut: int) -> None:
    honest = request_with_attributes(OWN_USER, OWN_GROUPS, [extension_request(KLUSTERLET_SAN)], _key())
    assert request_attributes(honest) == [(EXTENSION_REQUEST, 1)]
    with pytest.raises(RequestError):
        request_attributes(honest[: cut % len(honest)])
