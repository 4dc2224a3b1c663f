"""How `jetfleet top` draws the fleet: sort orders, cells and bars, without the terminal UI (plain functions
over ``data``'s dataclasses, tested on their own)."""

from __future__ import annotations

import time
from typing import Callable

from rich.text import Text

from jetfleet.cli.top.data import Board, Fleet, Work

# sort key name -> (what the header says, the key; boards without a value sort last either way)
SORTS: dict[str, tuple[str, Callable[[Board], tuple]]] = {
    "id": ("device", lambda b: (b.device_id,)),
    "power": ("power", lambda b: (b.power_w is None, -(b.power_w or 0.0), b.device_id)),
    "temp": ("temperature", lambda b: (b.max_temp_c is None, -(b.max_temp_c or 0.0), b.device_id)),
    "model": ("model", lambda b: (b.model, b.device_id)),
    "state": ("state", lambda b: (b.online, b.device_id)),   # offline first: what needs a look
}
SORT_ORDER = tuple(SORTS)

BOARD_COLUMNS = ("DEVICE", "MODEL", "STATE", "MODE", "POWER W", "TEMP °C", "CPU", "GPU", "WORK", "RAILS W")
WORK_COLUMNS = ("KIND", "ID", "WORKLOAD", "TARGET", "STATE", "PROGRESS", "ETA", "BOARDS", "POWER W", "DETAIL")


def sort_boards(boards: tuple[Board, ...], key: str, reverse: bool = False) -> list[Board]:
    """Boards in the order of sort ``key`` (SORTS); ``reverse`` turns it around."""
    out = sorted(boards, key=SORTS[key][1])
    return out[::-1] if reverse else out


def bar(fraction: float, width: int = 10) -> str:
    """A progress bar of ``width`` cells and the percentage: ``██████░░░░  62%``."""
    f = min(1.0, max(0.0, fraction))
    full = int(round(f * width))
    return "█" * full + "░" * (width - full) + f" {f:4.0%}"


def duration(seconds: float | None) -> str:
    """``1h02m``, ``3m20s``, ``45s``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def watts(w: float | None) -> str:
    """Watts with one decimal; ``-`` without a reading."""
    return "-" if w is None else f"{w:.1f}"


def state_cell(b: Board) -> Text:
    """online in green, offline in red."""
    return Text("online", style="bold green") if b.online else Text("offline", style="bold red")


def temp_cell(c: float | None) -> Text:
    """The hottest sensor: yellow from 70 °C, red from 85 °C (a Jetson throttles near 95-100 °C)."""
    if c is None:
        return Text("-")
    return Text(f"{c:.0f}", style="bold red" if c >= 85 else "yellow" if c >= 70 else "")


def rails_cell(rails_w: dict[str, float]) -> str:
    """Every rail, compact: ``GPU_SOC 12.1 CPU_CV 3.4 ...`` (the ``VDD_`` prefix dropped)."""
    return " ".join(f"{r[4:] if r.startswith('VDD_') else r} {w:.1f}" for r, w in rails_w.items()) or "-"


def work_cell(work: tuple[Work, ...]) -> str:
    """What runs on a board: ``job a1b2 62%`` or ``campaign c3 40%`` (the first, and how many more)."""
    if not work:
        return "-"
    w = work[0]
    more = f" +{len(work) - 1}" if len(work) > 1 else ""
    return f"{w.kind} {w.work_id[:12]} {w.progress:.0%}{more}"


def board_row(b: Board) -> tuple[object, ...]:
    """A board's cells, in BOARD_COLUMNS order."""
    util = (f"{b.cpu_util:.0%}", f"{b.gpu_util:.0%}") if b.online and b.power_w is not None else ("-", "-")
    return (b.device_id, b.model, state_cell(b), b.mode_text, watts(b.power_w if b.online else None),
            temp_cell(b.max_temp_c if b.online else None), *util, work_cell(b.work),
            rails_cell(b.rails_w) if b.online else "-")


def work_row(w: Work) -> tuple[object, ...]:
    """A job's or campaign's cells, in WORK_COLUMNS order."""
    power = watts(w.power_w) + (f" / {w.power_budget_w:g}" if w.power_budget_w else "") if w.power_w else "-"
    return (w.kind, w.work_id, w.workload, w.target, w.state, bar(w.progress), duration(w.eta_s),
            ", ".join(w.boards) or "-", power, w.detail)


def summary(fleet: Fleet, address: str, sort: str, reverse: bool) -> Text:
    """The line above the boards: online count, fleet power, work, sort order, and when it was taken."""
    jobs = sum(w.kind == "job" for w in fleet.work)
    campaigns = len(fleet.work) - jobs
    text = Text()
    text.append(f"{address}  ", style="bold")
    text.append(f"{fleet.online}/{len(fleet.boards)} boards online  ")
    text.append(f"fleet {fleet.power_w:.1f} W  ", style="bold")
    text.append(f"{jobs} job{'s' * (jobs != 1)}, {campaigns} campaign{'s' * (campaigns != 1)}  ")
    text.append(f"sorted by {SORTS[sort][0]}{' (reversed)' if reverse else ''}  ")
    text.append(time.strftime("%H:%M:%S", time.localtime(fleet.taken_s)), style="dim")
    if fleet.error:
        text.append(f"\n{fleet.error} — retrying", style="bold red")
    return text
