"""The search space of Fulcrum's choice and what is known about it: per power mode, the training workload's
time and power per minibatch and the inference workload's time and power per batch of n = 1..64 requests.

A ``Profile`` of a mode is either measured on the emulated board (``profile_mode``: a real 40-minibatch
training profile and a 40-pass inference profile at each characterised batch size, with the twin's noise), the
twin's noiseless truth (``truth_table``, the exhaustive optimum's knowledge) or a prediction (ALS, the NN
baseline). Between characterised batch sizes, time and power are interpolated linearly in n (the twin's own
rule for a forward pass's cost, ``jetfleet.twin.inference``).

Evaluating a configuration (mode, inference batch size) runs the managed scheduler
(``jetfleet.shared.concurrency``) in simulated time on a profile: the planner's estimate of p95 latency,
training throughput and power. "Actually running" it runs the same scheduler on the emulated board.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from jetfleet.shared.catalog import PowerMode, get_catalog
from jetfleet.shared.concurrency import ManagedScheduler, VirtualClock
from jetfleet.shared.workloads.inference import CHARACTERISED_BATCH_SIZES
from jetfleet.twin.board import EmulatedBoard
from jetfleet.twin.concurrent import BoardClock
from jetfleet.twin.measure import measure_inference_on_twin, measure_on_twin

BATCH_SIZES = CHARACTERISED_BATCH_SIZES      # the inference batch-size knob
GRID = "inference"                           # the 441-mode grid (ARCHITECTURE §8)
PROFILE_MINIBATCHES = 40
# The emulated boards' wall clock is pinned (they run instant): the sensor's noise is keyed by the board's
# time, so a pinned start makes a whole evaluation replay exactly for a seed.
EPOCH_S = 1.7e9


@dataclass(frozen=True)
class Profile:
    """Time (s) and power (W) of both workloads in one mode; ``infer_s``/``infer_w`` at BATCH_SIZES."""

    train_s: float
    train_w: float
    infer_s: tuple[float, ...]
    infer_w: tuple[float, ...]

    def infer_at(self, n: int) -> tuple[float, float]:
        """(seconds, W) of a batch of ``n`` requests, interpolated between the characterised sizes."""
        if n in BATCH_SIZES:
            i = BATCH_SIZES.index(n)
            return self.infer_s[i], self.infer_w[i]
        hi = next(i for i, b in enumerate(BATCH_SIZES) if b > n)
        lo = hi - 1
        w = (n - BATCH_SIZES[lo]) / (BATCH_SIZES[hi] - BATCH_SIZES[lo])
        return ((1 - w) * self.infer_s[lo] + w * self.infer_s[hi], (1 - w) * self.infer_w[lo] + w * self.infer_w[hi])

    def vector(self) -> np.ndarray:
        """The profile as model targets: log times, powers."""
        return np.array([math.log(self.train_s), self.train_w, *np.log(self.infer_s), *self.infer_w])

    @classmethod
    def from_vector(cls, v: np.ndarray) -> Profile:
        """The inverse of ``vector``."""
        k = len(BATCH_SIZES)
        return cls(float(np.exp(v[0])), float(v[1]), tuple(float(x) for x in np.exp(v[2:2 + k])),
                   tuple(float(x) for x in v[2 + k:2 + 2 * k]))


@dataclass(frozen=True)
class Scenario:
    """One run of the choice: a board, a workload pair, an arrival rate and both budgets."""

    board: str
    training: str
    inference: str
    rate: float               # requests per second
    latency_budget_s: float   # on the p95 latency
    power_budget_w: float


@dataclass(frozen=True)
class Outcome:
    """What a configuration does (planned on a profile, or actually run on the board)."""

    train_per_s: float
    p95_s: float
    power_w: float

    def feasible(self, sc: Scenario) -> bool:
        """Within both budgets."""
        return self.p95_s <= sc.latency_budget_s and self.power_w <= sc.power_budget_w

    def violation(self, sc: Scenario) -> float:
        """How far outside the budgets (relative; 0 inside)."""
        return max(0.0, self.p95_s / sc.latency_budget_s - 1) + max(0.0, self.power_w / sc.power_budget_w - 1)


def grid_modes(board: str) -> list[PowerMode]:
    """The modes of ``board``'s inference grid."""
    return get_catalog(board).grid(GRID)


