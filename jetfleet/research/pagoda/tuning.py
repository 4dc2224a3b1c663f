"""Inference energy tuning (issue 16): the mode with the least energy per inference under a latency bound,
against MAXN and against the boards' default DVFS governors, on emulated boards.

For a board, a workload and a batch size:
- MAXN: measured on the twin (a seeded board, its variation and noise: ``measure_inference_on_twin``).
- DVFS: the mode the default governors settle in (``jetfleet.twin.governor``), measured the same way.
- Pagoda's choice: every mode of the grid gets its rooflines measured (the ERT kernels through the agent's
  ``jetfleet.agent.roofline``, as on a board) and the workload's W and Q per batch placed on them; MAXN and
  ``FIT_MODES`` random modes are measured and a latency model (``LatencyModel``: roofline time plus the host's
  share) and the energy roofline's power (one scale) fitted; the ``CANDIDATES`` modes predicted to use the least
  energy within the bound are measured, the model refitted, ``ROUNDS`` times; then a measured descent, one knob
  one grid step at a time from the best so far, while a step saves energy within the bound. The least measured
  energy that meets the bound measured wins: at most ``MAX_RUNS`` runs instead of the whole grid.
- The oracle: the twin's noiseless steady state over every mode of the grid (what exhaustive profiling would
  find), to say how far the choice is from the best.
Energy per inference = board power x batch latency / batch size.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from typing import Any, Callable

from jetfleet.agent.roofline import measure as measure_roofline
from jetfleet.shared.catalog import Catalog, PowerMode, get_catalog
from jetfleet.shared.roofline import EnergyFit, fit_energy, roofline_time_s, workload_cost
from jetfleet.shared.workloads import characterisation
from jetfleet.shared.workloads.inference import inference_characterisation
from jetfleet.twin.board import EmulatedBoard
from jetfleet.twin.governor import governed_mode
from jetfleet.twin.inference import inference_state
from jetfleet.twin.measure import measure_inference_on_twin

CANDIDATES = 6          # modes measured per round among the predicted best
ROUNDS = 3
MAX_RUNS = 45          # measured runs per choice, at most (MAXN included)
FIT_MODES = 12          # random modes measured to fit the latency model (with MAXN)
PREDICTED_MARGIN = 1.10  # candidates: predicted latency within this much of the bound (the measurement decides)
MEASURE_BATCHES = 40
# Fulcrum's and Pagoda's AGX Orin inference grid (ARCHITECTURE §8): 441 modes.
ORIN_GRID = {"cores": (4, 8, 12), "cpu_mhz": (422.4, 729.6, 1036.8, 1344, 1651.2, 1958.4, 2201.6),
             "gpu_mhz": (114.75, 318.75, 522.75, 726.75, 930.75, 1134.75, 1300.5), "mem_mhz": (665.6, 2133, 3199)}


def inference_grid(catalog: Catalog) -> list[PowerMode]:
    """The modes tuned over: AGX Orin's 441-mode grid; on other boards every CPU x GPU x EMC frequency with every
    core online (the Stony Brook study tuned frequencies, not cores)."""
    if catalog.model == "agx-orin":
        g = ORIN_GRID
        return [PowerMode(int(c), a, b, m) for c in g["cores"] for a in g["cpu_mhz"] for b in g["gpu_mhz"]
                for m in g["mem_mhz"]]
    cores = max(catalog.cores)
    return [PowerMode(cores, a, b, m) for a in catalog.cpu_mhz for b in catalog.gpu_mhz for m in catalog.mem_mhz]


@dataclass(frozen=True)
class Roof:
    """One mode's measured rooflines and fitted energy constants."""

    mode: PowerMode
    peak_flops: float
    peak_bytes_per_s: float
    fit: EnergyFit
    idle_w: float

    def as_point(self, catalog: Catalog) -> dict[str, Any]:
        """A row the roofline plots read."""
        return {"mode": str(self.mode), "mode_name": catalog.preset_name(self.mode) or "",
                "peak_flops": self.peak_flops, "peak_bytes_per_s": self.peak_bytes_per_s,
                "eps_flop_j": self.fit.eps_flop_j, "eps_byte_j": self.fit.eps_byte_j, "pi0_w": self.fit.pi0_w}


def measure_roofs(board: EmulatedBoard, modes: list[PowerMode], seconds: float = 1.0) -> dict[PowerMode, Roof]:
    """Every mode's rooflines, measured on ``board`` the way the agent measures them."""
    out = {}
    for mode in modes:
        r = measure_roofline(board, mode, seconds)
        fit = fit_energy(idle_w=r.idle_w, compute_w=r.compute_w, memory_w=r.memory_w, peak_flops=r.peak_flops,
                         compute_bytes_per_s=r.compute_bytes_per_s, peak_bytes_per_s=r.peak_bytes_per_s,
                         memory_flops=r.memory_flops)
        out[mode] = Roof(mode, r.peak_flops, r.peak_bytes_per_s, fit, r.idle_w)
    return out


