"""The emulated board: the twin's physics (``physics.py``) plus what makes a board a board — a
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
import platform
import threading
import time
from array import array
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from jetfleet.agent.device.base import (
    BoardInfo,
    Capabilities,
    ConcurrentSteps,
    Device,
    KernelRun,
    MinibatchCallback,
    RunResult,
    TelemetrySample,
)
from jetfleet.agent.trace import PowerTrace
from jetfleet.shared import defaults
from jetfleet.shared.catalog import Catalog, PowerMode, Rail, builtin_catalogs, get_catalog
from jetfleet.shared.errors import InvalidArgument
from jetfleet.shared.workloads import WORKLOADS, WorkloadRegistry, WorkloadSpec, check_run_args, get_workload
from jetfleet.shared.workloads.inference import check_batch_size
from jetfleet.twin.inference import inference_state
from jetfleet.twin.physics import Steady, idle_state, kernel_state, spinning_state, steady_state

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
TEMP_SENSORS = ("cpu", "gpu", "soc")   # at the board's power-driven temperature + 0, +1.5, -1.0 C


@dataclass(frozen=True)
class _Segment:
    """A run on the board's clock: setup, then minibatches ending at ``ends``."""

    start_s: float
    work_start_s: float
    ends: tuple[float, ...]
    steady: Steady
    mode: PowerMode


@lru_cache(maxsize=65536)
def _builtin_steady(model: str, workload: str, mode: PowerMode, minibatch_size: int, workers: int) -> Steady:
    return steady_state(get_catalog(model), get_workload(workload), mode, minibatch_size=minibatch_size,
                        workers=workers)


@lru_cache(maxsize=4096)
def _idle(model: str, mode: PowerMode) -> Steady:
    return idle_state(get_catalog(model), mode)


