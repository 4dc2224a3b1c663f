"""`jetfleet certs`: the lab's CA and certificates for mutual TLS."""

from __future__ import annotations

from pathlib import Path

import click

from jetfleet.cli.common import handle_errors

DEFAULT_DIR = "~/.local/share/jetfleet/pki"


@click.group("certs")
def certs_group() -> None:
    """The lab's certificate authority and certificates (mutual TLS between agents and controller)."""


@certs_group.command("init")
@click.option("--dir", "directory", default=DEFAULT_DIR, show_default=True)
@click.option("--name", default="jetfleet lab CA", show_default=True)
@click.option("--force", is_flag=True, help="replace an existing CA (every issued certificate stops working)")
@handle_errors
def certs_init(directory: str, name: str, force: bool) -> None:
    """Create the lab's CA (ca.crt; ca.key is written 0600 — keep it off the boards)."""
    from jetfleet.shared.tls import init_ca

    crt = init_ca(Path(directory).expanduser(), name, force=force)
    click.echo(f"CA written to {crt}")


@certs_group.command("issue")
@click.argument("role", type=click.Choice(["controller", "agent", "operator"]))
@click.argument("name")
@click.option("--dir", "directory", default=DEFAULT_DIR, show_default=True)
@click.option("--san", "sans", multiple=True, help="extra DNS name or IP the certificate is valid for (repeatable)")
@click.option("--days", default=825, show_default=True, type=int)
@handle_errors
def certs_issue(role: str, name: str, directory: str, sans: tuple[str, ...], days: int) -> None:
    """Issue a certificate. An agent's NAME must be the device id it registers with."""
    from jetfleet.shared.tls import issue

    crt, key = issue(Path(directory).expanduser(), role, name, sans=list(sans), days=days)
    click.echo(f"{role} certificate {crt} and key {key}")
