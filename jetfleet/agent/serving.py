"""A training that serves an inference stream beside it (issue 15): the managed scheduler
(``jetfleet.shared.concurrency``) interleaves the training's minibatches with batches of requests on one
device session (``Device.open_concurrent``), on the board's clock; progress reports carry the stream's
counts, the percentiles over the last ``latency_window_s`` and the latency buckets since the last report.
Also the ``RunInference`` measurement: a workload's forward-pass latency in a mode at some batch sizes."""

from __future__ import annotations

import collections
import math
import threading
from collections.abc import Callable

import numpy as np

from jetfleet.agent.device.base import Device
from jetfleet.agent.energy import EnergyMeter
from jetfleet.shared.concurrency import (
    INFERENCE_LATENCY_BUCKETS_S,
    MAX_REQUESTS,
    Clock,
    ManagedScheduler,
    bucket_counts,
    check_arrival_rate,
    check_latency_budget,
    poisson_arrivals,
)
from jetfleet.shared.convert import mode_from_pb
from jetfleet.shared.errors import InvalidArgument
from jetfleet.shared.proto import agent_pb2
from jetfleet.shared.workloads import WorkloadRegistry
from jetfleet.shared.workloads.inference import check_batch_size

DEFAULT_LATENCY_WINDOW_S = 10.0
DEFAULT_PASSES = 5
BLOCK_S = 600.0           # board seconds of Poisson arrivals generated at a time
MAX_PASSES = 1000


class DeviceClock(Clock):
    """The scheduler's clock on any device: its own clock; a step has already taken its time; waiting idles it."""

    def __init__(self, device: Device) -> None:
        self.device = device

    def now(self) -> float:
        """The board's clock."""
        return self.device.now_s()

    def ran(self, seconds: float) -> None:
        """Nothing: the step took its time on the board."""

    def wait_until(self, t: float) -> None:
        """Idle until ``t``."""
        self.device.wait(t - self.device.now_s())


def check_serving(r: agent_pb2.RunTraining, workloads: WorkloadRegistry) -> None:
    """Refuse a malformed inference stream of a training command (naming the field)."""
    if not r.inference_workload:
        if r.arrival_rate or r.arrival_times_s or r.inference_batch_size or r.latency_budget_s:
            raise InvalidArgument("an inference stream needs run_training.inference_workload",
                                  field="run_training.inference_workload")
        return
    workloads.inference_characterisation(r.inference_workload)
    check_batch_size(int(r.inference_batch_size), "run_training.inference_batch_size")
    check_latency_budget(r.latency_budget_s, "run_training.latency_budget_s")
    if bool(r.arrival_rate) == bool(len(r.arrival_times_s)):
        raise InvalidArgument("give exactly one of arrival_rate and arrival_times_s", field="run_training.arrival_rate")
    if r.arrival_rate:
        check_arrival_rate(r.arrival_rate, "run_training.arrival_rate")
    else:
        t = np.asarray(r.arrival_times_s, dtype=float)
        if len(t) > MAX_REQUESTS or not np.all(np.isfinite(t)) or t[0] < 0 or np.any(np.diff(t) < 0):
            raise InvalidArgument(f"arrival_times_s must be at most {MAX_REQUESTS} finite times >= 0, non-decreasing",
                                  field="run_training.arrival_times_s")
    if not 0 <= r.latency_window_s <= 3600:
        raise InvalidArgument(f"latency_window_s={r.latency_window_s:g} is out of range; allowed 0..3600",
                              field="run_training.latency_window_s")


class StreamStats:
    """What a report says about the stream: counts, rolling percentiles, buckets since the last report."""

    def __init__(self, budget_s: float, window_s: float, batch_size: int) -> None:
        self.budget_s, self.window_s, self.batch_size = budget_s, window_s, batch_size
        self.served = self.late = self.dropped = 0
        self._recent: collections.deque[tuple[float, float]] = collections.deque()   # (board time, latency)
        self._new: list[float] = []
        self._lock = threading.Lock()

    def add(self, now: float, latencies: np.ndarray, dropped: int) -> None:
        """A served batch at board time ``now``."""
        with self._lock:
            self.served += len(latencies)
            self.late += int(np.sum(latencies > self.budget_s))
            self.dropped = dropped
            self._recent.extend((now, float(x)) for x in latencies)
            self._new.extend(float(x) for x in latencies)

    def report(self, now: float) -> agent_pb2.InferenceStats:
        """The stats now (and a new bucket period)."""
        with self._lock:
            while self._recent and self._recent[0][0] < now - self.window_s:
                self._recent.popleft()
            lat = np.array([x for _, x in self._recent])
            new, self._new = self._new, []
        pct = [float(np.percentile(lat, q)) * 1e3 if len(lat) else math.nan for q in (50, 95, 99)]
        return agent_pb2.InferenceStats(served=self.served, late=self.late, dropped=self.dropped, p50_ms=pct[0],
                                        p95_ms=pct[1], p99_ms=pct[2], window_served=len(lat),
                                        buckets=bucket_counts(new), bucket_sum_s=float(sum(new)),
                                        batch_size=self.batch_size)


