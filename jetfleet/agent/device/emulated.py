"""The emulated board: the twin's physics (``twin_model``) plus what makes a board a board — a
current mode, a clock, noise, warm-up, board-to-board variation, a power sensor with its own
update rate, and time acceleration.

Clock: the board's clock is the wall clock plus an offset. When accelerated work of D seconds
takes D/speed wall seconds, the offset grows by the difference, so timestamps are those a real
board would have produced; with ``speed=math.inf`` work takes no wall time at all.
Everything random comes from ``numpy.random.default_rng`` keyed by (seed, what, index), so the
same seed replays the same run.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from jetfleet.agent.device.base import BoardInfo, Device, MinibatchCallback, RunResult, TelemetrySample
from jetfleet.agent.device.twin_model import Steady, idle_state, steady_state
from jetfleet.agent.workloads.registry import check_run_args, get_workload
from jetfleet.shared.catalog import Catalog, PowerMode, get_catalog

SETUP_S = 2.5               # model build and DataLoader start-up before the first minibatch
WARMUP_MINIBATCHES = 5      # cuDNN autotuning, allocator growth: the first minibatches run slower
WARMUP_EXTRA = 1.2          # first minibatch takes (1 + WARMUP_EXTRA) x steady, decaying
TIME_JITTER = 0.03          # per-minibatch log-normal sigma
POWER_NOISE = 0.025         # per-sensor-reading relative sigma per rail
SENSOR_PERIOD_S = 0.05      # INA3221 conversion/averaging window: readings are held this long
BOARD_TIME_SIGMA = 0.02     # board-to-board variation of one model
BOARD_POWER_SIGMA = 0.03
AMBIENT_C = 30.0
THERMAL_C_PER_W = 0.55


@dataclass(frozen=True)
class _Segment:
    """A run on the board's clock: setup, then minibatches ending at ``ends``."""

    start_s: float
    work_start_s: float
    ends: tuple[float, ...]
    steady: Steady
    mode: PowerMode


@lru_cache(maxsize=65536)
def _steady(model: str, workload: str, mode: PowerMode, minibatch_size: int, workers: int) -> Steady:
    return steady_state(get_catalog(model), get_workload(workload), mode, minibatch_size=minibatch_size,
                        workers=workers)


@lru_cache(maxsize=4096)
def _idle(model: str, mode: PowerMode) -> Steady:
    return idle_state(get_catalog(model), mode)


