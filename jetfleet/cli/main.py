"""The ``jetfleet`` command. Groups are thin: they parse, call library code, and print."""

from __future__ import annotations

import logging

import click

from jetfleet.cli.boards import modes_cmd, twin_group
from jetfleet.cli.certs import certs_group
from jetfleet.cli.fleet import agent_group, controller_group, devices_group, lab_group, mode_group, telemetry_group
from jetfleet.cli.observe import prometheus_group
from jetfleet.cli.powertrain import eval_group, model_group, optimize, pareto, predict
from jetfleet.cli.profiling import profile_group, profiles_group


@click.group()
@click.option("-v", "--verbose", count=True, help="more logging (-vv for debug)")
@click.version_option(package_name="jetfleet")
def cli(verbose: int) -> None:
    """jetfleet: run a lab of Jetson boards as one fleet."""
    level = logging.WARNING - 10 * min(verbose, 2)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


cli.add_command(modes_cmd)
cli.add_command(twin_group)
for group in (controller_group, agent_group, lab_group, devices_group, mode_group, telemetry_group, profile_group,
              profiles_group, model_group, predict, pareto, optimize, eval_group, prometheus_group,
              certs_group):
    cli.add_command(group)
