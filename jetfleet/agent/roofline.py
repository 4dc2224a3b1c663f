"""Measure one power mode's rooflines the Empirical Roofline Toolkit's way (issue 16, ARCHITECTURE §8).

Apply the mode and confirm it; with the board's power recorded throughout (a sampler thread on a real
board, the board-clock trace on an accelerated twin), run three windows of ``seconds`` each: ``idle``
(the host thread spins, nothing on the GPU: pi0), ``compute`` (dense FP32 matmuls: peak FLOP/s) and
``memory`` (a streaming triad: peak DRAM bandwidth). Each window's mean power is taken over its last
80% (the first 20% is the ramp). The energy constants are fitted by the controller from the result.
"""

from __future__ import annotations

import math
import statistics
import threading

from jetfleet.agent.device.base import Device, KernelRun
from jetfleet.agent.profiler import _BoardClockRecorder, _SamplerThread
from jetfleet.shared import defaults
from jetfleet.shared.catalog import PowerMode
from jetfleet.shared.convert import mode_to_pb
from jetfleet.shared.errors import Cancelled, DeviceError, InvalidArgument
from jetfleet.shared.proto import agent_pb2
from jetfleet.shared.roofline import DEFAULT_KERNEL_S, MAX_KERNEL_S

RAMP_SHARE = 0.2


def check_request(seconds: float, sample_interval_s: float) -> tuple[float, float]:
    """The kernel length and sample interval to use (0: defaults); InvalidArgument naming the field."""
    seconds = seconds or DEFAULT_KERNEL_S
    interval = sample_interval_s or defaults.SAMPLE_INTERVAL_S
    if not (math.isfinite(seconds) and 0.1 <= seconds <= MAX_KERNEL_S):
        raise InvalidArgument(f"seconds={seconds!r} is out of range; allowed 0.1..{MAX_KERNEL_S:g}",
                              field="run_roofline.seconds")
    if not (math.isfinite(interval) and 0.01 <= interval <= 10):
        raise InvalidArgument(f"sample_interval_s={interval!r} is out of range; allowed 0.01..10",
                              field="run_roofline.sample_interval_s")
    if seconds < 5 * interval:
        raise InvalidArgument(f"seconds={seconds:g} holds fewer than 5 power samples at {interval:g} s",
                              field="run_roofline.seconds")
    return seconds, interval


def measure(device: Device, mode: PowerMode, seconds: float = 0.0, sample_interval_s: float = 0.0,
            cancel: threading.Event | None = None) -> agent_pb2.RooflineResult:
    """The mode's two kernels' rates and the power of the three windows (this module's docstring)."""
    seconds, interval = check_request(seconds, sample_interval_s)
    confirmed = device.apply_mode(mode)
    recorder = (_BoardClockRecorder if device.capabilities.power_trace else _SamplerThread)(device, interval)
    runs: list[KernelRun] = []
    recorder.start()
    try:
        for kernel in ("idle", "compute", "memory"):
            if cancel is not None and cancel.is_set():
                raise Cancelled(f"roofline of {mode} cancelled before its {kernel} kernel", field="command_id")
            runs.append(device.run_kernel(kernel, seconds))
    finally:
        samples = recorder.stop()
    watts, used = [], 0
    for run in runs:
        t0 = run.start_s + RAMP_SHARE * (run.end_s - run.start_s)
        inside = [s.total_w for s in samples if t0 <= s.t_s < run.end_s]   # the end belongs to the next window
        if not inside:
            raise DeviceError(f"the {run.kernel} kernel's window in {mode} holds no power sample", field="power")
        watts.append(statistics.fmean(inside))
        used += len(inside)
    idle, comp, mem = runs
    dc, dm = comp.end_s - comp.start_s, mem.end_s - mem.start_s
    return agent_pb2.RooflineResult(
        mode=mode_to_pb(confirmed), peak_flops=comp.flops / dc, peak_bytes_per_s=mem.dram_bytes / dm,
        idle_w=watts[0], compute_w=watts[1], memory_w=watts[2], compute_bytes_per_s=comp.dram_bytes / dc,
        memory_flops=mem.flops / dm, samples=used, method=comp.method)
