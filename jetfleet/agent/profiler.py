"""Profile one power mode the papers' way (ARCHITECTURE §6).

1. Apply the mode and confirm it.
2. Start recording power (before the run, so there is an idle baseline), in a thread separate from
   the training loop; on an accelerated twin, the samples a 10 Hz sampler would have taken on the
   board's clock.
3. Train: warm up (30 s on a real board; on the twin 1 s of board time, its own transient is
   modelled), then keep ``minibatches`` minibatches.
4. Find the steady state: the first power sample >= 1.25 x the mean of the 10 before it marks the
   start of real work. Keep the window's minibatch times and every power sample inside it.

The window keeps at least ``minibatches`` minibatches and, when those take less than
MIN_WINDOW_SAMPLES sample intervals (a 1-minibatch LSTM profile lasts 11 ms), as many more as it
takes to hold MIN_WINDOW_SAMPLES power samples: a profile's power is always measured, never NaN.
A window that still holds no power sample is an error (the controller profiles the mode again).
A cancel (``cancel`` set) stops the run after the current minibatch.
"""

from __future__ import annotations

import math
import statistics
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from jetfleet.agent.device.base import Device, TelemetrySample
from jetfleet.agent.trace import PowerTrace
from jetfleet.shared import defaults
from jetfleet.shared.catalog import PowerMode
from jetfleet.shared.convert import mode_to_pb, sample_to_pb
from jetfleet.shared.errors import Cancelled, DeviceError, InvalidArgument
from jetfleet.shared.proto import agent_pb2
from jetfleet.shared.summary import Summary, summarise
from jetfleet.shared.workloads import MAX_MINIBATCHES, WorkloadRegistry, check_run_args

STEADY_FACTOR = 1.25
STEADY_LOOKBACK = 10
REAL_WARMUP_S = 30.0
TWIN_WARMUP_S = 1.0
MIN_MINIBATCH_S = 0.002   # bounds how many minibatches a warm-up may take
MIN_WINDOW_SAMPLES = 3    # power samples a kept window must span (it grows by minibatches until it does)


@dataclass(frozen=True)
class ProfileRequest:
    """One mode to profile, and how."""

    workload: str
    mode: PowerMode
    minibatches: int = defaults.MINIBATCHES
    minibatch_size: int = defaults.MINIBATCH_SIZE
    workers: int = defaults.WORKERS
    warmup_s: float | None = None       # None: 30 s on a real board, 1 s on the twin
    sample_interval_s: float = defaults.SAMPLE_INTERVAL_S

    def check(self, workloads: WorkloadRegistry | None = None) -> None:
        """Refuse a request out of bounds (before anything touches the board); ``workloads`` is what the board runs
        (the built-ins when None)."""
        (workloads or WorkloadRegistry.builtin()).get(self.workload)
        check_run_args(self.minibatches, self.minibatch_size, self.workers)
        if self.warmup_s is not None and not 0 <= self.warmup_s <= 3600:
            raise InvalidArgument(f"warmup_s={self.warmup_s} is out of range; allowed 0..3600", field="warmup_s")
        if not 0.01 <= self.sample_interval_s <= 10:
            raise InvalidArgument(f"sample_interval_s={self.sample_interval_s} is out of range; allowed 0.01..10",
                                  field="sample_interval_s")


@dataclass(frozen=True)
class Profile:
    """A profiled mode: the kept window's minibatch times and every power sample inside it."""

    workload: str
    mode: PowerMode
    minibatch_times_s: list[float]      # the kept window
    power: PowerTrace                   # every sample inside the window (as columns where they share a layout)
    steady_state_found: bool
    window_start_s: float
    window_end_s: float
    summary: Summary


def find_steady_state(power_w: Sequence[float], factor: float = STEADY_FACTOR,
                      lookback: int = STEADY_LOOKBACK) -> int | None:
    """Index of the first sample >= factor x the mean of the ``lookback`` before it, or None."""
    for i in range(lookback, len(power_w)):
        if power_w[i] >= factor * statistics.fmean(power_w[i - lookback:i]):
            return i
    return None


class _SamplerThread:
    """Samples a real board every interval in its own thread, off the training loop."""

    def __init__(self, device: Device, interval_s: float) -> None:
        self.device, self.interval_s = device, interval_s
        self.samples: list[TelemetrySample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="power-sampler", daemon=True)
        self.errors = 0

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append(self.device.sample())
            except DeviceError:
                self.errors += 1
            self._stop.wait(self.interval_s)

    def start(self) -> None:
        self._thread.start()
        self._stop.wait(self.interval_s * STEADY_LOOKBACK)  # an idle baseline before the work

    def stop(self) -> PowerTrace:
        self._stop.set()
        self._thread.join()
        return PowerTrace.from_samples(self.samples)


