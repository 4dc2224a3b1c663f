"""Native concurrency on the twin (issue 15): training and inference as two threads sharing the GPU by the
driver's time-slicing (Jetson has no MPS or MIG), the baseline managed interleaving is compared against.

Assumptions (docs/fulcrum.md): the inference thread serves greedily (whenever it is free it takes up to
``batch_size`` queued requests); while both threads have work on the GPU, the time-slice scheduler gives the
inference context a share of the GPU drawn per batch from U(0.25, 0.75) (the time slices are long next to a
small kernel, and which context holds the GPU when a batch arrives is luck: this is the latency variability
the papers report for native sharing), both lose ``SWITCH_OVERHEAD`` to context switches, and alone each runs
at its solo speed. Power while both run is the larger of the two workloads' steady power plus the second
thread's CPU core.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from jetfleet.shared.concurrency import Clock, ConcurrentResult
from jetfleet.twin.board import EmulatedBoard

SWITCH_OVERHEAD = 0.10       # share of GPU time lost to context switches while both contexts have work
SHARE_RANGE = (0.25, 0.75)   # the inference context's GPU share while both run, per batch
SECOND_THREAD_W = 1.0        # the second busy CPU core (W)


def run_native(arrivals_s: Sequence[float] | np.ndarray, *, batch_size: int, infer_s: Callable[[int], float],
               train_s: Callable[[], float], seed: int = 0) -> tuple[ConcurrentResult, np.ndarray]:
    """Simulate both threads until every request is served. Returns the result and the seconds spent in each
    state [training only, inference only, both, idle] (for power)."""
    arr = np.asarray(arrivals_s, dtype=float)
    n = len(arr)
    lat = np.full(n, math.nan)
    queueing = np.full(n, math.nan)
    execution = np.full(n, math.nan)
    res = ConcurrentResult(arr, lat, queueing, np.zeros(n), execution)
    rng = np.random.default_rng([seed, 16])
    t = 0.0
    head = 0
    states = np.zeros(4)
    train_left = train_s()           # solo seconds left of the current minibatch
    train_started = 0.0
    inf_left = 0.0
    inf_batch: tuple[int, int, float, float] | None = None   # (first, count, start, solo seconds)
    share = 0.5
    while head < n or inf_batch is not None:
        if inf_batch is None:
            seen = int(np.searchsorted(arr, t, side="right"))
            if seen > head:
                k = min(batch_size, seen - head)
                solo = infer_s(k)
                inf_batch, inf_left = (head, k, t, solo), solo
                share = rng.uniform(*SHARE_RANGE)
                head += k
        both = inf_batch is not None
        r_inf = share / (1 + SWITCH_OVERHEAD) if both else 0.0
        r_train = (1 - share) / (1 + SWITCH_OVERHEAD) if both else 1.0
        dt_train = train_left / r_train
        dt_inf = inf_left / r_inf if both else math.inf
        dt_arr = (arr[head] - t) if (not both and head < n) else math.inf
        dt = min(dt_train, dt_inf, dt_arr)
        states[2 if both else 0] += dt
        t += dt
        train_left -= dt * r_train
        if both:
            inf_left -= dt * r_inf
        if dt == dt_inf and inf_batch is not None:
            first, k, start, solo = inf_batch
            idx = slice(first, first + k)
            lat[idx] = t - arr[idx]
            execution[idx] = t - start
            queueing[idx] = start - arr[idx]
            res.batches.append((k, t - start))
            inf_batch = None
        if train_left <= 1e-12:
            res.train_times_s.append(t - train_started)
            train_started = t
            train_left = train_s()
    res.span_s = t
    return res, states


def native_power_w(states: np.ndarray, train_w: float, infer_w: float, idle_w: float) -> float:
    """Mean board power over a native run from the seconds in each state."""
    span = float(np.sum(states))
    if span <= 0:
        return idle_w
    both = max(train_w, infer_w) + SECOND_THREAD_W
    return float(states[0] * train_w + states[1] * infer_w + states[2] * both + states[3] * idle_w) / span


class BoardClock(Clock):
    """The managed scheduler's clock on an emulated board: the board's own (accelerated) clock, so its power
    trace lines up with the scheduler's steps; a step has already advanced it, waiting idles the board."""

    def __init__(self, board: EmulatedBoard) -> None:
        self.board = board

    def now(self) -> float:
        """The board's clock."""
        return self.board.now_s()

    def ran(self, seconds: float) -> None:
        """Nothing: the step advanced the board's clock itself."""

    def wait_until(self, t: float) -> None:
        """Idle the board until ``t``."""
        self.board.wait(t - self.board.now_s())
