"""A throwaway PKI for one test-bed run: a CA, one loopback serving certificate, an admin
client certificate in system:masters, a front-proxy client certificate (aggregation layer),
the service-account signing key pair, and the node's kubelet certificates (a client one in
system:nodes, for the Node authorizer, and a serving one for its node address).

EC P-256 keys: generated in milliseconds, and accepted by Kubernetes, Go's TLS, OpenSSL and
Python's ssl module alike.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Names a client may use for the API server. 10.0.0.1 is the first address of the service
# range (the in-cluster `kubernetes` Service); no traffic ever goes there.
SERVING_DNS = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
SERVING_IPS = ("127.0.0.1", "10.0.0.1", "10.244.0.1")  # the last: the node's relay
VALIDITY = dt.timedelta(days=30)
FRONT_PROXY_CN = "front-proxy-client"
NODE_NAME = "testbed-node"
# The node's address: the gateway of the pod bridge the test-bed creates (see node/host.py).
NODE_IP = "10.244.0.1"


@dataclass(frozen=True)
class Pki:
    """Paths of the PEM files of one run."""

    dir: Path

    @property
    def ca_cert(self) -> Path:
        return self.dir / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.dir / "ca.key"

    @property
    def serving_cert(self) -> Path:
        return self.dir / "serving.crt"

    @property
    def serving_key(self) -> Path:
        return self.dir / "serving.key"

    @property
    def admin_cert(self) -> Path:
        return self.dir / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.dir / "admin.key"

    @property
    def front_proxy_cert(self) -> Path:
        return self.dir / "front-proxy-client.crt"

    @property
    def front_proxy_key(self) -> Path:
        return self.dir / "front-proxy-client.key"

    @property
    def sa_key(self) -> Path:
        return self.dir / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.dir / "sa.pub"

    @property
    def kubelet_client_cert(self) -> Path:
        return self.dir / "kubelet-client.crt"

    @property
    def kubelet_client_key(self) -> Path:
        return self.dir / "kubelet-client.key"

    @property
    def kubelet_serving_cert(self) -> Path:
        return self.dir / "kubelet-serving.crt"

    @property
    def kubelet_serving_key(self) -> Path:
        return self.dir / "kubelet-serving.key"


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey
) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))  # tolerate small clock skew
        .not_valid_after(now + VALIDITY)
    )


def _leaf(
    ca: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    subject: x509.Name,
    usage: x509.ObjectIdentifier,
    san: x509.SubjectAlternativeName | None = None,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    b = (
        _builder(subject, ca.subject, key)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_encipherment=False,
                content_commitment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if san is not None:
        b = b.add_extension(san, critical=False)
    return b.sign(ca_key, hashes.SHA256()), key


def generate(directory: Path) -> Pki:
    """Write a fresh PKI into `directory` (created if needed) and return its paths."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(directory)
    pem = serialization.Encoding.PEM

    ca_key = _key()
    ca_name = _name("cowork-gym-testbed-ca")
    ca = (
        _builder(ca_name, ca_name, ca_key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_encipherment=False,
                content_commitment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pki.ca_cert.write_bytes(ca.public_bytes(pem))
    _write_key(pki.ca_key, ca_key)

    san = x509.SubjectAlternativeName(
        [x509.DNSName(n) for n in SERVING_DNS]
        + [x509.IPAddress(ipaddress.ip_address(ip)) for ip in SERVING_IPS]
    )
    serving, serving_key = _leaf(
        ca, ca_key, _name("cowork-gym-testbed"), ExtendedKeyUsageOID.SERVER_AUTH, san
    )
    pki.serving_cert.write_bytes(serving.public_bytes(pem))
    _write_key(pki.serving_key, serving_key)

    admin, admin_key = _leaf(
        ca, ca_key, _name("admin", "system:masters"), ExtendedKeyUsageOID.CLIENT_AUTH
    )
    pki.admin_cert.write_bytes(admin.public_bytes(pem))
    _write_key(pki.admin_key, admin_key)

    # The API server's identity towards aggregated API servers (the front proxy).
    fp, fp_key = _leaf(ca, ca_key, _name(FRONT_PROXY_CN), ExtendedKeyUsageOID.CLIENT_AUTH)
    pki.front_proxy_cert.write_bytes(fp.public_bytes(pem))
    _write_key(pki.front_proxy_key, fp_key)

    # The kubelet: a system:nodes identity (so the Node authorizer limits it to its own node's
    # objects), and a serving certificate the API server verifies when it calls the kubelet.
    node, node_key = _leaf(
        ca,
        ca_key,
        _name(f"system:node:{NODE_NAME}", "system:nodes"),
        ExtendedKeyUsageOID.CLIENT_AUTH,
    )
    pki.kubelet_client_cert.write_bytes(node.public_bytes(pem))
    _write_key(pki.kubelet_client_key, node_key)
    node_san = x509.SubjectAlternativeName(
        [x509.DNSName(NODE_NAME), x509.IPAddress(ipaddress.ip_address(NODE_IP))]
    )
    kserve, kserve_key = _leaf(
        ca, ca_key, _name(NODE_NAME), ExtendedKeyUsageOID.SERVER_AUTH, node_san
    )
    pki.kubelet_serving_cert.write_bytes(kserve.public_bytes(pem))
    _write_key(pki.kubelet_serving_key, kserve_key)

    sa_key = _key()
    _write_key(pki.sa_key, sa_key)
    pki.sa_pub.write_bytes(
        sa_key.public_key().public_bytes(pem, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return pki
