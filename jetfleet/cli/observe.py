"""Observability commands: Prometheus file-based service discovery for the agents."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import click

from jetfleet.cli.common import handle_errors
from jetfleet.cli.fleet import _client, controller_option


def file_sd(devices: list[Any]) -> list[dict[str, Any]]:
    """Prometheus file_sd groups: one per board model, the agents' metrics addresses as targets."""
    groups: dict[str, list[str]] = {}
    for d in devices:
        if d.online and d.metrics_address:
            groups.setdefault(d.model, []).append(d.metrics_address)
    return [{"targets": sorted(t), "labels": {"board_model": m}} for m, t in sorted(groups.items())]


@click.group("prometheus")
def prometheus_group() -> None:
    """Prometheus integration."""


@prometheus_group.command("targets")
@click.option("--out", "out", type=click.Path(dir_okay=False), default="-",
              help="file_sd JSON file (written atomically; default stdout)")
@controller_option
@handle_errors
def targets(out: str, controller: str | None) -> None:
    """Write the online agents' /metrics addresses for Prometheus file_sd_configs (run it from cron or a timer)."""
    with _client(controller) as c:
        groups = file_sd(c.list_devices())
    text = json.dumps(groups, indent=1) + "\n"
    if out == "-":
        click.echo(text, nl=False)
        return
    path = Path(out)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)  # Prometheus never reads a half-written file
    count = sum(len(g["targets"]) for g in groups)
    click.echo(f"{count} agents written to {out}", err=True)
