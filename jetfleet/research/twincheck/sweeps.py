"""The twin's inference power held against real GPU-frequency sweeps (issue 26).

The sweeps (``../shared/data/loudva-nx-nano/profiling-nx-nano.csv``, LoudVA, MIT): Triton serving TensorFlow's
Inception v3 on a Xavier NX and a Nano, one client sending batch-1 requests at every GPU frequency (pinned
through devfreq), the CPU and memory clocks left to the board's governors; the mean board power is the energy
per request over the mean latency. The twin does the same: Inception v3 characterised on the meta device
(``inception.forward_cost``), the GPU pinned at each frequency, the CPU and the EMC where the twin's default
governors settle (``twin.governor.governed_mode``), every core online; power is the board's total.

Compared, each with a stated tolerance (``TOLERANCES``; ``docs/twin.md`` §5d shows the table and
``tests/test_twin_sweeps.py`` keeps it): board power at the lowest and the highest GPU clock of the sweep,
the energy-optimal GPU frequency, the energy per request at the lowest clock over the optimum, and the Xavier
NX's optimal energy per request over the Nano's.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from jetfleet.shared.catalog import get_catalog
from jetfleet.shared.errors import InvalidArgument
from jetfleet.twin.governor import governed_mode
from jetfleet.twin.inference import GRAPH_EFFICIENCY, inference_state

BOARDS = {"NX": "xavier-nx", "Nano": "nano"}     # the file's Directory column -> our board model
COLUMNS = ("Throughput", "Energy", "Latency", "Batch Size", "Frequency", "Directory")
POWER_TOLERANCE = 0.25        # |twin / real - 1| of the board power at the lowest and the highest GPU clock
RATIO_FACTOR = 1.3            # the twin's NX/Nano energy ratio within this factor of the real one
OPTIMUM_STEPS = 2             # the energy-optimal GPU frequency within this many steps of the sweep's
LOW_CLOCK_TOLERANCE = 0.30    # |twin / real - 1| of (energy at the lowest clock / energy at the optimum)


@dataclass(frozen=True)
class SweepPoint:
    """One GPU frequency of a sweep: latency (s) and energy (J) per request, and the mean board power (W)."""

    gpu_mhz: float
    latency_s: float
    energy_j: float
    power_w: float


@dataclass(frozen=True)
class BoardCheck:
    """A board's sweep, real beside twin: power at both ends of the GPU range, the optimum and the low end."""

    board_model: str
    low_mhz: float
    high_mhz: float
    real_low_w: float
    twin_low_w: float
    real_high_w: float
    twin_high_w: float
    real_optimum_mhz: float
    twin_optimum_mhz: float
    optimum_steps_apart: int
    real_low_over_optimum: float
    twin_low_over_optimum: float
    real_optimum_j: float
    twin_optimum_j: float
    real_latency_high_s: float
    twin_latency_high_s: float

    def failures(self) -> list[str]:
        """Each figure outside its tolerance, said with both values."""
        out = []
        for what, real, twin in (("power at the lowest GPU clock", self.real_low_w, self.twin_low_w),
                                 ("power at the highest GPU clock", self.real_high_w, self.twin_high_w)):
            if abs(twin / real - 1) > POWER_TOLERANCE:
                out.append(f"{self.board_model} {what}: twin {twin:.2f} W vs real {real:.2f} W (tolerance "
                           f"{POWER_TOLERANCE:.0%})")
        if self.optimum_steps_apart > OPTIMUM_STEPS:
            out.append(f"{self.board_model} energy-optimal GPU clock: twin {self.twin_optimum_mhz:g} vs real "
                       f"{self.real_optimum_mhz:g} MHz, {self.optimum_steps_apart} steps apart (tolerance "
                       f"{OPTIMUM_STEPS})")
        if abs(self.twin_low_over_optimum / self.real_low_over_optimum - 1) > LOW_CLOCK_TOLERANCE:
            out.append(f"{self.board_model} energy at the lowest clock over the optimum: twin "
                       f"{self.twin_low_over_optimum:.2f}x vs real {self.real_low_over_optimum:.2f}x (tolerance "
                       f"{LOW_CLOCK_TOLERANCE:.0%})")
        return out