class EmulatedBoard(Device):
    cheap_io = True  # sampling and mode changes take microseconds: no worker thread needed

    def __init__(self, model: str, seed: int = 0, *, speed: float = math.inf,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
                 catalog: Catalog | None = None) -> None:
        if not (speed > 0):
            raise ValueError(f"speed must be > 0 (math.inf for instant), got {speed}")
        self.catalog = catalog or get_catalog(model)
        self.model = self.catalog.model
        self.seed = seed
        self.speed = speed
        self._clock, self._sleep = clock, sleep
        self._offset = 0.0
        self._lock = threading.Lock()
        self._mode = self.catalog.maxn
        self._segments: list[_Segment] = []
        self._runs = 0
        rng = np.random.default_rng([seed, 1])
        self.time_factor = float(np.clip(rng.normal(1.0, BOARD_TIME_SIGMA), 0.94, 1.06))
        self.power_factor = float(np.clip(rng.normal(1.0, BOARD_POWER_SIGMA), 0.91, 1.09))
        self.serial = f"EMU-{self.model}-{seed:04d}"

    # --- Device ------------------------------------------------------------------------------
    def describe(self) -> BoardInfo:
        return BoardInfo(model=self.model, serial=self.serial,
                         software={"l4t": "emulated", "twin": "1", "jetfleet": _version()},
                         catalog=self.catalog, emulated=True)

    def now_s(self) -> float:
        return self._clock() + self._offset

    def read_mode(self) -> PowerMode:
        return self._mode

    def _write_mode(self, mode: PowerMode) -> None:
        with self._lock:
            self._mode = mode

    def run_minibatches(self, workload: str, n: int, *, minibatch_size: int = 16, workers: int = 4,
                        on_minibatch: MinibatchCallback | None = None) -> RunResult:
        spec = get_workload(workload)
        check_run_args(n, minibatch_size, workers)
        mode = self._mode
        steady = _steady(self.model, spec.name, mode, minibatch_size, workers)
        with self._lock:
            self._runs += 1
            run = self._runs
        times = self.minibatch_times(steady, n, run)
        start = self.now_s()
        work_start = start + SETUP_S
        seg = _Segment(start, work_start, tuple(work_start + np.cumsum(times)), steady, mode)
        with self._lock:
            self._segments = [s for s in self._segments if s.ends[-1] > start - 600.0] + [seg]
        self._advance(SETUP_S)
        done = 0
        try:
            for i, t in enumerate(times):
                self._advance(float(t))
                done = i + 1
                if on_minibatch is not None and on_minibatch(i, float(t)):
                    break
        finally:
            if done < n:  # stopped early (asked to, or cancelled): the board is idle after the last one
                ends = seg.ends[:done] or (work_start,)
                with self._lock:
                    self._segments[self._segments.index(seg)] = _Segment(start, work_start, ends, steady, mode)
        kept = [float(t) for t in times[:done]]
        return RunResult(spec.name, kept, work_start, work_start + float(np.sum(times[:done])))

    def minibatch_times(self, steady: Steady, n: int, run: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, 2, run])
        base = steady.minibatch_s * self.time_factor
        warm = 1.0 + WARMUP_EXTRA * np.exp(-np.arange(n) / (WARMUP_MINIBATCHES / 3.0))
        warm[WARMUP_MINIBATCHES:] = 1.0
        jitter = rng.lognormal(0.0, TIME_JITTER, n)
        result: np.ndarray = base * warm * jitter
        return result

    def _advance(self, dt: float) -> None:
        """Let ``dt`` seconds of board time pass, taking dt/speed of wall time."""
        wall = 0.0 if math.isinf(self.speed) else dt / self.speed
        if wall > 0:
            self._sleep(wall)
        with self._lock:
            self._offset += dt - wall

    def sample(self) -> TelemetrySample:
        return self.sample_at(self.now_s())

    # --- the sensor ------------------------------------------------------------------------------
    def _state_at(self, t: float, segments: list[_Segment], mode: PowerMode) -> tuple[Steady, PowerMode, bool]:
        """The board's state at ``t`` given a snapshot of its runs and its current mode."""
        for seg in reversed(segments):
            if seg.work_start_s <= t <= seg.ends[-1]:
                return seg.steady, seg.mode, True
            if seg.start_s <= t < seg.work_start_s:
                return _idle(self.model, seg.mode), seg.mode, False
        return _idle(self.model, mode), mode, False

    def sample_at(self, t: float) -> TelemetrySample:
        """What the sensors report at board time ``t`` (held for SENSOR_PERIOD_S per reading)."""
        return self.trace(t, t, 1.0)[0]

    def trace(self, t0: float, t1: float, period_s: float) -> list[TelemetrySample]:
        """The samples a sampler every ``period_s`` would have taken from t0 to t1 (noise vectorised)."""
        n = max(1, int(math.floor((t1 - t0) / period_s + 1e-9)) + 1)
        times = t0 + period_s * np.arange(n)
        ticks = np.floor(times / SENSOR_PERIOD_S).astype(np.int64)
        out: list[TelemetrySample] = []
        with self._lock:  # one snapshot for the whole trace, not one per sample
            segments, current = list(self._segments), self._mode
        states = [self._state_at(float(t), segments, current) for t in times]
        labels = list(states[0][0].rails_w)
        noise = _gauss(self.seed, ticks, len(labels) + 2) * POWER_NOISE
        bases: dict[int, np.ndarray] = {}  # rail powers per steady state (a trace spans one or two)
        for i, (steady, mode, busy) in enumerate(states):
            base = bases.get(id(steady))
            if base is None:
                base = bases[id(steady)] = np.fromiter(steady.rails_w.values(), float, len(labels)) * self.power_factor
            values = np.maximum(0.0, base * (1.0 + noise[i, :-2]))
            rails = dict(zip(labels, values.tolist(), strict=True))
            total = self.catalog.total_power_w(rails)
            temp = AMBIENT_C + THERMAL_C_PER_W * total
            out.append(TelemetrySample(
                t_s=float(times[i]), rails_w=rails, total_w=total, cpu_mhz=mode.cpu_mhz,
                gpu_mhz=mode.gpu_mhz, mem_mhz=mode.mem_mhz, cores_online=mode.cores,
                temps_c={"cpu": round(temp, 2), "gpu": round(temp + 1.5, 2), "soc": round(temp - 1.0, 2)},
                cpu_util=min(1.0, steady.cpu_util * (1.0 + float(noise[i, -1]))) if busy else 0.03,
                gpu_util=min(1.0, steady.gpu_util * (1.0 + float(noise[i, -2]))) if busy else 0.0))
        return out


def _gauss(seed: int, ticks: np.ndarray, k: int) -> np.ndarray:
    """Standard normals keyed by (seed, tick, column): a counter-based generator (splitmix64 +
    Box-Muller), so a reading at a given tick is the same whoever asks and in whatever order."""
    cols = np.arange(2 * k, dtype=np.uint64)
    with np.errstate(over="ignore"):  # wrap-around multiplication is the point of the hash
        x = (ticks.astype(np.uint64)[:, None] * np.uint64(0x9E3779B97F4A7C15)
             + np.uint64(seed & 0xFFFFFFFF) * np.uint64(0xBF58476D1CE4E5B9)
             + cols[None, :] * np.uint64(0x94D049BB133111EB))
        x ^= x >> np.uint64(30)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    u = (x >> np.uint64(11)).astype(np.float64) / float(1 << 53)
    u1 = np.clip(u[:, :k], 1e-12, 1.0)
    u2 = u[:, k:]
    result: np.ndarray = np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)
    return result


@lru_cache(maxsize=1)
def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jetfleet")
    except PackageNotFoundError:
        return "dev"