@dataclass(frozen=True)
class Observed:
    """A mode as measured (or as the oracle sees it): latency per batch, power, energy per inference."""

    mode: str
    latency_s: float
    power_w: float
    energy_j: float        # per inference


def observe(board: EmulatedBoard, workload: str, mode: PowerMode, batch_size: int) -> Observed:
    """A measured run of ``MEASURE_BATCHES`` batches in ``mode`` (median latency, mean power)."""
    m = measure_inference_on_twin(board, workload, mode, MEASURE_BATCHES, batch_size=batch_size)
    t, p = m.summary.minibatch_time_median_ms / 1e3, m.summary.power_mean_w
    return Observed(str(mode), t, p, p * t / batch_size)


def expected(board: EmulatedBoard, workload: str, mode: PowerMode, batch_size: int) -> Observed:
    """The twin's noiseless steady state of this board in ``mode`` (the oracle's view)."""
    t, p = board.expected_inference(workload, mode, batch_size=batch_size)
    return Observed(str(mode), t, p, p * t / batch_size)


@dataclass(frozen=True)
class Tuned:
    """One (board, workload, batch size, latency bound): the baselines, the choice and the oracle."""

    board_model: str
    workload: str
    batch_size: int
    bound: float                 # latency bound as a multiple of MAXN's measured latency (inf: none)
    maxn: Observed
    dvfs: Observed
    chosen: Observed
    oracle: Observed
    measured_modes: int          # runs the choice took (MAXN included)

    def saving(self, of: Observed, vs: Observed) -> float:
        """Energy saved by ``of`` relative to ``vs`` (0.15 = 15% less)."""
        return 1.0 - of.energy_j / vs.energy_j

    def to_dict(self) -> dict[str, Any]:
        """Every figure as a plain dict (with the savings and latency ratios), for the report's JSON."""
        return {"board_model": self.board_model, "workload": self.workload, "batch_size": self.batch_size,
                "bound": None if math.isinf(self.bound) else self.bound,
                **{k: getattr(self, k).__dict__ for k in ("maxn", "dvfs", "chosen", "oracle")},
                "measured_modes": self.measured_modes,
                "chosen_saving_vs_maxn": self.saving(self.chosen, self.maxn),
                "chosen_saving_vs_dvfs": self.saving(self.chosen, self.dvfs),
                "chosen_latency_vs_maxn": self.chosen.latency_s / self.maxn.latency_s,
                "oracle_saving_vs_maxn": self.saving(self.oracle, self.maxn),
                "oracle_saving_vs_dvfs": self.saving(self.oracle, self.dvfs),
                "oracle_latency_vs_maxn": self.oracle.latency_s / self.maxn.latency_s}


@dataclass(frozen=True)
class LatencyModel:
    """Latency per batch from the rooflines plus the host's share: T = a x T_roof(mode) + b / f_cpu + c,
    fitted by relative least squares on the measured modes (the roofline alone leaves out kernel launches and the
    serving thread's work, which scale with the CPU clock). Power from the energy roofline's constants:
    P = (eps_flop W + eps_byte Q) / T + pi0, scaled by one factor fitted on the same modes."""

    a: float
    b: float
    c: float
    w: float
    q: float

    @classmethod
    def fit(cls, roofs: dict[PowerMode, Roof], measured: dict[PowerMode, Observed], w: float, q: float) -> LatencyModel:
        """Relative least squares on the measured modes, each term kept non-negative."""
        import numpy as np

        rows = [(roofline_time_s(w, q, roofs[m].peak_flops, roofs[m].peak_bytes_per_s), 1000.0 / m.cpu_mhz, 1.0,
                 o.latency_s) for m, o in measured.items() if m in roofs]
        # Relative least squares (each row divided by its latency): the fast modes near the bound matter, not
        # the slowest ones, which plain least squares would fit at their expense.
        y0 = np.array([r[3] for r in rows])
        x = np.array([r[:3] for r in rows]) / y0[:, None]
        y = np.ones_like(y0)
        coef = np.linalg.lstsq(x, y, rcond=None)[0]
        if coef[0] < 0:      # keep the physics: neither term may speed things up
            b, c = np.linalg.lstsq(x[:, [1, 2]], y, rcond=None)[0]
            coef = (0.0, b, c)
        elif coef[1] < 0:
            a, c = np.linalg.lstsq(x[:, [0, 2]], y, rcond=None)[0]
            coef = (a, 0.0, c)
        return cls(float(coef[0]), float(coef[1]), float(coef[2]), w, q)

    def latency_s(self, r: Roof) -> float:
        """Predicted seconds per batch in ``r``'s mode."""
        t = roofline_time_s(self.w, self.q, r.peak_flops, r.peak_bytes_per_s)
        return max(1e-6, self.a * t + self.b * 1000.0 / r.mode.cpu_mhz + self.c)

    @staticmethod
    def power_w(r: Roof, latency_s: float, w: float, q: float, batch_size: int) -> float:
        """Board power from the energy roofline at a given latency (before the fitted scale)."""
        return (r.fit.eps_flop_j * w + r.fit.eps_byte_j * q) / latency_s + r.fit.pi0_w