@dataclass(frozen=True)
class SweepCheck:
    """Both boards and the NX/Nano energy ratio at each board's optimum, real beside twin."""

    boards: list[BoardCheck]
    real_nx_over_nano: float
    twin_nx_over_nano: float

    def failures(self) -> list[str]:
        """Every figure outside its tolerance."""
        out = [f for b in self.boards for f in b.failures()]
        ratio = self.twin_nx_over_nano / self.real_nx_over_nano
        if not 1 / RATIO_FACTOR <= ratio <= RATIO_FACTOR:
            out.append(f"NX/Nano energy per request: twin {self.twin_nx_over_nano:.2f} vs real "
                       f"{self.real_nx_over_nano:.2f} (tolerance a factor {RATIO_FACTOR})")
        return out

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data."""
        return asdict(self)


def read_sweeps(text: str, name: str = "sweeps") -> dict[str, list[SweepPoint]]:
    """The batch-1 (one client) rows of the file, by board model, sorted by GPU frequency."""
    rows = list(csv.DictReader(io.StringIO(text)))
    missing = [c for c in COLUMNS if rows and c not in rows[0]] if rows else list(COLUMNS)
    if missing:
        raise InvalidArgument(f"{name}: columns {', '.join(missing)} missing; expected {', '.join(COLUMNS)}",
                              field="sweeps")
    out: dict[str, list[SweepPoint]] = {}
    for line, r in enumerate(rows, start=2):
        if r["Directory"] not in BOARDS or r["Batch Size"].strip() != "1":
            continue
        try:
            latency, energy, freq = float(r["Latency"]), float(r["Energy"]), float(r["Frequency"])
        except ValueError:
            raise InvalidArgument(f"{name} line {line}: Latency, Energy and Frequency must be numbers",
                                  field="sweeps") from None
        if not (latency > 0 and energy > 0 and freq > 0):
            raise InvalidArgument(f"{name} line {line}: Latency, Energy and Frequency must be positive",
                                  field="sweeps")
        out.setdefault(BOARDS[r["Directory"]], []).append(SweepPoint(freq / 1e6, latency, energy, energy / latency))
    if set(out) != set(BOARDS.values()):
        raise InvalidArgument(f"{name}: batch-1 rows of both boards (Directory {' and '.join(BOARDS)}) needed",
                              field="sweeps")
    return {b: sorted(v, key=lambda p: p.gpu_mhz) for b, v in out.items()}


def twin_sweep(board_model: str, gpu_mhz: list[float], cost: Mapping[str, Any]) -> list[SweepPoint]:
    """The twin's batch-1 serving of ``cost`` at each GPU frequency (pinned), CPU and EMC governed."""
    cat = get_catalog(board_model)
    out = []
    for f in gpu_mhz:
        if not any(abs(f - g) < 0.01 for g in cat.gpu_mhz):
            raise InvalidArgument(f"GPU {f:g} MHz is not in {board_model}'s table {list(cat.gpu_mhz)}", field="gpu_mhz")
        mode = governed_mode(cat, lambda m: inference_state(cat, m, cost, 1, efficiency=GRAPH_EFFICIENCY), gpu_mhz=f)
        s = inference_state(cat, mode, cost, 1, efficiency=GRAPH_EFFICIENCY)
        out.append(SweepPoint(f, s.minibatch_s, s.total_w * s.minibatch_s, s.total_w))
    return out


def _optimum(points: list[SweepPoint]) -> SweepPoint:
    return min(points, key=lambda p: p.energy_j)


def check_board(board_model: str, real: list[SweepPoint], cost: Mapping[str, Any]) -> BoardCheck:
    """One board's real sweep beside the twin's at the same GPU frequencies."""
    twin = twin_sweep(board_model, [p.gpu_mhz for p in real], cost)
    ro, to = _optimum(real), _optimum(twin)
    freqs = [p.gpu_mhz for p in real]
    return BoardCheck(board_model, real[0].gpu_mhz, real[-1].gpu_mhz, real[0].power_w, twin[0].power_w,
                      real[-1].power_w, twin[-1].power_w, ro.gpu_mhz, to.gpu_mhz,
                      abs(freqs.index(ro.gpu_mhz) - freqs.index(to.gpu_mhz)), real[0].energy_j / ro.energy_j,
                      twin[0].energy_j / to.energy_j, ro.energy_j, to.energy_j, real[-1].latency_s,
                      twin[-1].latency_s)


def check_sweeps(text: str, cost: Mapping[str, Any], name: str = "sweeps") -> SweepCheck:
    """Both boards of the sweep file against the twin serving ``cost`` (Inception v3's forward pass)."""
    real = read_sweeps(text, name)
    boards = [check_board(b, real[b], cost) for b in ("xavier-nx", "nano")]
    nx, nano = boards
    return SweepCheck(boards, nx.real_optimum_j / nano.real_optimum_j, nx.twin_optimum_j / nano.twin_optimum_j)


def markdown(c: SweepCheck) -> str:
    """The side-by-side table of ``docs/twin.md`` §5d."""
    def pct(twin: float, real: float) -> str:
        return f"{(twin / real - 1) * 100:+.0f}%"

    lines = ["| board | figure | real | twin | diff | tolerance |", "|---|---|---|---|---|---|"]
    for b in c.boards:
        lines += [
            f"| {b.board_model} | power at the lowest GPU clock ({b.low_mhz:g} MHz) | {b.real_low_w:.2f} W | "
            f"{b.twin_low_w:.2f} W | {pct(b.twin_low_w, b.real_low_w)} | ±{POWER_TOLERANCE:.0%} |",
            f"| {b.board_model} | power at the highest GPU clock ({b.high_mhz:g} MHz) | {b.real_high_w:.2f} W | "
            f"{b.twin_high_w:.2f} W | {pct(b.twin_high_w, b.real_high_w)} | ±{POWER_TOLERANCE:.0%} |",
            f"| {b.board_model} | energy-optimal GPU clock | {b.real_optimum_mhz:g} MHz | {b.twin_optimum_mhz:g} MHz | "
            f"{b.optimum_steps_apart} steps | ≤ {OPTIMUM_STEPS} steps |",
            f"| {b.board_model} | energy at the lowest clock / optimum | {b.real_low_over_optimum:.2f}x | "
            f"{b.twin_low_over_optimum:.2f}x | {pct(b.twin_low_over_optimum, b.real_low_over_optimum)} | "
            f"±{LOW_CLOCK_TOLERANCE:.0%} |",
            f"| {b.board_model} | energy per request at the optimum | {b.real_optimum_j:.3f} J | {b.twin_optimum_j:.3f} J "
            f"| {pct(b.twin_optimum_j, b.real_optimum_j)} | — |",
            f"| {b.board_model} | latency at the highest GPU clock | {b.real_latency_high_s * 1e3:.1f} ms | "
            f"{b.twin_latency_high_s * 1e3:.1f} ms | {pct(b.twin_latency_high_s, b.real_latency_high_s)} | — |"]
    ratio = c.twin_nx_over_nano / c.real_nx_over_nano
    lines.append(f"| NX / Nano | energy per request at each one's optimum | {c.real_nx_over_nano:.2f} | "
                 f"{c.twin_nx_over_nano:.2f} | x{ratio:.2f} | within x{RATIO_FACTOR} |")
    return "\n".join(lines)

