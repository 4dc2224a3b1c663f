"""Controller addresses as operators type them: ``HOST:PORT``, or a bare host that means the default port.

gRPC resolves a target without a port to port 443 (HTTPS's), so ``--controller 127.0.0.1`` would silently
dial the wrong port: every address is completed here, where the CLI, the client and the agent read it."""

from __future__ import annotations

import ipaddress

from jetfleet.shared.errors import InvalidArgument

DEFAULT_PORT = 50051
MAX_ADDRESS = 255
MAX_CONTROLLERS = 16   # addresses in one --controller list (a lab's leader and its standbys)


def with_default_port(address: str, default_port: int = DEFAULT_PORT, field: str = "controller") -> str:
    """``address`` with ``default_port`` added when it names none: ``ctl.lab`` -> ``ctl.lab:50051``,
    ``::1`` / ``[::1]`` -> ``[::1]:50051``. gRPC targets with a scheme (``dns:///``, ``unix:``) pass unchanged.

    InvalidArgument naming ``field`` for an empty address, a port that is not 1..65535, or spaces."""
    text = address.strip()
    if not text or len(text) > MAX_ADDRESS or any(c.isspace() for c in text):
        raise InvalidArgument(f"{field} {address[:64]!r}: expected HOST or HOST:PORT (e.g. 127.0.0.1:{default_port})",
                              field=field)
    if "://" in text or text.startswith("unix:"):
        return text
    if text.startswith("["):                      # [v6] or [v6]:port
        host, _, rest = text[1:].partition("]")
        if not rest:
            return f"[{host}]:{default_port}"
        if not rest.startswith(":"):
            raise InvalidArgument(f"{field} {text!r}: expected [IPv6]:PORT", field=field)
        _check_port(rest[1:], text, field)
        return text
    if text.count(":") > 1:                        # a bare IPv6 address
        try:
            ipaddress.IPv6Address(text)
        except ValueError:
            raise InvalidArgument(f"{field} {text!r}: not an IPv6 address; write [ADDRESS]:PORT", field=field) from None
        return f"[{text}]:{default_port}"
    host, sep, port = text.partition(":")
    if not sep:
        return f"{text}:{default_port}"
    if not host:
        raise InvalidArgument(f"{field} {text!r}: no host before the port", field=field)
    _check_port(port, text, field)
    return text


def _check_port(port: str, text: str, field: str) -> None:
    if not (port.isdigit() and 1 <= int(port) <= 65535):
        raise InvalidArgument(f"{field} {text!r}: the port must be a number 1..65535", field=field)


def controller_list(text: str, default_port: int = DEFAULT_PORT, field: str = "controller") -> list[str]:
    """A comma-separated list of controllers (a lab's leader and its standbys), each completed by
    ``with_default_port``, duplicates dropped, in the order given. InvalidArgument naming ``field`` for an empty
    entry, a bad address, or more than MAX_CONTROLLERS."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) > MAX_CONTROLLERS:
        raise InvalidArgument(f"{field}: {len(parts)} addresses; at most {MAX_CONTROLLERS}", field=field)
    out: list[str] = []
    for part in parts:
        if not part:
            raise InvalidArgument(f"{field} {text[:64]!r}: an empty address in the list; expected HOST[:PORT],"
                                  "HOST[:PORT],...", field=field)
        address = with_default_port(part, default_port, field)
        if address not in out:
            out.append(address)
    return out
