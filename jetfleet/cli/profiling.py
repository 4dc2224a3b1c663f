"""Profiling commands: campaigns (`jetfleet profile ...`) and stored profiles (`jetfleet profiles ...`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from jetfleet.cli.common import emit, handle_errors, output_option, table
from jetfleet.cli.fleet import _client, controller_option
from jetfleet.shared.errors import InvalidArgument


def campaign_dict(c: Any) -> dict[str, Any]:
    return {"campaign_id": c.campaign_id, "workload": c.workload, "target": c.target_device or c.target_model,
            "board_model": c.target_model, "modes": c.modes, "minibatches": c.minibatches, "status": c.status,
            "total": c.total, "done": c.done, "failed": c.failed, "remaining": c.total - c.done - c.failed,
            "in_flight": c.in_flight, "retries": c.retries, "eta_s": None if c.eta_s < 0 else round(c.eta_s, 1),
            "boards": list(c.boards), "errors": list(c.errors), "created_s": c.created_s}


def _eta(s: float | None) -> str:
    if s is None:
        return "?"
    return time.strftime("%H:%M:%S", time.gmtime(s)) if s < 86400 else f"{s / 86400:.1f} d"


def campaign_text(d: dict[str, Any]) -> str:
    lines = [f"campaign {d['campaign_id']}: {d['workload']} on {d['target']} ({d['modes']}, {d['minibatches']} "
             f"minibatches/mode) — {d['status']}",
             f"  {d['done']}/{d['total']} measured, {d['failed']} failed, {d['remaining']} remaining, "
             f"{d['in_flight']} in flight, {d['retries']} retried, ETA {_eta(d['eta_s'])}"]
    if d["boards"]:
        lines.append("  boards: " + ", ".join(d["boards"]))
    lines += [f"  error: {e}" for e in d["errors"][:5]]
    return "\n".join(lines)


@click.group("profile")
def profile_group() -> None:
    """Profiling campaigns: measure a workload across power modes on the fleet."""


@profile_group.command("start")
@click.option("--workload", required=True)
@click.option("--device", "device_id", default="", help="one board ...")
@click.option("--board-model", default="", help="... or every online board of a model, sharing the work")
@click.option("--modes", "modes", required=True,
              help="full, powertrain, presets, random:K, or a file with one mode per line")
@click.option("--minibatches", default=40, show_default=True, type=int, help="kept per mode, after warm-up")
@click.option("--seed", default=0, show_default=True, type=int, help="for random:K")
@click.option("--wait", is_flag=True, help="follow progress until the campaign ends")
@controller_option
@output_option
@handle_errors
def profile_start(workload: str, device_id: str, board_model: str, modes: str, minibatches: int, seed: int,
                  wait: bool, controller: str | None, output: str) -> None:
    """Start a campaign; prints its id."""
    fields: dict[str, Any] = {"workload": workload, "device_id": device_id, "board_model": board_model,
                              "minibatches": minibatches, "seed": seed}
    path = Path(modes)
    if path.is_file():
        lines = [ln.split("#")[0].strip() for ln in path.read_text().splitlines()]
        fields["mode_list"] = [ln for ln in lines if ln]
        fields["modes"] = f"file:{path.name}"
    elif "/" in modes and not modes.startswith("random:"):
        raise InvalidArgument(f"--modes {modes!r}: no such file (expected full, powertrain, presets, random:K "
                              "or a file of modes)", field="modes")
    else:
        fields["modes"] = modes
    with _client(controller) as c:
        camp = c.create_campaign(**fields)
        if wait:
            while camp.status in ("running", "paused"):
                if output == "text":
                    eta = _eta(None if camp.eta_s < 0 else camp.eta_s)
                    click.echo(f"\r{camp.done}/{camp.total} measured, ETA {eta}", nl=False)
                time.sleep(1.0)
                camp = c.get_campaign(camp.campaign_id)
            if output == "text":
                click.echo()
    emit(output, campaign_dict(camp), campaign_text)


@profile_group.command("ls")
@controller_option
@output_option
@handle_errors
def profile_ls(controller: str | None, output: str) -> None:
    """Every campaign with its progress."""
    with _client(controller) as c:
        rows = [campaign_dict(x) for x in c.list_campaigns()]
    emit(output, rows, lambda rs: table(
        [[r["campaign_id"], r["workload"], r["target"], r["modes"], r["status"], f"{r['done']}/{r['total']}",
          r["failed"], _eta(r["eta_s"])] for r in rs],
        ["CAMPAIGN", "WORKLOAD", "TARGET", "MODES", "STATUS", "DONE", "FAILED", "ETA"]))


@profile_group.command("show")
@click.argument("campaign_id")
@controller_option
@output_option
@handle_errors
def profile_show(campaign_id: str, controller: str | None, output: str) -> None:
    """One campaign: progress, boards, ETA, recent errors."""
    with _client(controller) as c:
        emit(output, campaign_dict(c.get_campaign(campaign_id)), campaign_text)


def _control(action: str) -> Any:
    @click.argument("campaign_id")
    @controller_option
    @output_option
    @handle_errors
    def cmd(campaign_id: str, controller: str | None, output: str) -> None:
        with _client(controller) as c:
            emit(output, campaign_dict(c.control_campaign(campaign_id, action)), campaign_text)

    cmd.__doc__ = f"{action.capitalize()} a campaign."
    return profile_group.command(action)(cmd)


for _action in ("pause", "resume", "cancel"):
    _control(_action)


@click.group("profiles")
def profiles_group() -> None:
    """Stored profiles, as CSV (board_model,workload,cpu_cores,cpu_mhz,gpu_mhz,mem_mhz,minibatch_time_ms,power_w)."""


@profiles_group.command("export")
@click.option("--board-model", default="")
@click.option("--workload", default="")
@click.option("--device", "device_id", default="")
@click.option("--campaign", "campaign_id", default="")
@click.option("-o", "--out", "out", type=click.Path(dir_okay=False), default="-", help="file (default stdout)")
@controller_option
@handle_errors
def profiles_export(board_model: str, workload: str, device_id: str, campaign_id: str, out: str,
                    controller: str | None) -> None:
    """Write matching profiles as CSV."""
    with _client(controller) as c:
        r = c.export_profiles(board_model=board_model, workload=workload, device_id=device_id, campaign_id=campaign_id)
    if out == "-":
        click.echo(r.csv, nl=False)
    else:
        Path(out).write_text(r.csv)
        click.echo(f"{r.rows} rows written to {out}", err=True)


@profiles_group.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@controller_option
@output_option
@handle_errors
def profiles_import(path: str, controller: str | None, output: str) -> None:
    """Import a CSV of profiles, all or nothing."""
    with _client(controller) as c:
        r = c.import_profiles(Path(path).read_text(), Path(path).name)
    data = {"rows": r.rows, "source": r.source, "new_board_models": list(r.new_board_models)}
    emit(output, data, lambda d: f"imported {d['rows']} rows as {d['source']}"
         + (f"; new board models: {', '.join(d['new_board_models'])}" if d["new_board_models"] else ""))
