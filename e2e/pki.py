"""Test PKI for the local clusters: one CA per cluster, serving and client certificates, kubeconfigs.

Each cluster gets its own CA on purpose: a client certificate issued for the hub must not be
accepted by a managed cluster's apiserver, or tests could not notice an agent that talks to the
wrong cluster.  The CA also signs what kube-controller-manager issues from CSRs, so the
apiserver's `--client-ca-file` trusts the identities OCM registers.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import secrets
import warnings
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=3650)


def _pem_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass(frozen=True)
class Issued:
    """A certificate and its key as PEM, plus where they were written."""

    cert_pem: bytes
    key_pem: bytes
    cert_path: Path
    key_path: Path


class CertificateAuthority:
    """A self-signed CA stored as `ca.crt`/`ca.key` in a directory; reloaded if it exists."""

    def __init__(self, directory: Path, common_name: str) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.cert_path = directory / "ca.crt"
        self.key_path = directory / "ca.key"
        if self.cert_path.exists() and self.key_path.exists():
            loaded = serialization.load_pem_private_key(self.key_path.read_bytes(), None)
            assert isinstance(loaded, ec.EllipticCurvePrivateKey)
            self._key = loaded
            self.cert = x509.load_pem_x509_certificate(self.cert_path.read_bytes())
            return
        self._key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        now = dt.datetime.now(dt.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        self.cert_path.write_bytes(_pem_cert(self.cert))
        self.key_path.write_bytes(_pem_key(self._key))
        self.key_path.chmod(0o600)

    @property
    def cert_pem(self) -> bytes:
        """The CA certificate as PEM."""
        return _pem_cert(self.cert)

    def issue(
        self,
        name: str,
        *,
        common_name: str,
        organizations: tuple[str, ...] = (),
        server_hosts: tuple[str, ...] = (),
        client: bool = False,
    ) -> Issued:
        """Issue `<name>.crt`/`<name>.key` in the CA directory (reused if present)."""
        cert_path, key_path = self.dir / f"{name}.crt", self.dir / f"{name}.key"
        if cert_path.exists() and key_path.exists():
            return Issued(cert_path.read_bytes(), key_path.read_bytes(), cert_path, key_path)
        key = ec.generate_private_key(ec.SECP256R1())
        # Kubernetes identities (e.g. OCM addon agents) exceed X.509's suggested 64-character limit,
        # and Go's x509 accepts them, so the limit is not enforced here either.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name, _validate=False)]
            attrs += [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, o, _validate=False) for o in organizations
            ]
        usages = []
        if server_hosts:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        if client:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        now = dt.datetime.now(dt.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attrs))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        )
        if server_hosts:
            sans: list[x509.GeneralName] = []
            for host in server_hosts:
                try:
                    sans.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    sans.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        cert_path.write_bytes(_pem_cert(cert))
        key_path.write_bytes(_pem_key(key))
        key_path.chmod(0o600)
        return Issued(_pem_cert(cert), _pem_key(key), cert_path, key_path)


def service_account_keys(directory: Path) -> tuple[Path, Path]:
    """RSA key pair for service-account token signing: (`sa.key`, `sa.pub`)."""
    priv, pub = directory / "sa.key", directory / "sa.pub"
    if not (priv.exists() and pub.exists()):
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        priv.write_bytes(_pem_key(key))
        priv.chmod(0o600)
        pub.write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
    return priv, pub


def random_token() -> str:
    """A static bearer token for `--token-auth-file`."""
    return secrets.token_hex(16)


def bootstrap_token() -> tuple[str, str]:
    """A bootstrap-token-shaped (id, secret) pair: `[a-z0-9]{6}.[a-z0-9]{16}`."""
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    return (
        "".join(secrets.choice(alphabet) for _ in range(6)),
        "".join(secrets.choice(alphabet) for _ in range(16)),
    )


def write_kubeconfig(
    path: Path,
    *,
    server: str,
    ca_pem: bytes,
    user: str,
    token: str | None = None,
    client: Issued | None = None,
    cluster: str = "cluster",
    namespace: str | None = None,
) -> Path:
    """Write a one-context kubeconfig authenticating by token or client certificate."""
    creds: dict[str, str] = {}
    if token is not None:
        creds["token"] = token
    if client is not None:
        creds["client-certificate-data"] = base64.b64encode(client.cert_pem).decode()
        creds["client-key-data"] = base64.b64encode(client.key_pem).decode()
    context: dict[str, str] = {"cluster": cluster, "user": user}
    if namespace:
        context["namespace"] = namespace
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster,
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                },
            }
        ],
        "users": [{"name": user, "user": creds}],
        "contexts": [{"name": cluster, "context": context}],
        "current-context": cluster,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
    return path
