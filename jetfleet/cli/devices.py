"""The boards as the controller knows them: `devices ls|show|forget`, `mode set`, `telemetry watch`."""

from __future__ import annotations

import json
import time
from typing import Any

import click

from jetfleet.cli.common import UINT32, Connection, connection_options, emit, handle_errors, output_option, table, when
from jetfleet.cli.complete import complete_devices


@click.group("devices")
def devices_group() -> None:
    """Boards known to the controller."""


def _mode_cell(r: dict[str, Any]) -> str:
    return (r["current_mode"] or "?") + (f" ({r['current_mode_name']})" if r["current_mode_name"] else "")


@devices_group.command("ls")
@click.option("--model", default="", help="only this board model")
@connection_options
@output_option
@handle_errors
def devices_ls(conn: Connection, model: str, output: str) -> None:
    """Every board: id, model, online state, current mode, power, and how fast its clock runs."""
    from jetfleet.cli.power import caps_text

    with conn.client() as c:
        rows = [d.to_dict() for d in c.list_devices(model)]
        caps = [x.to_dict() for x in c.fleet_plan()]
    emit(output, rows, lambda rs: table(
        [[r["device_id"], r["model"], "online" if r["online"] else "offline", _mode_cell(r),
          f"{r['power_w']:.1f} W" if "power_w" in r else "-", r["labels"].get("rack", "-"), r["speed"]] for r in rs],
        ["DEVICE", "MODEL", "STATE", "MODE", "POWER", "RACK", "SPEED"]) + ("\n" + caps_text(caps) if caps else ""))


@devices_group.command("label")
@click.argument("device", shell_complete=complete_devices)
@click.argument("labels", nargs=-1, required=True, metavar="KEY=VALUE...")
@connection_options
@output_option
@handle_errors
def devices_label(conn: Connection, device: str, labels: tuple[str, ...], output: str) -> None:
    """Label a board (KEY= removes a label); rack=GROUP puts it under `fleet cap set W --group GROUP`."""
    from jetfleet.shared.errors import InvalidArgument

    changes = {}
    for item in labels:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise InvalidArgument(f"label {item[:64]!r}: expected KEY=VALUE (KEY= removes it)", field="labels")
        changes[key] = value
    with conn.client() as c:
        d = c.label_device(device, changes).to_dict()
    emit(output, d, lambda x: f"{x['device_id']}: " + (", ".join(f"{k}={v}" for k, v in x["labels"].items())
                                                        or "no labels"))


@devices_group.command("forget")
@click.argument("device", shell_complete=complete_devices)
@connection_options
@output_option
@handle_errors
def devices_forget(conn: Connection, device: str, output: str) -> None:
    """Remove an offline board and its history from the controller (its agent may register again later)."""
    with conn.client() as c:
        device_id = c.forget_device(device)
    emit(output, {"device_id": device_id, "forgotten": True}, lambda d: f"{d['device_id']} forgotten")


def device_text(x: dict[str, Any]) -> str:
    """`devices show` as text: identity, state with readable times, speed, software, workloads, catalog, rails."""
    lines = [f"device_id: {x['device_id']}", f"model: {x['model']} (serial {x['serial']}"
             + (", emulated" if x["emulated"] else "") + ")",
             f"state: {'online' if x['online'] else 'offline'}, last seen {when(x['last_seen_s'])}",
             f"first seen: {when(x['first_seen_s'])}",
             f"speed: {x['speed']}" + (" (board time runs ahead of the wall clock)" if x["speed_factor"] is None
                                      or (x["speed_factor"] or 1) > 1 else ""),
             f"mode: {_mode_cell(x)}",
             f"held by: {x.get('held_by') or 'nobody (free)'}"
             + (f"; running {x['busy_command']}" if x.get("busy_command") else "")]
    if "power_w" in x:
        lines.append(f"power: {x['power_w']:.2f} W")
    if x["metrics_address"]:
        lines.append(f"metrics: http://{x['metrics_address']}/metrics")
    lines.append("software: " + ", ".join(f"{k}={v}" for k, v in sorted(x["software"].items())))
    lines.append("workloads: " + ", ".join(x["workloads"]))
    lines += [f"broken plugin {k}: {v}" for k, v in sorted(x["broken_workloads"].items())]
    rules = x.get("template_rules", {})
    lines += [f"template {k} (job submit --template {k}" + "".join(f" --arg {a}=" + _allowed(rules.get(k, {}).get(a, ""))
                                                                   for a in args) + ")"
              for k, args in sorted(x.get("templates", {}).items())]
    if "catalog" in x:
        lines.append(f"catalog: {x['catalog']['modes']} modes, presets {', '.join(x['catalog']['presets'])}")
    lines += [f"  {k:<18} {v:7.2f} W" for k, v in x.get("rails_w", {}).items()]
    return "\n".join(lines)


