"""The lab's certificates and mutual TLS. One CA per lab (`jetfleet certs init`); certificates for
the controller, agents and operators (`jetfleet certs issue ROLE NAME`). A certificate's common
name is its identity (an agent's must equal the device id it registers with) and its
organisational unit its role."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path

from jetfleet.shared.bounds import check_id
from jetfleet.shared.errors import AlreadyExists, InvalidArgument, NotFound, PermissionDenied

ROLES = ("controller", "agent", "operator")
_DNS_NAME = re.compile(r"(?=.{1,253}\Z)[A-Za-z0-9]([A-Za-z0-9-]{0,62})(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}))*\.?\Z")
CA_NAME = "ca"


@dataclass(frozen=True)
class TlsFiles:
    """The paths of the lab CA and, where needed, a certificate and its key."""

    ca: Path
    cert: Path | None = None
    key: Path | None = None

    def read(self) -> tuple[bytes, bytes | None, bytes | None]:
        """The PEM bytes of (CA, certificate, key), None for those not given; NotFound if a file is missing."""
        for p in (self.ca, self.cert, self.key):
            if p is not None and not p.is_file():
                raise NotFound(f"TLS file {p} does not exist", field="tls")
        return (_pem(self.ca), _pem(self.cert) if self.cert else None, _pem(self.key) if self.key else None)


MAX_PEM_BYTES = 1 << 20   # a certificate chain or a key: kilobytes


def _pem(path: Path) -> bytes:
    from jetfleet.shared.files import read_bounded

    return read_bounded(str(path), "TLS file", MAX_PEM_BYTES, field="tls")


def _write(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to a new file beside ``path`` with ``mode``, then rename it over ``path``: the mode holds
    on every write (an old 0644 key does not stay 0644), and a crash leaves the old file or the new one."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)  # O_CREAT's mode is masked by the umask and ignored for an existing file
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def private_dir(directory: Path) -> None:
    """Create ``directory`` (and its parents) and make it 0700 whatever the umask: it holds private keys (the CA's
    among them), so no other user may list or open it, even where a key file's own mode were wrong."""
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)


def _write_private(path: Path, data: bytes) -> None:
    _write(path, data, 0o600)


def _write_public(path: Path, data: bytes) -> None:
    _write(path, data, 0o644)


def role_of(cert_path: Path) -> str:
    """The role (organisational unit) of an issued certificate file; '' for the CA or an unreadable file."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    except (OSError, ValueError):
        return ""
    ou = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)
    return str(ou[0].value) if ou else ""


def init_ca(directory: Path, name: str = "jetfleet lab CA", days: int = 3650, force: bool = False) -> Path:
    """Create the lab CA in ``directory`` (``ca.crt``, and ``ca.key`` written 0600); returns the certificate's path.

    AlreadyExists if there is one already, unless ``force``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    private_dir(directory)
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
    _write_public(crt, cert.public_bytes(serialization.Encoding.PEM))
    return crt


def issue(directory: Path, role: str, name: str, *, sans: list[str] | None = None, days: int = 825) -> tuple[Path, Path]:
    """Issue a certificate for ``role`` and ``name``, signed by the lab CA; returns (certificate path, key path).

    Its common name is ``name`` and its organisational unit the role; a controller's also covers
    localhost, 127.0.0.1 and ::1."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    if role not in ROLES:
        raise InvalidArgument(f"role {role[:32]!r}: expected one of {', '.join(ROLES)}", field="role")
    check_id(name, "NAME")
    if name == CA_NAME:
        raise InvalidArgument(f"NAME {name!r} is the lab CA's file name; choose another name", field="NAME")
    ca_crt, ca_key = directory / f"{CA_NAME}.crt", directory / f"{CA_NAME}.key"
    if not ca_crt.exists() or not ca_key.exists():
        raise NotFound(f"no CA in {directory}: run `jetfleet certs init --dir {directory}` first", field="dir")
    private_dir(directory)   # one made by an earlier release under a lax umask is closed here too
    existing = directory / f"{name}.crt"
    if existing.exists() and role_of(existing) != role:
        raise AlreadyExists(f"{existing} is a {role_of(existing) or 'foreign'} certificate; a {role} certificate "
                            f"cannot take the name {name!r}", field="NAME")
    ca = x509.load_pem_x509_certificate(ca_crt.read_bytes())
    ca_private = serialization.load_pem_private_key(ca_key.read_bytes(), None)
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = []
    for s in [name, *(sans or []), *(["localhost", "127.0.0.1", "::1"] if role == "controller" else [])]:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(s)))
        except ValueError:
            if not _DNS_NAME.match(s):
                raise InvalidArgument(f"--san {s[:64]!r} is neither an IP address nor a DNS name (ASCII letters, "
                                      "digits, '-' and '.', at most 253 characters)", field="san") from None
            names.append(x509.DNSName(s))
    # An agent may serve its metrics over HTTPS with its own certificate (give its address with --san).
    usage = {"controller": [ExtendedKeyUsageOID.SERVER_AUTH],
             "agent": [ExtendedKeyUsageOID.CLIENT_AUTH, ExtendedKeyUsageOID.SERVER_AUTH],
             "operator": [ExtendedKeyUsageOID.CLIENT_AUTH]}[role]
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
    _write_public(crt, cert.public_bytes(serialization.Encoding.PEM))
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
