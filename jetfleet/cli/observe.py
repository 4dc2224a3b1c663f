"""Observability commands: Prometheus file-based service discovery for the agents."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import click

from jetfleet.cli.common import Connection, connection_options, handle_errors
from jetfleet.shared.errors import InvalidArgument


def file_sd(devices: list[Any]) -> list[dict[str, Any]]:
    """Prometheus file_sd groups: one per online agent, its metrics address labelled device, board_model, rack."""
    from jetfleet.shared.sd import SdAgent, sd_groups

    return sd_groups(SdAgent(d.device_id, d.model, d.labels.get("rack", ""), d.metrics_address)
                     for d in devices if d.online)


@click.group("prometheus")
def prometheus_group() -> None:
    """Prometheus integration."""


@prometheus_group.command("targets")
@click.option("--out", "out", type=click.Path(dir_okay=False), default="-",
              help="file_sd JSON file (written atomically; default stdout)")
@connection_options
@handle_errors
def targets(conn: Connection, out: str) -> None:
    """Write the online agents' /metrics addresses for Prometheus file_sd_configs (run it from cron or a timer)."""
    with conn.client() as c:
        groups = file_sd(c.list_devices())
    text = json.dumps(groups, indent=1) + "\n"
    if out == "-":
        click.echo(text, nl=False)
        return
    path = Path(out)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)   # Prometheus's targets/ folder may not exist yet
    except OSError as e:
        raise InvalidArgument(f"--out {out}: cannot create its folder {path.parent} ({e.strerror})", field="out") from None
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)  # Prometheus never reads a half-written file
    count = sum(len(g["targets"]) for g in groups)
    click.echo(f"{count} agents written to {out}", err=True)
