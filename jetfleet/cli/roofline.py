"""`jetfleet roofline`: Pagoda's time and energy rooflines per power mode (issue 16)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from jetfleet.cli.common import Connection, connection_options, emit, handle_errors, output_option, table
from jetfleet.cli.complete import complete_board_models, complete_devices, complete_workloads
from jetfleet.shared.errors import FailedPrecondition


def roofline_text(d: dict[str, Any]) -> str:
    """The rooflines as a table: per mode its roofs and energy constants, and the workload's T and E there."""
    wl = d["workload"]
    rows = []
    observed = any(p["observed_profiles"] for p in d["points"])
    for p in d["points"]:
        row = [p["mode_name"] or p["mode"], f"{p['peak_flops'] / 1e9:.0f}", f"{p['peak_bytes_per_s'] / 1e9:.1f}",
               f"{p['ridge']:.1f}", f"{p['eps_flop_j'] * 1e12:.1f}", f"{p['eps_byte_j'] * 1e12:.0f}",
               f"{p['pi0_w']:.2f}"]
        if wl:
            row += [f"{p['time_s'] * 1e3:.2f}", f"{p['energy_j']:.3f}", "memory" if p["memory_bound"] else "compute"]
        if observed:
            row += ([f"{p['observed_time_s'] * 1e3:.2f}", f"{p['observed_energy_j']:.3f}"] if p["observed_profiles"]
                    else ["-", "-"])
        rows.append(row)
    head = ["MODE", "GFLOP/S", "GB/S", "RIDGE FLOP/B", "PJ/FLOP", "PJ/BYTE", "PI0 W"]
    if wl:
        head += ["T MS", "E J", "BOUND"]
    if observed:
        head += ["PROFILED MS", "PROFILED J"]
    if not rows:
        return (f"no roofline of {d['board_model']} is stored yet: measure some modes first (jetfleet roofline "
                f"--board-model {d['board_model']} --mode MAXN --measure)")
    text = table(rows, head)
    if wl:
        text += (f"\n{wl} ({d['phase']}, minibatch {d['minibatch_size']}): intensity {d['intensity']:.2f} FLOP/byte; "
                 "T = max(W/peak, Q/BW), E = eps_flop W + eps_byte Q + pi0 T per minibatch"
                 + ("; PROFILED: the stored profiles of the mode (the whole minibatch, host time included)"
                    if observed else ""))
    if d.get("profile_fit"):
        text += "\n\n" + profile_fit_text(d)
    if d["measured"]:
        text += f"\nmeasured {d['measured']} mode(s) now"
    for what in ("plot", "energy_plot"):
        if d.get(what):
            text += f"\n{what.replace('_', ' ')} written to {d[what]}"
    return text


def profile_fit_text(d: dict[str, Any]) -> str:
    """Both energy fits per mode: the micro-benchmark windows' and the profiles', each with its MAPE of E over the
    profiled workloads (E = eps_flop W + eps_byte Q + pi0 T, T = the profiled minibatch time)."""
    rows = []
    for p in d["points"]:
        name = p["mode_name"] or p["mode"]
        n = len(p["profiled"])
        for fit, key, mape in (("micro-benchmark", "", p["bench_fit_mape"]),
                               ("profiles", "profile_", p["profile_fit_mape"])):
            rows.append([name, fit, f"{p[key + 'eps_flop_j'] * 1e12:.1f}", f"{p[key + 'eps_byte_j'] * 1e12:.0f}",
                         f"{p[key + 'pi0_w']:.2f}", f"{100 * mape:.1f}", str(n)]
                        + ([f"{p['energy_j' if not key else 'profile_energy_j']:.3f}"] if d["workload"] else []))
    head = ["MODE", "FIT", "PJ/FLOP", "PJ/BYTE", "PI0 W", "E MAPE %", "WORKLOADS"] + (["E J"] if d["workload"] else [])
    used = sorted({x["workload"] for p in d["points"] for x in p["profiled"]})
    return (table(rows, head) + f"\nenergy fits compared over the workloads profiled at each mode ({', '.join(used)}; "
            "training, default minibatch): E MAPE with T = the profiled minibatch time; the profile fit is "
            "non-negative least squares on relative error, computed now from the stored profiles"
            + ("; E J: the workload with each fit's constants and the roofline's T" if d["workload"] else ""))


@click.command("roofline")
@click.option("--board-model", required=True, shell_complete=complete_board_models)
@click.option("--workload", default="", shell_complete=complete_workloads, help="place this workload on the roofs")
@click.option("--mode", "modes", multiple=True, help="a mode or preset (repeat); default: every stored mode")
@click.option("--measure", is_flag=True, help="measure the modes not stored yet on a board of the model")
@click.option("--remeasure", is_flag=True, help="with --measure: measure the named modes again, replacing them")
@click.option("--device", "device_id", default="", shell_complete=complete_devices,
              help="the board to measure on (default: any online board of the model)")
@click.option("--seconds", default=0.0, type=float, help="board seconds per micro-benchmark kernel (default 2)")
@click.option("--minibatch-size", default=0, type=int, help="the workload's minibatch (default 16)")
@click.option("--phase", default="training", type=click.Choice(["training", "inference"]), show_default=True)
@click.option("--fit-profiles", "profile_fit", is_flag=True,
              help="also fit each mode's eps and pi0 from its stored profiles (>= 3 workloads) and compare the fits")
@click.option("--plot", type=click.Path(dir_okay=False), default=None,
              help="write the time roofline here (PNG/PDF/SVG) and the energy roofline beside it (NAME-energy)")
@connection_options
@output_option
@handle_errors
def roofline(conn: Connection, board_model: str, workload: str, modes: tuple[str, ...], measure: bool,
             remeasure: bool, device_id: str, seconds: float, minibatch_size: int, phase: str, profile_fit: bool,
             plot: str | None, output: str) -> None:
    """Time and energy rooflines of a board model's power modes (Pagoda), a workload placed on them."""
    with conn.client() as c:
        r = c.roofline(board_model, workload=workload, modes=list(modes), measure=measure, device_id=device_id,
                       seconds=seconds, minibatch_size=minibatch_size, phase=phase, remeasure=remeasure, profile_fit=profile_fit)
    d = {**r.to_dict(), "profile_fit": profile_fit}
    if not d["points"] and plot:   # nothing to draw: say how to get something, not a plotting traceback
        raise FailedPrecondition(f"no roofline of {board_model} is stored yet, so there is nothing to plot: measure "
                                 f"some modes first (jetfleet roofline --board-model {board_model} --mode MAXN --measure; "
                                 f"it needs an online {board_model} board)", field="mode")
    if plot:
        from jetfleet.research.pagoda.plots import plot_rooflines, workload_rows

        rows = workload_rows(d["points"], workload) if workload else []
        paths = plot_rooflines(d["points"], rows, Path(plot), f"{board_model}" + (f", {workload} ({phase}, "
                               f"minibatch {r.minibatch_size})" if workload else ""),
                               ("bench", "profiles") if profile_fit else ("bench",))
        d["plot"], d["energy_plot"] = str(paths[0]), str(paths[1])
    emit(output, d, roofline_text)