@devices_group.command("show")
@click.argument("device", shell_complete=complete_devices)
@connection_options
@output_option
@handle_errors
def devices_show(conn: Connection, device: str, output: str) -> None:
    """One board in detail (times as dates; --output json keeps seconds since the epoch)."""
    with conn.client() as c:
        d = c.get_device(device)
    emit(output, d.to_dict(), device_text)


@click.group("mode")
def mode_group() -> None:
    """Power modes of boards."""


@mode_group.command("set")
@click.argument("device", shell_complete=complete_devices)
@click.argument("mode")
@click.option("--request-id", default="", help="makes the request idempotent (safe to retry)")
@click.option("--timeout", "timeout_s", default=30.0, show_default=True, type=click.FloatRange(0, 3600),
              help="seconds to wait for the board to confirm (0: the controller's default)")
@connection_options
@output_option
@handle_errors
def mode_set(conn: Connection, device: str, mode: str, request_id: str, timeout_s: float, output: str) -> None:
    """Set DEVICE to MODE (CORES/CPU/GPU/MEM in MHz, or a preset); prints the mode the board confirms."""
    with conn.client() as c:
        r = c.set_mode(device, mode, request_id=request_id, timeout_s=timeout_s)
    emit(output, r.to_dict(), lambda d: f"{d['device_id']} confirms {d['confirmed']} ({d['latency_ms']:.0f} ms)")


@click.group("telemetry")
def telemetry_group() -> None:
    """Live telemetry."""


@telemetry_group.command("watch")
@click.argument("device", shell_complete=complete_devices)
@click.option("--count", default=0, type=UINT32, help="stop after this many samples (0 = until Ctrl-C)")
@click.option("--timeout", "timeout_s", default=10.0, show_default=True, type=click.FloatRange(0, 3600, min_open=True),
              help="give up when no sample arrives for this many seconds")
@connection_options
@output_option
@handle_errors
def telemetry_watch(conn: Connection, device: str, count: int, timeout_s: float, output: str) -> None:
    """Live power per rail of DEVICE (one line per sample; --output json: one JSON object per line).

    An offline board is reported at once; a board going offline or silent ends the watch with an error.
    Ctrl-C ends the watch (exit 0)."""
    with conn.client() as c:
        try:
            for s in c.watch_telemetry(device, count, timeout_s):
                if output == "json":
                    click.echo(json.dumps(s.to_dict()))
                else:
                    rails = "  ".join(f"{k} {v:6.2f}" for k, v in sorted(s.rails_w.items()))
                    stamp = time.strftime("%H:%M:%S", time.localtime(s.t_s)) + f".{int(s.t_s * 10) % 10}"
                    click.echo(f"{stamp}  total {s.total_w:6.2f} W  {rails}")
        except KeyboardInterrupt:
            pass


def _allowed(rule: str) -> str:
    """An arg's placeholder in `devices show`: ``...``, or what its rule allows (``<an integer in 1..1000>``)."""
    if not rule:
        return "..."
    from jetfleet.shared.errors import InvalidArgument
    from jetfleet.shared.template_args import ArgRule

    try:
        return f"<{ArgRule.parse(rule, 'arg_rules').allowed()}>"
    except InvalidArgument:   # a rule this client does not read (a newer agent's): as the agent said it
        return f"<{rule[:64]}>"