class _BoardClockRecorder:
    """On a twin whose clock runs ahead of the wall clock: the samples a sampler would have taken."""

    def __init__(self, device: Device, interval_s: float) -> None:
        self.device, self.interval_s = device, interval_s
        self.t0 = 0.0

    def start(self) -> None:
        self.t0 = self.device.now_s() - self.interval_s * STEADY_LOOKBACK  # the board was idle before

    def stop(self) -> PowerTrace:
        return self.device.trace_columns(self.t0, self.device.now_s(), self.interval_s)


def _window(times: Sequence[float], first: int, minibatches: int, min_window_s: float) -> list[float]:
    """The kept minibatches from ``first``: at least ``minibatches`` of them, more until they last ``min_window_s``."""
    kept = list(times[first:first + minibatches])
    total = sum(kept)
    for t in times[first + minibatches:]:
        if total >= min_window_s:
            break
        kept.append(t)
        total += t
    return kept


def profile(device: Device, req: ProfileRequest, observer: Callable[[int, float], object] | None = None,
            cancel: threading.Event | None = None, workloads: WorkloadRegistry | None = None) -> Profile:
    """Profile ``req.mode`` on ``device`` the papers' way (this module's docstring); Cancelled if ``cancel`` is set."""
    req.check(workloads)
    confirmed = device.apply_mode(req.mode)
    emulated = device.describe().emulated
    warmup_s = req.warmup_s if req.warmup_s is not None else (TWIN_WARMUP_S if emulated else REAL_WARMUP_S)
    recorder = (_BoardClockRecorder if device.capabilities.power_trace else _SamplerThread)(device,
                                                                                            req.sample_interval_s)
    min_window_s = MIN_WINDOW_SAMPLES * req.sample_interval_s
    elapsed = [0.0]
    warm = [0]
    window = [0.0]   # seconds of the minibatches kept so far

    def on_minibatch(i: int, t: float) -> bool:
        if observer is not None:
            observer(i, t)
        if cancel is not None and cancel.is_set():
            raise Cancelled(f"profile of {req.workload} in {req.mode} cancelled after {i + 1} minibatches",
                            field="command_id")
        if elapsed[0] < warmup_s:
            warm[0] = i + 1
        else:
            window[0] += t
        elapsed[0] += t
        # Twice the minimum window: the steady state found afterwards may start a little later.
        return i + 1 - warm[0] >= req.minibatches and window[0] >= 2 * min_window_s

    limit = min(MAX_MINIBATCHES, req.minibatches + math.ceil((warmup_s + 2 * min_window_s) / MIN_MINIBATCH_S) + 1)
    recorder.start()
    try:
        run = device.run_minibatches(req.workload, limit, minibatch_size=req.minibatch_size, workers=req.workers,
                                     on_minibatch=on_minibatch)
    finally:
        samples = recorder.stop()
    idx = find_steady_state(samples.column("total_w"))
    steady_start = samples.column("t_s")[idx] if idx is not None else run.start_s
    starts = [run.start_s]
    for t in run.minibatch_times_s[:-1]:
        starts.append(starts[-1] + t)
    first = warm[0]
    while first < len(starts) and starts[first] < steady_start:  # real work began later than we thought
        first += 1
    kept = _window(run.minibatch_times_s, first, req.minibatches, min_window_s)
    if not kept:
        raise DeviceError(f"no minibatch of {req.workload} ran after the steady state was reached", field="mode")
    window_start = starts[first]
    window_end = window_start + sum(kept)
    power = samples.window(window_start, window_end)
    if not len(power):
        raise DeviceError(f"the measured window of {req.workload} in {req.mode} ({window_end - window_start:.3f} s) "
                          "holds no power sample", field="power")
    return Profile(req.workload, confirmed, kept, power, idx is not None, window_start, window_end,
                   summarise(kept, power.column("total_w")))


def profile_result_pb(p: Profile, *, columns: bool, into: agent_pb2.ProfileResult | None = None
                      ) -> agent_pb2.ProfileResult:
    """A profile as the wire's ProfileResult: the window's samples as one columns block when the controller reads
    columns (``columns``) and they share a layout, else one message per sample. Written into ``into`` (an empty
    message: the command result's own field, saving a copy of the samples) when given."""
    out = agent_pb2.ProfileResult() if into is None else into
    out.workload, out.steady_state_found = p.workload, p.steady_state_found
    out.window_start_s, out.window_end_s = p.window_start_s, p.window_end_s
    out.mode.CopyFrom(mode_to_pb(p.mode))
    out.minibatch_times_s.extend(p.minibatch_times_s)
    cols = p.power.columns_pb() if columns else None
    if cols is not None:
        out.power_columns.CopyFrom(cols)
    else:
        out.power.extend([sample_to_pb(s) for s in p.power.samples()])
    return out
