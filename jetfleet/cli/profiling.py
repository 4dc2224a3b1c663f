"""Profiling commands: campaigns (`jetfleet profile ...`) and stored profiles (`jetfleet profiles ...`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from jetfleet.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_WORK_FAILED,
    MAX_SMALL_FILE_BYTES,
    UINT32,
    Connection,
    connection_options,
    duration,
    emit,
    handle_errors,
    output_option,
    read_text_file,
    say,
    table,
)
from jetfleet.cli.complete import complete_board_models, complete_devices, complete_workloads
from jetfleet.shared import defaults
from jetfleet.shared.errors import InvalidArgument
from jetfleet.shared.workloads import MAX_MINIBATCHES

MAX_MODE_LINE = 200   # characters of one line of a modes file


def campaign_text(d: dict[str, Any]) -> str:
    """A campaign dict as a few lines of text: target and status, progress and ETA, boards, up to five errors."""
    lines = [f"campaign {d['campaign_id']}: {d['workload']} on {d['target']} ({d['modes']}, {d['minibatches']} "
             f"minibatches/mode) — {d['status']}",
             f"  {d['done']}/{d['total']} measured, {d['failed']} failed, {d['remaining']} remaining, "
             f"{d['in_flight']} in flight, {d['retries']} retried"
             + (f", ETA {duration(d['eta_s'])}" if d["status"] == "running" else "")]
    if d.get("waiting"):
        lines.append(f"  {d['waiting']}")
    if d["boards"]:
        lines.append("  boards: " + ", ".join(d["boards"]))
    lines += [f"  error: {e}" for e in d["errors"][:5]]
    return "\n".join(lines)


@click.group("profile")
def profile_group() -> None:
    """Profiling campaigns: measure a workload across power modes on the fleet."""


def read_modes_file(path: str) -> tuple[list[str], list[int]]:
    """The modes of a modes file (UTF-8, one per line, ``#`` comments; ``-`` is standard input) and the line each
    is on."""
    text = read_text_file(path, "modes file", MAX_SMALL_FILE_BYTES)
    modes, lines = [], []
    for number, raw in enumerate(text.splitlines(), start=1):
        ln = raw.split("#")[0].strip()
        if len(ln) > MAX_MODE_LINE or not ln.isprintable():
            raise InvalidArgument(f"modes file {path} line {number}: not a mode (CORES/CPU/GPU/MEM or a preset name)",
                                  field="modes")
        if ln:
            modes.append(ln)
            lines.append(number)
    if not modes:
        raise InvalidArgument(f"modes file {path} names no mode", field="modes")
    return modes, lines


@profile_group.command("start")
@click.option("--workload", required=True, shell_complete=complete_workloads)
@click.option("--device", "device_id", default="", help="one board ...", shell_complete=complete_devices)
@click.option("--board-model", default="", help="... or every online board of a model, sharing the work",
              shell_complete=complete_board_models)
@click.option("--modes", "modes", required=True,
              help="full, powertrain, inference (AGX boards), presets, random:K, or a file with one mode per line (- for "
                   "standard input)")
@click.option("--minibatches", default=defaults.MINIBATCHES, show_default=True, type=click.IntRange(1, MAX_MINIBATCHES),
              help="kept per mode, after warm-up")
@click.option("--seed", default=0, show_default=True, type=UINT32, help="for random:K")
@click.option("--wait", is_flag=True, help="follow progress until the campaign ends (Ctrl-C stops following; the "
              "campaign goes on)")
@connection_options
@output_option
@handle_errors
def profile_start(conn: Connection, workload: str, device_id: str, board_model: str, modes: str, minibatches: int,
                  seed: int, wait: bool, output: str) -> None:
    """Start a campaign; prints its id at once (and, with --wait, its progress and final state)."""
    fields: dict[str, Any] = {"device_id": device_id, "board_model": board_model, "minibatches": minibatches,
                              "seed": seed}
    path = Path(modes)
    if modes == "-" or path.is_file():
        from jetfleet.shared.files import source_name

        fields["mode_list"], fields["mode_lines"] = read_modes_file(modes)
        fields["modes"] = f"file:{source_name(modes)}"[:128]
    elif "/" in modes and not modes.startswith("random:"):
        raise InvalidArgument(f"--modes {modes!r}: no such file (expected full, powertrain, presets, random:K "
                              "or a file of modes)", field="modes")
    else:
        fields["modes"] = modes
    with conn.client() as c:
        camp = c.create_campaign(workload, **fields)
        say(output, f"campaign {camp.campaign_id} started: {camp.total} modes of {workload} on {camp.target}"
            + ("" if wait else f" (follow it: jetfleet profile show {camp.campaign_id})"),
            campaign_id=camp.campaign_id)
        if camp.waiting:
            say(output, f"warning: {camp.waiting}", campaign_id=camp.campaign_id)
        if wait:
            camp = _follow(c, camp.campaign_id, output)
    emit(output, camp.to_dict(), campaign_text)
    if wait and camp.status == "cancelled":
        sys.exit(EXIT_WORK_FAILED)


def _follow(c: Any, campaign_id: str, output: str) -> Any:
    """Show a campaign's progress until it ends; Ctrl-C says the campaign goes on, how to follow or stop it, and
    exits 130."""
    from jetfleet.cli.progress import Progress

    progress = Progress.for_output(f"campaign {campaign_id}", output)
    try:
        def show(camp: Any) -> None:
            note = camp.waiting or (f"{camp.failed} failed" if camp.failed else "") or (
                "paused" if camp.status == "paused" else "")
            progress.update(camp.done + camp.failed, camp.total, note, camp.eta_s)

        return c.wait_campaign(campaign_id, on_update=show)
    except KeyboardInterrupt:
        progress.close()
        say(output, f"interrupted: campaign {campaign_id} goes on on the controller; follow it with "
            f"`jetfleet profile show {campaign_id}`, stop it with `jetfleet profile cancel {campaign_id}`",
            campaign_id=campaign_id, interrupted=True)
        sys.exit(EXIT_INTERRUPTED)
    finally:
        progress.close()


@profile_group.command("ls")
@connection_options
@output_option
@handle_errors
def profile_ls(conn: Connection, output: str) -> None:
    """Every campaign with its progress."""
    with conn.client() as c:
        rows = [x.to_dict() for x in c.list_campaigns()]
    emit(output, rows, lambda rs: table(
        [[r["campaign_id"], r["workload"], r["target"], r["modes"], r["status"], f"{r['done']}/{r['total']}",
          r["failed"], "waiting" if r["waiting"] else duration(r["eta_s"]) if r["status"] == "running" else "-"]
         for r in rs],
        ["CAMPAIGN", "WORKLOAD", "TARGET", "MODES", "STATUS", "DONE", "FAILED", "ETA"]))


@profile_group.command("show")
@click.argument("campaign_id")
@connection_options
@output_option
@handle_errors
def profile_show(conn: Connection, campaign_id: str, output: str) -> None:
    """One campaign: progress, boards, ETA, recent errors, what it waits for."""
    with conn.client() as c:
        emit(output, c.get_campaign(campaign_id).to_dict(), campaign_text)


def _control(action: str) -> Any:
    @click.argument("campaign_id")
    @connection_options
    @output_option
    @handle_errors
    def cmd(conn: Connection, campaign_id: str, output: str) -> None:
        with conn.client() as c:
            emit(output, c.control_campaign(campaign_id, action).to_dict(), campaign_text)

    cmd.__doc__ = f"{action.capitalize()} a campaign."
    return profile_group.command(action)(cmd)


for _action in ("pause", "resume", "cancel"):
    _control(_action)


@click.group("profiles")
def profiles_group() -> None:
    """Stored profiles, as CSV (board_model,workload,cpu_cores,cpu_mhz,gpu_mhz,mem_mhz,minibatch_time_ms,power_w)."""


@profiles_group.command("export")
@click.option("--board-model", default="", shell_complete=complete_board_models)
@click.option("--workload", default="", shell_complete=complete_workloads)
@click.option("--device", "device_id", default="", shell_complete=complete_devices)
@click.option("--campaign", "campaign_id", default="")
@click.option("-o", "--out", "out", type=click.Path(dir_okay=False), default="-", help="file (default stdout)")
@connection_options
@handle_errors
def profiles_export(conn: Connection, board_model: str, workload: str, device_id: str, campaign_id: str,
                    out: str) -> None:
    """Write matching profiles as CSV (streamed: any number of rows)."""
    rows = 0
    with conn.client() as c:
        chunks = c.export_chunks(board_model=board_model, workload=workload, device_id=device_id,
                                 campaign_id=campaign_id)
        if out == "-":
            for chunk in chunks:
                click.echo(chunk.csv, nl=False)
            return
        tmp = Path(out).with_name(f".{Path(out).name}.part")
        with tmp.open("w", encoding="utf-8") as f:
            for chunk in chunks:
                f.write(chunk.csv)
                rows += chunk.rows
        tmp.replace(out)
    click.echo(f"{rows} rows written to {out}", err=True)


@profiles_group.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("--new", "new_names", multiple=True, metavar="NAME",
              help="a board model or workload this file introduces (repeatable); the controller refuses names it "
                   "does not know otherwise, so a typo cannot start a new one")
@click.option("--allow-new", is_flag=True, help="accept every board model and workload the file introduces")
@connection_options
@output_option
@handle_errors
def profiles_import(conn: Connection, path: str, new_names: tuple[str, ...], allow_new: bool, output: str) -> None:
    """Import a CSV of profiles (UTF-8; - reads standard input), all or nothing; rows stored before are
    recognised, not doubled."""
    from jetfleet.shared.files import source_name

    text = read_text_file(path, "csv")
    with conn.client() as c:
        r = c.import_profiles(text, source_name(path), allow_new=new_names, allow_any_new=allow_new)
    for kind, names in (("board model", r.new_board_models), ("workload", r.new_workloads)):
        for name in names:
            say(output, f"warning: new {kind} {name!r} created by this import", new=name, kind=kind)
    data = r.to_dict()
    emit(output, data, lambda d: f"imported {d['rows']} rows as {d['source']}"
         + (f" ({d['already_stored']} rows were stored before and are kept once)" if d["already_stored"] else "")
         + (f"; new board models: {', '.join(d['new_board_models'])}" if d["new_board_models"] else "")
         + (f"; new workloads: {', '.join(d['new_workloads'])}" if d["new_workloads"] else ""))