def serve_beside_training(device: Device, r: agent_pb2.RunTraining, *, on_minibatch: Callable[[int, float], None],
                          stats: StreamStats, minibatch_size: int) -> tuple[float, float]:
    """Train ``r.minibatches`` minibatches while serving ``r``'s stream; returns (start, end) on the board's clock.
    ``on_minibatch(i, seconds)`` after each minibatch (it reports progress and raises to cancel)."""
    steps = device.open_concurrent(r.workload, r.inference_workload, minibatch_size=minibatch_size, workers=r.workers)
    try:
        b = int(r.inference_batch_size)
        start = device.now_s()
        t1, tb = steps.infer(1), steps.infer(b)   # warm-up passes: the scheduler's first estimates
        t_train = steps.train()
        done = [1]
        on_minibatch(0, t_train)

        def train() -> float:
            d = steps.train()
            done[0] += 1
            on_minibatch(done[0] - 1, d)
            return d

        def estimate(n: int) -> float:
            return t1 + (tb - t1) * (n - 1) / (b - 1) if b > 1 else t1

        sched = ManagedScheduler(batch_size=b, latency_budget_s=r.latency_budget_s, infer=steps.infer, train=train,
                                 infer_estimate_s=estimate, train_estimate_s=t_train, clock=DeviceClock(device))
        finished = lambda: done[0] >= r.minibatches  # noqa: E731
        served = lambda lat, dropped: stats.add(device.now_s(), lat, dropped)  # noqa: E731
        if r.arrival_rate:   # blocks of BLOCK_S of the Poisson stream, each served to its last request
            block = 0
            while not finished():
                arrivals = poisson_arrivals(r.arrival_rate, BLOCK_S, int(r.seed) * 1_000_003 + block)
                block += 1
                if len(arrivals):
                    sched.run(arrivals, stop=finished, on_served=served)
                else:
                    sched.run([], train_minibatches=1, stop=finished)
        elif not finished():   # the trace, then training alone once it has been served
            sched.run(np.asarray(r.arrival_times_s, dtype=float), train_minibatches=r.minibatches - done[0],
                      stop=finished, on_served=served)
        return start, device.now_s()
    finally:
        steps.close()


def measure_inference(device: Device, r: agent_pb2.RunInference, workloads: WorkloadRegistry,
                      cancelled: threading.Event) -> agent_pb2.InferenceResult:
    """Forward-pass seconds per batch size in ``r.mode`` (after one warm-up pass each), and the board's mean power."""
    mode = device.describe().catalog.validate(mode_from_pb(r.mode))
    device.apply_mode(mode)
    meter = EnergyMeter(device)
    t0 = meter.start()
    out = agent_pb2.InferenceResult(mode=r.mode)
    try:
        for b in r.batch_sizes:
            run = device.run_inference(r.workload, 1 + (r.passes or DEFAULT_PASSES), batch_size=int(b),
                                       on_batch=lambda i, t: cancelled.is_set())
            times = list(run.minibatch_times_s)[1:] or list(run.minibatch_times_s)
            out.batch_sizes.append(int(b))
            out.latency_s.append(float(np.mean(times)))
        end = device.now_s()
        out.power_w = meter.energy_j(end) / max(end - t0, 1e-9)
    finally:
        meter.stop()
    return out


def check_inference_request(r: agent_pb2.RunInference, workloads: WorkloadRegistry) -> None:
    """Refuse a malformed RunInference (naming the field)."""
    workloads.inference_characterisation(r.workload)
    if not r.batch_sizes:
        raise InvalidArgument("run_inference.batch_sizes is empty", field="run_inference.batch_sizes")
    for b in r.batch_sizes:
        check_batch_size(int(b), "run_inference.batch_sizes")
    if r.passes > MAX_PASSES:
        raise InvalidArgument(f"passes={r.passes} is out of range; allowed 0..{MAX_PASSES}", field="run_inference.passes")


__all__ = ["INFERENCE_LATENCY_BUCKETS_S", "DeviceClock", "StreamStats", "check_inference_request", "check_serving",
           "measure_inference", "serve_beside_training"]
