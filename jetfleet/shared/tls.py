"""The lab's certificates and mutual TLS. One CA per lab (`jetfleet certs init`); certificates for
the controller, agents and operators (`jetfleet certs issue ROLE NAME`). A certificate's common
name is its identity (an agent's must equal the device id it registers with) and its
organisational unit its role."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from jetfleet.shared.errors import AlreadyExists, InvalidArgument, NotFound, PermissionDenied

ROLES = ("controller", "agent", "operator")
CA_NAME = "ca"


@dataclass(frozen=True)
class TlsFiles:
    ca: Path
    cert: Path | None = None
    key: Path | None = None

    def read(self) -> tuple[bytes, bytes | None, bytes | None]:
        for p in (self.ca, self.cert, self.key):
            if p is not None and not p.is_file():
                raise NotFound(f"TLS file {p} does not exist", field="tls")
        return (self.ca.read_bytes(), self.cert.read_bytes() if self.cert else None,
                self.key.read_bytes() if self.key else None)


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def init_ca(directory: Path, name: str = "jetfleet lab CA", days: int = 3650, force: bool = False) -> Path:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    directory.mkdir(parents=True, exist_ok=True)
    crt, key_path = directory / f"{CA_NAME}.crt", directory / f"{CA_NAME}.key"
    if crt.exists() and not force:
        raise AlreadyExists(f"{crt} exists; a new CA would invalidate every certificate (use --force)", field="dir")
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    _write_private(key_path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return crt


def issue(directory: Path, role: str, name: str, *, sans: list[str] | None = None, days: int = 825) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    if role not in ROLES:
        raise InvalidArgument(f"role {role!r}: expected one of {', '.join(ROLES)}", field="role")
    if not name or len(name) > 64 or any(c.isspace() or c in "/\\" for c in name):
        raise InvalidArgument("NAME must be 1..64 characters without spaces or slashes", field="name")
    ca_crt, ca_key = directory / f"{CA_NAME}.crt", directory / f"{CA_NAME}.key"
    if not ca_crt.exists() or not ca_key.exists():
        raise NotFound(f"no CA in {directory}: run `jetfleet certs init --dir {directory}` first", field="dir")
    ca = x509.load_pem_x509_certificate(ca_crt.read_bytes())
    ca_private = serialization.load_pem_private_key(ca_key.read_bytes(), None)
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for s in [name, *(sans or []), *(["localhost", "127.0.0.1", "::1"] if role == "controller" else [])]:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(s)))
        except ValueError:
            names.append(x509.DNSName(s))
    usage = [ExtendedKeyUsageOID.SERVER_AUTH] if role == "controller" else [ExtendedKeyUsageOID.CLIENT_AUTH]
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name),
                                     x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, role)]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(list(dict.fromkeys(names))), critical=False)
            .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_private, hashes.SHA256()))  # type: ignore[arg-type]
    crt, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    _write_private(key_path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return crt, key_path


def peer_identity(pem: bytes) -> tuple[str, str]:
    """(common name, role) of a peer certificate."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    cert = x509.load_pem_x509_certificate(pem)
    cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    ou = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)
    return (str(cn[0].value) if cn else "", str(ou[0].value) if ou else "")


def require(identity: tuple[str, str] | None, role: str, name: str | None = None) -> None:
    """Raise PermissionDenied unless the peer has ``role`` (and ``name``, when given)."""
    if identity is None:
        return  # plaintext (loopback or --insecure): nothing to check
    cn, ou = identity
    if ou != role:
        raise PermissionDenied(f"certificate {cn!r} has role {ou or 'none'!r}; this needs {role!r}", field="certificate")
    if name is not None and cn != name:
        raise PermissionDenied(f"certificate is for {cn!r} but the agent claims device id {name!r}",
                               field="device_id")
