"""`jetfleet fleet cap set|show|clear` and `jetfleet fleet plan`: the lab (or a rack group) as one power budget."""

from __future__ import annotations

from typing import Any

import click

from jetfleet.cli.common import Connection, connection_options, emit, handle_errors, output_option, table
from jetfleet.shared.quantity import parse_cap


@click.group("fleet")
def fleet_group() -> None:
    """The lab as one power budget: caps over the boards, and the plan of the jobs under them."""


@fleet_group.group("cap")
def cap_group() -> None:
    """Power caps: the whole lab, or the boards labelled rack=GROUP (`jetfleet devices label`)."""


def caps_text(caps: list[dict[str, Any]]) -> str:
    """One line per cap: watts, drawn now, idle, headroom."""
    if not caps:
        return "no power cap set (jetfleet fleet cap set WATTS [--group RACK])"
    return "\n".join(f"{c['group']}: cap {c['cap_w']:g} W, drawing {c['power_w']:.1f} W of {len(c['boards'])} "
                     f"board{'s' if len(c['boards']) != 1 else ''} "
                     f"(idle {c['idle_w']:.1f} W), headroom {c['headroom_w']:.1f} W" for c in caps)


def plan_text(caps: list[dict[str, Any]]) -> str:
    """Each cap's line and its boards: job, mode, predicted and observed power."""
    if not caps:
        return caps_text(caps)
    out = []
    for c in caps:
        out.append(caps_text([c]) + f"; predicted {c['predicted_w']:.1f} W")
        out.append(table([[b["device_id"], b["model"], b["group"] or "-", b["job_id"] or "idle", b["workload"] or "-",
                           b["mode"] or "-", f"{b['predicted_w']:.1f}" if b["predicted_w"] else "-",
                           f"{b['power_w']:.1f}" if b["online"] else "offline"] for b in c["boards"]],
                         ["DEVICE", "MODEL", "RACK", "JOB", "WORKLOAD", "MODE", "PREDICTED W", "OBSERVED W"]))
    return "\n".join(out)


@cap_group.command("set")
@click.argument("watts")
@click.option("--group", default="", metavar="RACK", help="cap only the boards labelled rack=RACK [the whole lab]")
@connection_options
@output_option
@handle_errors
def cap_set(conn: Connection, watts: str, group: str, output: str) -> None:
    """Cap the lab (or a rack group) at WATTS (200W: the unit is required); refused below the boards' idle power."""
    cap_w = parse_cap(watts)
    with conn.client() as c:
        caps = [x.to_dict() for x in c.set_fleet_cap(cap_w, group)]
    emit(output, caps, caps_text)


@cap_group.command("show")
@connection_options
@output_option
@handle_errors
def cap_show(conn: Connection, output: str) -> None:
    """Every cap: watts, what its boards draw now (idle ones included), their idle power, headroom."""
    with conn.client() as c:
        caps = [x.to_dict() for x in c.fleet_plan()]
    emit(output, caps, caps_text)


@cap_group.command("clear")
@click.option("--group", default="", metavar="RACK", help="the rack group's cap [the lab-wide cap]")
@connection_options
@output_option
@handle_errors
def cap_clear(conn: Connection, group: str, output: str) -> None:
    """Remove a cap."""
    with conn.client() as c:
        caps = [x.to_dict() for x in c.clear_fleet_cap(group)]
    emit(output, {"cleared": group or "lab", "caps": caps}, lambda d: f"cap on {d['cleared']} cleared")


@fleet_group.command("plan")
@click.option("--group", default="", metavar="RACK", help="only this rack group's cap")
@connection_options
@output_option
@handle_errors
def fleet_plan(conn: Connection, group: str, output: str) -> None:
    """The allocation under each cap: board -> job -> mode, predicted and observed power, headroom."""
    with conn.client() as c:
        caps = [x.to_dict() for x in c.fleet_plan(group)]
    emit(output, caps, plan_text)
