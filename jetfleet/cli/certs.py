"""`jetfleet certs`: the lab's CA and certificates for mutual TLS."""

from __future__ import annotations

from pathlib import Path

import click

from jetfleet.cli.common import emit, handle_errors, output_option

DEFAULT_DIR = "~/.local/share/jetfleet/pki"


@click.group("certs")
def certs_group() -> None:
    """The lab's certificate authority and certificates (mutual TLS between agents and controller)."""


@certs_group.command("init")
@click.option("--dir", "directory", default=DEFAULT_DIR, show_default=True)
@click.option("--name", default="jetfleet lab CA", show_default=True)
@click.option("--force", is_flag=True, help="replace an existing CA (every issued certificate stops working)")
@output_option
@handle_errors
def certs_init(directory: str, name: str, force: bool, output: str) -> None:
    """Create the lab's CA (ca.crt; ca.key is written 0600 — keep it off the boards)."""
    from jetfleet.shared.tls import init_ca

    crt = init_ca(Path(directory).expanduser(), name, force=force)
    emit(output, {"ca_cert": str(crt), "ca_key": str(crt.with_name("ca.key")), "name": name},
         lambda d: f"CA written to {d['ca_cert']}")


@certs_group.command("issue")
@click.argument("role", type=click.Choice(["controller", "agent", "operator"]))
@click.argument("name")
@click.option("--dir", "directory", default=DEFAULT_DIR, show_default=True)
@click.option("--san", "sans", multiple=True, help="extra DNS name or IP the certificate is valid for (repeatable)")
@click.option("--days", default=825, show_default=True, type=click.IntRange(1, 36_500))
@output_option
@handle_errors
def certs_issue(role: str, name: str, directory: str, sans: tuple[str, ...], days: int, output: str) -> None:
    """Issue a certificate. NAME is an id ([a-z0-9][a-z0-9._-]{0,63}); an agent's must be the device id it
    registers with. Re-issuing a name keeps its role; a name another role (or the CA) holds is refused."""
    from jetfleet.shared.tls import issue

    crt, key = issue(Path(directory).expanduser(), role, name, sans=list(sans), days=days)
    emit(output, {"role": role, "name": name, "cert": str(crt), "key": str(key), "days": days, "sans": list(sans)},
         lambda d: f"{d['role']} certificate {d['cert']} and key {d['key']}")