class Lab:
    """One emulated board of a model (seed 0, with its variation) to profile on, with a cache so a mode is
    measured once however many strategies profile it (each strategy still counts it as profiled)."""

    def __init__(self, board: str, seed: int = 0) -> None:
        self.board_model, self.seed = board, seed
        self.board = EmulatedBoard(board, seed, clock=lambda: EPOCH_S)
        self._cache: dict[tuple[str, str, PowerMode], Profile] = {}

    def profile(self, training: str, inference: str, mode: PowerMode) -> Profile:
        """Measure both workloads in ``mode`` on the board (the papers' protocol: warm-up excluded, 40 kept)."""
        key = (training, inference, mode)
        if key not in self._cache:
            t = measure_on_twin(self.board, training, mode, PROFILE_MINIBATCHES).summary
            inf = [measure_inference_on_twin(self.board, inference, mode, PROFILE_MINIBATCHES, batch_size=b).summary
                   for b in BATCH_SIZES]
            self._cache[key] = Profile(t.minibatch_time_mean_ms / 1e3, t.power_mean_w,
                                       tuple(s.minibatch_time_mean_ms / 1e3 for s in inf),
                                       tuple(s.power_mean_w for s in inf))
        return self._cache[key]

    def truth(self, training: str, inference: str, mode: PowerMode) -> Profile:
        """The board's noiseless steady state in ``mode`` (what only the twin knows)."""
        t_s, t_w = self.board.expected(training, mode)
        inf = [self.board.expected_inference(inference, mode, batch_size=b) for b in BATCH_SIZES]
        return Profile(t_s, t_w, tuple(x for x, _ in inf), tuple(w for _, w in inf))

    def idle_w(self, mode: PowerMode) -> float:
        """The board's idle power in ``mode``."""
        return self.board.idle_power_w(mode)


def plan(profile: Profile, batch_size: int, sc: Scenario, arrivals: np.ndarray, idle_w: float,
         slack: float) -> Outcome:
    """The managed scheduler run in simulated time on ``profile``'s durations: the planner's estimate."""
    sched = ManagedScheduler(batch_size=batch_size, latency_budget_s=sc.latency_budget_s,
                             infer=lambda n: profile.infer_at(n)[0], train=lambda: profile.train_s,
                             infer_estimate_s=lambda n: profile.infer_at(n)[0], train_estimate_s=profile.train_s,
                             clock=VirtualClock(), slack=slack)
    r = sched.run(arrivals, abort_late_share=0.05)
    power = r.mean_power_w(profile.train_w, lambda n: profile.infer_at(n)[1], idle_w)
    p95 = max(r.percentile_s(95), sc.latency_budget_s * 1.001) if r.aborted else r.percentile_s(95)
    return Outcome(r.train_throughput, p95, power)


def actually_run(sc: Scenario, mode: PowerMode, batch_size: int, known: Profile, arrivals: np.ndarray,
                 slack: float, seed: int = 0) -> Outcome:
    """Run the configuration on a fresh emulated board (the lab's board: same seed, same variation): the managed
    scheduler on the board's clock steps real twin work (jitter, power segments); power is the mean of what a
    100 ms sampler reads over the run. The scheduler starts from what the strategy knew (``known``)."""
    board = EmulatedBoard(sc.board, seed, clock=lambda: EPOCH_S)
    board.apply_mode(mode)
    steps = board.open_concurrent(sc.training, sc.inference)
    clock = BoardClock(board)
    sched = ManagedScheduler(batch_size=batch_size, latency_budget_s=sc.latency_budget_s, infer=steps.infer,
                             train=steps.train, infer_estimate_s=lambda n: known.infer_at(n)[0],
                             train_estimate_s=known.train_s, clock=clock, slack=slack)
    t0 = board.now_s()
    r = sched.run(arrivals)
    samples = board.trace(t0, t0 + r.span_s, 0.1)
    power = float(np.mean([s.total_w for s in samples]))
    return Outcome(r.train_throughput, r.percentile_s(95), power)