def tune(board: EmulatedBoard, workload: str, batch_size: int, bound: float, roofs: dict[PowerMode, Roof],
         oracle_cache: dict[Any, Observed] | None = None) -> Tuned:
    """The least-energy mode of ``roofs``' modes whose latency is at most ``bound`` x MAXN's (this module's
    docstring), with MAXN, DVFS and the oracle beside it."""
    cat = board.catalog
    cost = inference_characterisation(workload)
    w, q = workload_cost(characterisation(workload), batch_size, "inference", cost)
    maxn = observe(board, workload, cat.maxn, batch_size)
    dvfs_mode = governed_mode(get_catalog(cat.model), lambda m: inference_state(get_catalog(cat.model), m, cost,
                                                                                  batch_size))
    dvfs = observe(board, workload, dvfs_mode, batch_size)
    limit = bound * maxn.latency_s
    measured: dict[PowerMode, Observed] = {cat.maxn: maxn}
    rng = random.Random(f"{cat.model}/{workload}/{batch_size}")
    modes = list(roofs)
    for mode in rng.sample(modes, min(FIT_MODES, len(modes))):
        measured.setdefault(mode, observe(board, workload, mode, batch_size))
    for _round in range(ROUNDS):      # fit, measure the predicted best, refit with them (more data near the bound)
        model = LatencyModel.fit(roofs, measured, w, q)
        power_scale = statistics.median(o.power_w / model.power_w(roofs[m], o.latency_s, w, q, batch_size)
                                        for m, o in measured.items() if m in roofs)
        ranked = sorted((power_scale * model.power_w(r, t, w, q, batch_size) * t / batch_size, m)
                        for m, r in roofs.items() for t in [model.latency_s(r)]
                        if t <= limit * PREDICTED_MARGIN and m not in measured)
        for _e, mode in ranked[:CANDIDATES]:
            measured[mode] = observe(board, workload, mode, batch_size)
    best = min((o for o in measured.values() if o.latency_s <= limit), key=lambda o: o.energy_j, default=maxn)
    # Then step down from the best measured mode, one knob one grid step at a time, while a step saves
    # energy within the bound (each step's neighbours measured): the predictions miss where host and GPU
    # time overlap (a max, not a sum), and a few measured steps recover what they miss.
    values = {k: sorted({getattr(m, k) for m in modes}) for k in ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz")}
    current = cat.parse_mode(best.mode)
    while len(measured) < MAX_RUNS:
        step = None
        for knob, vals in values.items():
            i = vals.index(getattr(current, knob))
            if i == 0:
                continue
            nxt = PowerMode(**{**current.__dict__, knob: vals[i - 1]})
            if nxt not in roofs:
                continue
            if nxt not in measured:
                if len(measured) >= MAX_RUNS:
                    break
                measured[nxt] = observe(board, workload, nxt, batch_size)
            o = measured[nxt]
            if o.latency_s <= limit and o.energy_j < best.energy_j and (step is None or o.energy_j < step[1].energy_j):
                step = (nxt, o)
        if step is None:
            break
        current, best = step
    runs = len(measured)
    # The oracle: every mode of the grid, noiseless.
    oracle: Observed | None = None
    ref_t = board.expected_inference(workload, cat.maxn, batch_size=batch_size)[0]
    for mode in roofs:
        key = (workload, batch_size, mode)
        seen = oracle_cache.get(key) if oracle_cache is not None else None
        if seen is None:
            seen = expected(board, workload, mode, batch_size)
            if oracle_cache is not None:
                oracle_cache[key] = seen
        if seen.latency_s <= bound * ref_t and (oracle is None or seen.energy_j < oracle.energy_j):
            oracle = seen
    return Tuned(cat.model, workload, batch_size, bound, maxn, dvfs, best, oracle or expected(board, workload, cat.maxn,
                                                                                             batch_size), runs)


def frequency_sweep(board: EmulatedBoard, workload: str, batch_size: int, knob: str) -> list[tuple[float, Observed]]:
    """Energy per inference and latency along one knob (``gpu_mhz`` or ``cpu_mhz``), the others at MAXN."""
    cat = board.catalog
    out = []
    for f in cat.knob_values(knob):
        mode = PowerMode(**{**cat.maxn.__dict__, knob: f})
        out.append((float(f), expected(board, workload, mode, batch_size)))
    return out


def non_monotonic(values: list[float]) -> bool:
    """Whether a sequence has an interior minimum (falls, then rises)."""
    i = min(range(len(values)), key=values.__getitem__)
    return 0 < i < len(values) - 1


Progress = Callable[[int, int, str], None]