class EmulatedBoard(Device):
    """One emulated board of a model; ``seed`` picks the board (its variation) and its noise.

    ``catalog``: the modes this board offers, when they differ from its model's (a board whose tables
    lack a frequency, as real boards' may). The board accepts only those modes; its physics is its
    model's (the same silicon: voltages along the model's full frequency tables), so the model must be
    built in."""

    capabilities = Capabilities(cheap_io=True, power_trace=True, emulated_steps=True)

    def __init__(self, model: str, seed: int = 0, *, speed: float = math.inf,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
                 catalog: Catalog | None = None, workloads: WorkloadRegistry | None = None) -> None:
        if not (speed > 0):
            raise ValueError(f"speed must be > 0 (math.inf for instant), got {speed}")
        self.catalog = catalog or get_catalog(model)
        self.model = self.catalog.model
        if self.model not in builtin_catalogs():
            raise ValueError(f"the twin emulates built-in board models only ({', '.join(sorted(builtin_catalogs()))}); "
                             f"got {self.model!r}")
        full = get_catalog(self.model)
        for knob in ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz"):
            extra = set(self.catalog.knob_values(knob)) - set(full.knob_values(knob))
            if extra:
                raise ValueError(f"catalog {knob} values {sorted(extra)} are not {self.model}'s")
        self.seed = seed
        self.speed = speed
        self._clock, self._sleep = clock, sleep
        self._offset = 0.0
        self._lock = threading.Lock()
        maxn = self.catalog.maxn
        try:
            self._mode = self.catalog.validate(maxn)
        except InvalidArgument:  # a narrower board without its model's MAXN starts at its own fastest mode
            self._mode = PowerMode(*(max(self.catalog.knob_values(k)) for k in ("cores", "cpu_mhz", "gpu_mhz",
                                                                               "mem_mhz")))  # type: ignore[arg-type]
        self._segments: list[_Segment] = []
        self._runs = 0
        rng = np.random.default_rng([seed, 1])
        self.time_factor = float(np.clip(rng.normal(1.0, BOARD_TIME_SIGMA), 0.94, 1.06))
        self.power_factor = float(np.clip(rng.normal(1.0, BOARD_POWER_SIGMA), 0.91, 1.09))
        self.serial = f"EMU-{self.model}-{seed:04d}"
        self.workloads = workloads or WorkloadRegistry.builtin()   # the built-ins plus this board's plugins
        self._plugin_steady: dict[tuple[str, PowerMode, int, int], Steady] = {}

    # --- Device ------------------------------------------------------------------------------
    def describe(self) -> BoardInfo:
        """The emulated board's identity: model, serial EMU-MODEL-SEED, software versions, catalog."""
        return BoardInfo(model=self.model, serial=self.serial,
                         software={"l4t": "emulated", "twin": "1", "jetfleet": _version(),
                                   "python": platform.python_version()},
                         catalog=self.catalog, emulated=True, speed=self.speed)

    def now_s(self) -> float:
        """The board's clock: the wall clock plus the time accelerated work skipped."""
        return self._clock() + self._offset

    def read_mode(self) -> PowerMode:
        """The mode last applied (MAXN at first)."""
        return self._mode

    def _write_mode(self, mode: PowerMode) -> None:
        with self._lock:
            self._mode = mode

    def run_minibatches(self, workload: str, n: int, *, minibatch_size: int = defaults.MINIBATCH_SIZE,
                        workers: int = defaults.WORKERS, on_minibatch: MinibatchCallback | None = None) -> RunResult:
        """Run ``n`` minibatches on the board's clock (setup, warm-up, jitter), taking 1/speed of it in wall time.

        A mode applied while it runs takes effect from the next minibatch (a job's closed loop steps the
        mode without stopping training): the run continues as a new segment at the new mode's pace and power."""
        spec = self.workloads.get(workload)
        check_run_args(n, minibatch_size, workers)
        return self._run(spec.name, n, lambda m: self._steady(spec.name, m, minibatch_size, workers), SETUP_S,
                         on_minibatch)

    def run_inference(self, workload: str, n: int, *, batch_size: int = 1,
                      on_batch: MinibatchCallback | None = None) -> RunResult:
        """Serve ``n`` forward passes of ``batch_size`` requests back to back (fewer if ``on_batch`` returns True),
        on the board's clock with the same warm-up, jitter and mid-run mode changes as training; each entry
        of ``minibatch_times_s`` is one batch's latency. The model is loaded already (a serving process keeps
        it), so there is no start-up time."""
        check_batch_size(batch_size)
        check_run_args(n, 1, 0)
        self.workloads.inference_characterisation(workload)
        return self._run(workload, n, lambda m: self._inference_steady(workload, m, batch_size), 0.0, on_batch)

    def expected_inference(self, workload: str, mode: PowerMode, *, batch_size: int = 1) -> tuple[float, float]:
        """This board's noiseless steady state serving ``workload`` in ``mode``: (seconds per forward pass of
        ``batch_size`` requests, board power W while passes run back to back), board variation included."""
        check_batch_size(batch_size)
        steady = self._inference_steady(workload, self.catalog.validate(mode), batch_size)
        return steady.minibatch_s * self.time_factor, steady.total_w * self.power_factor

    def step_inference(self, workload: str, n: int) -> float:
        """One forward pass of ``n`` requests inside a running concurrent session (model loaded and warm): its
        seconds on the board's clock (jitter, no warm-up), recorded for the power sensor."""
        check_batch_size(n)
        return self._run(workload, 1, lambda m: self._inference_steady(workload, m, n), 0.0, None,
                         warm=False).minibatch_times_s[0]

    def step_training(self, workload: str, *, minibatch_size: int = defaults.MINIBATCH_SIZE,
                      workers: int = defaults.WORKERS, steps: int = 1) -> float:
        """``steps`` training minibatches inside a running loop (loader started, warm; a concurrent session's, or a
        training process's reported steps): their seconds."""
        spec = self.workloads.get(workload)
        check_run_args(steps, minibatch_size, workers)
        return sum(self._run(spec.name, steps, lambda m: self._steady(spec.name, m, minibatch_size, workers), 0.0,
                             None, warm=False).minibatch_times_s)

    def emulated_workload(self, name: str) -> WorkloadSpec | None:
        """The spec of ``name`` if this board offers it (a built-in, a plugin, a session's own model)."""
        return self.workloads.get(name) if name in self.workloads.names() else None

    def add_workload(self, spec: WorkloadSpec, cost: Mapping[str, Any]) -> None:
        """Offer an operator's own model (a training session's, characterised in its process) for
        ``step_training``; the same name again must come with the same cost (InvalidArgument otherwise)."""
        if spec.name not in self.workloads.names():
            self.workloads = self.workloads.with_plugin(spec, cost)
            return
        known = self.workloads.get(spec.name)
        if known != spec or self.workloads.characterisation(spec.name) != dict(cost):
            raise InvalidArgument(f"workload {spec.name!r} is on this board already with another model or cost: "
                                  "name your training differently", field="workload")

    def open_concurrent(self, training: str, inference: str, *, minibatch_size: int = defaults.MINIBATCH_SIZE,
                        workers: int = defaults.WORKERS) -> ConcurrentSteps:
        """A concurrent session on the twin: each step takes its (jittered) time on the board's clock."""
        self.workloads.get(training)
        self.workloads.inference_characterisation(inference)
        check_run_args(1, minibatch_size, workers)
        return _TwinSteps(self, training, inference, minibatch_size, workers)

    def wait(self, seconds: float) -> None:
        """Let ``seconds`` of idle board time pass (accelerated like work: a scheduler waiting for requests)."""
        if seconds > 0:
            self._advance(seconds)

    def idle_power_w(self, mode: PowerMode) -> float:
        """This board's noiseless power in ``mode`` with nothing running (W)."""
        return _idle(self.model, self.catalog.validate(mode)).total_w * self.power_factor

    def _inference_steady(self, workload: str, mode: PowerMode, batch_size: int) -> Steady:
        key = ("inference:" + workload, mode, batch_size, 0)
        steady = self._plugin_steady.get(key)
        if steady is None:
            if len(self._plugin_steady) > 65536:
                self._plugin_steady.clear()
            steady = self._plugin_steady[key] = inference_state(
                get_catalog(self.model), mode, self.workloads.inference_characterisation(workload), batch_size)
        return steady

    def _run(self, name: str, n: int, steady_of: Callable[[PowerMode], Steady], setup_s: float,
             on_step: MinibatchCallback | None, *, warm: bool = True) -> RunResult:
        """``n`` steps (minibatches or forward passes) at ``steady_of(mode)``'s pace, re-read when the mode changes."""
        mode = self._mode
        steady = steady_of(mode)
        with self._lock:
            self._runs += 1
            run = self._runs
        factors = self._factors(n, run, warm)
        times = steady.minibatch_s * self.time_factor * factors
        start = self.now_s()
        work_start = start + setup_s
        seg = _Segment(start, work_start, tuple(work_start + np.cumsum(times)), steady, mode)
        first = 0       # the run's first minibatch in ``seg``
        with self._lock:
            self._segments = [s for s in self._segments if s.ends[-1] > start - 600.0] + [seg]
        self._advance(setup_s)
        done = 0
        try:
            for i in range(n):
                if self._mode != seg.mode:   # stepped between minibatches: a new segment from here
                    mode = self._mode
                    steady = steady_of(mode)
                    times[i:] = steady.minibatch_s * self.time_factor * factors[i:]
                    now = seg.ends[i - first - 1] if i > first else seg.work_start_s
                    nxt = _Segment(now, now, tuple(now + np.cumsum(times[i:])), steady, mode)
                    self._replace(seg, _Segment(seg.start_s, seg.work_start_s, seg.ends[:i - first] or (now,),
                                                seg.steady, seg.mode), nxt)
                    seg, first = nxt, i
                self._advance(float(times[i]))
                done = i + 1
                if on_step is not None and on_step(i, float(times[i])):
                    break
        finally:
            if done < n:  # stopped early (asked to, or cancelled): the board is idle after the last one
                ends = seg.ends[:done - first] or (seg.work_start_s,)
                self._replace(seg, _Segment(seg.start_s, seg.work_start_s, ends, seg.steady, seg.mode))
        kept = [float(t) for t in times[:done]]
        return RunResult(name, kept, work_start, work_start + float(np.sum(times[:done])))

    def run_kernel(self, kernel: str, seconds: float) -> KernelRun:
        """A roofline micro-benchmark on the board's clock (issue 16): the twin's physics of the kernel in the
        current mode, with this board's variation; its power shows in the samples like a workload's."""
        if kernel not in ("idle", "compute", "memory"):
            raise InvalidArgument(f"kernel {kernel[:32]!r} is not one of idle, compute, memory", field="kernel")
        if not (math.isfinite(seconds) and 0 < seconds <= 3600):
            raise InvalidArgument(f"seconds={seconds!r} is out of range; allowed (0, 3600]", field="seconds")
        mode = self._mode
        if kernel == "idle":
            steady, flops, nbytes = spinning_state(self.catalog, mode), 0.0, 0.0
        else:
            rates = kernel_state(get_catalog(self.model), mode, kernel)
            steady = rates.steady
            flops, nbytes = rates.flops_per_s * seconds / self.time_factor, rates.bytes_per_s * seconds / self.time_factor
        start = self.now_s()
        seg = _Segment(start, start, (start + seconds,), steady, mode)
        with self._lock:
            self._segments = [s for s in self._segments if s.ends[-1] > start - 600.0] + [seg]
        self._advance(seconds)
        return KernelRun(kernel, flops, nbytes, start, start + seconds, "twin")

    def _steady(self, workload: str, mode: PowerMode, minibatch_size: int, workers: int) -> Steady:
        """The steady state of a workload this board runs (built-ins cached across boards, plugins per board)."""
        if self.workloads.get(workload) is WORKLOADS.get(workload):
            return _builtin_steady(self.model, workload, mode, minibatch_size, workers)
        key = (workload, mode, minibatch_size, workers)
        steady = self._plugin_steady.get(key)
        if steady is None:
            if len(self._plugin_steady) > 65536:
                self._plugin_steady.clear()
            steady = self._plugin_steady[key] = steady_state(
                self.catalog, self.workloads.get(workload), mode, minibatch_size=minibatch_size, workers=workers,
                cost=self.workloads.characterisation(workload))
        return steady

    def _replace(self, seg: _Segment, *new: _Segment) -> None:
        with self._lock:
            i = self._segments.index(seg)
            self._segments[i:i + 1] = list(new)

    def expected(self, workload: str, mode: PowerMode, *, minibatch_size: int = defaults.MINIBATCH_SIZE,
                 workers: int = defaults.WORKERS) -> tuple[float, float]:
        """This board's noiseless steady state in ``mode``: (seconds per minibatch, board power W),
        its board-to-board variation included. What an infinitely long profile would measure."""
        steady = self._steady(self.workloads.get(workload).name, self.catalog.validate(mode), minibatch_size, workers)
        return steady.minibatch_s * self.time_factor, steady.total_w * self.power_factor

    def minibatch_times(self, steady: Steady, n: int, run: int) -> np.ndarray:
        """Per-minibatch times of run number ``run`` in one mode: warm-up transient and jitter, seeded."""
        result: np.ndarray = steady.minibatch_s * self.time_factor * self._factors(n, run)
        return result

    def _factors(self, n: int, run: int, warm_up: bool = True) -> np.ndarray:
        """Each minibatch's time relative to the steady state: warm-up transient times jitter, seeded by the run."""
        rng = np.random.default_rng([self.seed, 2, run])
        warm = 1.0 + WARMUP_EXTRA * np.exp(-np.arange(n) / (WARMUP_MINIBATCHES / 3.0))
        warm[WARMUP_MINIBATCHES:] = 1.0
        if not warm_up:
            warm[:] = 1.0
        result: np.ndarray = warm * rng.lognormal(0.0, TIME_JITTER, n)
        return result

    def _advance(self, dt: float) -> None:
        """Let ``dt`` seconds of board time pass, taking dt/speed of wall time."""
        wall = 0.0 if math.isinf(self.speed) else dt / self.speed
        if wall > 0:
            self._sleep(wall)
        with self._lock:
            self._offset += dt - wall

    def sample(self) -> TelemetrySample:
        """What the sensors report now, on the board's clock."""
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
        """What the sensors report at board time ``t`` (held for SENSOR_PERIOD_S per reading): ``trace``'s first
        sample, computed with scalars (a 10 Hz sampler calls this; the arrays of a trace cost more for one)."""
        times = np.array([t], dtype=float)
        with self._lock:
            segments, current = list(self._segments), self._mode
        steady, mode, busy = self._state_at(t, segments, current)
        labels = list(steady.rails_w)
        ticks = np.floor(times / SENSOR_PERIOD_S).astype(np.int64)
        noise = (_gauss(self.seed, ticks, len(labels) + 2) * POWER_NOISE)[0].tolist()
        counted = _total_columns(self.catalog.rails, tuple(labels))
        rails = {k: max(0.0, steady.rails_w[k] * self.power_factor * (1.0 + noise[i])) for i, k in enumerate(labels)}
        total = 0.0
        for c in counted:
            total = total + rails[labels[c]]
        temp = AMBIENT_C + THERMAL_C_PER_W * total
        temps = np.round(np.array([temp, temp + 1.5, temp - 1.0]), 2).tolist()
        return TelemetrySample(
            t_s=float(times[0]), rails_w=rails, total_w=total, cpu_mhz=mode.cpu_mhz, gpu_mhz=mode.gpu_mhz,
            mem_mhz=mode.mem_mhz, cores_online=mode.cores, temps_c=dict(zip(TEMP_SENSORS, temps)),
            cpu_util=min(1.0, steady.cpu_util * (1.0 + noise[-1])) if busy else 0.03,
            gpu_util=min(1.0, steady.gpu_util * (1.0 + noise[-2])) if busy else 0.0)

    def _states(self, times: np.ndarray, segments: list[_Segment],
                current: PowerMode) -> tuple[list[tuple[Steady, PowerMode, bool]], np.ndarray]:
        """The distinct states over ``times`` and, per time, the index of its state (``_state_at`` for every
        time at once: the newest segment holding a time wins, as there)."""
        states: list[tuple[Steady, PowerMode, bool]] = [(_idle(self.model, current), current, False)]
        which = np.zeros(len(times), dtype=np.intp)
        lo, hi = float(times[0]), float(times[-1])
        for seg in segments:   # oldest first: a newer segment overrides
            if seg.ends[-1] < lo or seg.start_s > hi:
                continue
            setup = (times >= seg.start_s) & (times < seg.work_start_s)
            if setup.any():
                which[setup] = len(states)
                states.append((_idle(self.model, seg.mode), seg.mode, False))
            busy = (times >= seg.work_start_s) & (times <= seg.ends[-1])
            if busy.any():
                which[busy] = len(states)
                states.append((seg.steady, seg.mode, True))
        return states, which

    def trace(self, t0_s: float, t1_s: float, period_s: float) -> list[TelemetrySample]:
        """The samples a sampler every ``period_s`` would have taken from t0 to t1 (``trace_columns``, as objects)."""
        return self.trace_columns(t0_s, t1_s, period_s).samples()

    def trace_columns(self, t0_s: float, t1_s: float, period_s: float) -> PowerTrace:
        """The samples a sampler every ``period_s`` would have taken from t0 to t1, as columns: the states, the
        noise, the rails, totals and temperatures are arrays, laid out as the wire's block in one copy; no
        object is made per sample."""
        n = max(1, int(math.floor((t1_s - t0_s) / period_s + 1e-9)) + 1)
        times = t0_s + period_s * np.arange(n)
        ticks = np.floor(times / SENSOR_PERIOD_S).astype(np.int64)
        with self._lock:  # one snapshot for the whole trace, not one per sample
            segments, current = list(self._segments), self._mode
        states, which = self._states(times, segments, current)
        labels = list(states[0][0].rails_w)
        noise = _gauss(self.seed, ticks, len(labels) + 2) * POWER_NOISE
        base = np.array([[st[0].rails_w[k] for k in labels] for st in states]) * self.power_factor
        values = np.maximum(0.0, base[which] * (1.0 + noise[:, :-2]))
        counted = _total_columns(self.catalog.rails, tuple(labels))
        total = np.zeros(n)
        for c in counted:   # column by column, in rail order: the same sums as Catalog.total_power_w
            total = total + values[:, c]
        temp = AMBIENT_C + THERMAL_C_PER_W * total
        temps = np.round(np.stack([temp, temp + 1.5, temp - 1.0], axis=1), 2)
        busy = np.array([st[2] for st in states])[which]
        cpu_busy = np.array([st[0].cpu_util for st in states])[which]
        gpu_busy = np.array([st[0].gpu_util for st in states])[which]
        cpu_util = np.where(busy, np.minimum(1.0, cpu_busy * (1.0 + noise[:, -1])), 0.03)
        gpu_util = np.where(busy, np.minimum(1.0, gpu_busy * (1.0 + noise[:, -2])), 0.0)
        knobs = np.array([[st[1].cpu_mhz, st[1].gpu_mhz, st[1].mem_mhz, st[1].cores] for st in states],
                         dtype=np.float64)[which]
        block = np.concatenate([times, total, knobs.T.ravel(), cpu_util, gpu_util, values.ravel(), temps.ravel()])
        return PowerTrace(n, labels, TEMP_SENSORS, array("d", block.tobytes()))


class _TwinSteps(ConcurrentSteps):
    def __init__(self, board: EmulatedBoard, training: str, inference: str, minibatch_size: int, workers: int) -> None:
        self.board, self.training, self.inference = board, training, inference
        self.minibatch_size, self.workers = minibatch_size, workers

    def train(self) -> float:
        """One twin training minibatch; its seconds."""
        return self.board.step_training(self.training, minibatch_size=self.minibatch_size, workers=self.workers)

    def infer(self, n: int) -> float:
        """One twin forward pass of ``n`` requests; its seconds."""
        return self.board.step_inference(self.inference, n)


@lru_cache(maxsize=64)
def _total_columns(rails: tuple[Rail, ...], labels: tuple[str, ...]) -> tuple[int, ...]:
    """The columns of ``labels`` that count towards the board's total (``Catalog.total_power_w``)."""
    counted = {r.label for r in rails if r.in_total}
    return tuple(i for i, label in enumerate(labels) if label in counted)


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
