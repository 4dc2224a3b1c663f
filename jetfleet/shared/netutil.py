"""Addresses and client credentials, shared by the agent, the CLI client and the controller."""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

import grpc

from jetfleet.shared.errors import InvalidArgument
from jetfleet.shared.tls import TlsFiles


def is_loopback(host: str) -> bool:
    """True if ``host`` is localhost, a loopback address, or a name that resolves only to loopback addresses."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        try:
            return all(ipaddress.ip_address(a[4][0]).is_loopback for a in socket.getaddrinfo(host, None))
        except OSError:
            return False


def channel_credentials(ca: str, cert: str, key: str) -> grpc.ChannelCredentials | None:
    """Mutual-TLS client credentials from the lab CA and this client's certificate; None if none given."""
    if not (ca or cert or key):
        return None
    if not (ca and cert and key):
        raise InvalidArgument("mutual TLS needs all three of the CA, a certificate and its key", field="tls")
    ca_b, cert_b, key_b = TlsFiles(Path(ca), Path(cert), Path(key)).read()
    return grpc.ssl_channel_credentials(root_certificates=ca_b, private_key=key_b, certificate_chain=cert_b)
