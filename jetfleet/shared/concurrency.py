"""Concurrent training and inference on one board (Fulcrum, issue 15): the request stream and the managed
interleaving scheduler, in one place for the agent (real torch work on a board, the twin's time on an
emulated one) and the evaluation (simulated time).

Managed interleaving runs one thing at a time on the GPU, at minibatch granularity: either one inference
batch or one training minibatch. At each decision it looks at the queue and the latency budget:
- a full batch (``batch_size`` requests) is served at once;
- a partial batch is served now if training one more minibatch first would make its oldest request late
  (the budget times ``slack``, with the scheduler's running estimates of both durations), else training
  runs and the batch keeps filling;
- with no training left it waits for the batch to fill until the oldest request's deadline forces it.

A request's latency = queueing (behind work already on the GPU or other inference batches) + batching (time
the scheduler chose to train or wait while it was queued, to fill a batch) + execution (its batch's forward
pass). The budget is checked on the **p95** latency.

The clock is injected: ``VirtualClock`` advances by each step's duration (the evaluation and an accelerated
twin), ``WallClock`` is real time on a board. Nothing here imports torch, grpc or the twin.
"""

from __future__ import annotations

import abc
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from jetfleet.shared.errors import InvalidArgument

LATENCY_PERCENTILE = 95          # the budget is on the p95 request latency
MAX_ARRIVAL_RATE = 10_000.0      # requests per second
MAX_REQUESTS = 1_000_000
MAX_TRACE_BYTES = 16 << 20
DEFAULT_SLACK = 0.8              # share of the budget the scheduler plans to use (the rest absorbs jitter)
EWMA = 0.2                       # weight of a new observation in the running duration estimates
# Upper bounds (s) of the request-latency buckets a board reports for a job (the controller's histogram's)
INFERENCE_LATENCY_BUCKETS_S = (0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.5)


class Clock(abc.ABC):
    """What the scheduler needs of time: ``now``; ``ran(d)`` after a step of d seconds; ``wait_until(t)``."""

    @abc.abstractmethod
    def now(self) -> float:
        """Seconds on this clock."""

    @abc.abstractmethod
    def ran(self, seconds: float) -> None:
        """A step of ``seconds`` has just run."""

    @abc.abstractmethod
    def wait_until(self, t: float) -> None:
        """Idle until ``t`` on this clock."""


class VirtualClock(Clock):
    """Simulated time: steps take no wall time; the clock advances by what they report."""

    def __init__(self, start: float = 0.0) -> None:
        self.t = start

    def now(self) -> float:
        """The simulated time."""
        return self.t

    def ran(self, seconds: float) -> None:
        """Advance by the step's duration."""
        self.t += seconds

    def wait_until(self, t: float) -> None:
        """Jump to ``t``."""
        self.t = max(self.t, t)


class WallClock(Clock):
    """Real time (a board): steps take the time they take; waiting sleeps (``sleep`` injectable)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        self._clock, self._sleep = clock, sleep

    def now(self) -> float:
        """The wall clock."""
        return self._clock()

    def ran(self, seconds: float) -> None:
        """Nothing: the step took its time."""

    def wait_until(self, t: float) -> None:
        """Sleep until ``t``."""
        dt = t - self._clock()
        if dt > 0:
            self._sleep(dt)


def check_arrival_rate(rate: float, field: str = "arrival_rate") -> float:
    """Requests per second: > 0 and at most MAX_ARRIVAL_RATE."""
    if not isinstance(rate, (int, float)) or isinstance(rate, bool) or not 0 < rate <= MAX_ARRIVAL_RATE:
        raise InvalidArgument(f"{field}={rate!r} is out of range; allowed > 0 and <= {MAX_ARRIVAL_RATE:g} requests/s",
                              field=field)
    return float(rate)


def check_latency_budget(budget_s: float, field: str = "latency_budget") -> float:
    """A latency budget in seconds: > 0 and at most an hour (shared.quantity's limit, the CLI's too)."""
    from jetfleet.shared.quantity import MAX_LATENCY_S, check_range

    return check_range(budget_s, MAX_LATENCY_S, field, "s")


def poisson_arrivals(rate: float, duration_s: float, seed: int = 0) -> np.ndarray:
    """Arrival times (s from 0) of a Poisson stream of ``rate`` requests/s over ``duration_s``, seeded."""
    check_arrival_rate(rate)
    n = int(rate * duration_s * 1.2 + 10 * math.sqrt(rate * duration_s + 1) + 10)
    if n > MAX_REQUESTS * 2:
        raise InvalidArgument(f"{rate:g} requests/s over {duration_s:g} s is more than {MAX_REQUESTS} requests",
                              field="arrival_rate")
    gaps = np.random.default_rng([seed, 15]).exponential(1.0 / rate, n)
    t = np.cumsum(gaps)
    return t[t < duration_s]


def read_trace(text: str) -> np.ndarray:
    """Arrival times from a trace file: one time in seconds per line (``#`` comments and blank lines skipped),
    non-decreasing, non-negative; InvalidArgument naming the bad line otherwise."""
    if len(text) > MAX_TRACE_BYTES:
        raise InvalidArgument(f"trace is larger than {MAX_TRACE_BYTES >> 20} MB", field="trace")
    out: list[float] = []
    for i, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            t = float(line.split(",")[0])
        except ValueError:
            raise InvalidArgument(f"trace line {i}: {line[:40]!r} is not a time in seconds", field="trace") from None
        if not math.isfinite(t) or t < 0 or (out and t < out[-1]):
            raise InvalidArgument(f"trace line {i}: {t} must be finite, >= 0 and not before the line above",
                                  field="trace")
        out.append(t)
        if len(out) > MAX_REQUESTS:
            raise InvalidArgument(f"trace has more than {MAX_REQUESTS} requests", field="trace")
    if not out:
        raise InvalidArgument("trace has no arrival times", field="trace")
    return np.asarray(out)


@dataclass
class ConcurrentResult:
    """What a concurrent run did. Times in seconds on the scheduler's clock (relative to its start)."""

    arrivals_s: np.ndarray
    latency_s: np.ndarray            # per served request (NaN for dropped)
    queueing_s: np.ndarray
    batching_s: np.ndarray
    execution_s: np.ndarray
    batches: list[tuple[int, float]] = field(default_factory=list)   # (requests, seconds) per inference batch
    train_times_s: list[float] = field(default_factory=list)          # per training minibatch
    idle_s: float = 0.0
    span_s: float = 0.0
    dropped: int = 0
    aborted: bool = False            # stopped early: more than the allowed share of requests was already late

    @property
    def served(self) -> int:
        """Requests served."""
        return int(np.sum(~np.isnan(self.latency_s)))

    def percentile_s(self, q: float) -> float:
        """The q-th percentile of served requests' latency (NaN if none was served)."""
        lat = self.latency_s[~np.isnan(self.latency_s)]
        return float(np.percentile(lat, q)) if len(lat) else math.nan

    def late(self, budget_s: float) -> int:
        """Served requests whose latency exceeded ``budget_s``."""
        lat = self.latency_s[~np.isnan(self.latency_s)]
        return int(np.sum(lat > budget_s))

    @property
    def train_throughput(self) -> float:
        """Training minibatches per second over the run."""
        return len(self.train_times_s) / self.span_s if self.span_s > 0 else 0.0

    def mean_power_w(self, train_w: float, infer_w: Callable[[int], float], idle_w: float) -> float:
        """Time-weighted board power from each kind of step's steady power (the twin's and the evaluation's
        estimate; a board measures it)."""
        if self.span_s <= 0:
            return idle_w
        energy = sum(self.train_times_s) * train_w + sum(t * infer_w(n) for n, t in self.batches) + self.idle_s * idle_w
        return energy / self.span_s

    def summary(self, budget_s: float | None = None) -> dict[str, float]:
        """p50/p95/p99 latency (ms), served/late/dropped, training throughput, the latency split (mean ms)."""
        ok = ~np.isnan(self.latency_s)
        d = {"requests": float(len(self.arrivals_s)), "served": float(self.served), "dropped": float(self.dropped),
             "p50_ms": self.percentile_s(50) * 1e3, "p95_ms": self.percentile_s(95) * 1e3,
             "p99_ms": self.percentile_s(99) * 1e3,
             "queueing_mean_ms": float(np.mean(self.queueing_s[ok]) * 1e3) if ok.any() else math.nan,
             "batching_mean_ms": float(np.mean(self.batching_s[ok]) * 1e3) if ok.any() else math.nan,
             "execution_mean_ms": float(np.mean(self.execution_s[ok]) * 1e3) if ok.any() else math.nan,
             "train_minibatches": float(len(self.train_times_s)), "train_per_s": self.train_throughput,
             "batches": float(len(self.batches)),
             "mean_batch": float(np.mean([n for n, _ in self.batches])) if self.batches else 0.0,
             "span_s": self.span_s}
        if budget_s is not None:
            d["late"] = float(self.late(budget_s))
        return d


class ManagedScheduler:
    """Managed interleaving (see the module's docstring). ``infer(n)`` runs one forward pass of n requests and
    returns its seconds; ``train()`` one training minibatch and its seconds (None: inference only).
    ``infer_estimate_s(n)`` and ``train_estimate_s`` seed the running estimates (a profile, or a prediction)."""

    def __init__(self, *, batch_size: int, latency_budget_s: float, infer: Callable[[int], float],
                 train: Callable[[], float] | None, infer_estimate_s: Callable[[int], float], train_estimate_s: float,
                 clock: Clock, slack: float = DEFAULT_SLACK, max_queue: int = 100_000) -> None:
        from jetfleet.shared.workloads.inference import check_batch_size

        self.batch_size = check_batch_size(batch_size)
        self.budget_s = check_latency_budget(latency_budget_s)
        if not 0 < slack <= 1:
            raise InvalidArgument(f"slack={slack} is out of range; allowed (0, 1]", field="slack")
        self.slack = slack
        self._infer, self._train, self.clock = infer, train, clock
        self._est_inf = {n: float(infer_estimate_s(n)) for n in range(1, self.batch_size + 1)}
        self._est_train = float(train_estimate_s)
        self.max_queue = max_queue

    def _learn_inf(self, n: int, seconds: float) -> None:
        old = self._est_inf[n]
        ratio = seconds / old if old > 0 else 1.0
        # one batch size's observation says how the whole curve sits: scale every estimate a little
        k = 1.0 + EWMA * (ratio - 1.0)
        for m in self._est_inf:
            self._est_inf[m] *= k if m != n else 1.0
        self._est_inf[n] = old + EWMA * (seconds - old)

    def run(self, arrivals_s: Sequence[float] | np.ndarray, *, train_minibatches: int | None = None,
            until_s: float | None = None, stop: Callable[[], bool] | None = None,
            abort_late_share: float | None = None,
            on_served: Callable[[np.ndarray, int], None] | None = None) -> ConcurrentResult:
        """Serve ``arrivals_s`` (seconds from the start, sorted) beside training until every request is served
        and, if given, ``train_minibatches`` are done (or ``until_s`` / ``stop()``). Training runs only while
        requests remain or minibatches are asked for; with neither it runs until the last request is served.
        ``abort_late_share``: stop as soon as more than this share of all requests is late (a planner's shortcut:
        the budget's percentile is then missed whatever follows); ``aborted`` says so. ``on_served(latencies,
        dropped)``: after each batch, its requests' latencies and the requests dropped so far."""
        arr = np.asarray(arrivals_s, dtype=float)
        n_req = len(arr)
        lat = np.full(n_req, math.nan)
        queueing = np.full(n_req, math.nan)
        batching = np.full(n_req, math.nan)
        execution = np.full(n_req, math.nan)
        first_seen_deferral = np.full(n_req, math.nan)
        result = ConcurrentResult(arr, lat, queueing, batching, execution)
        t0 = self.clock.now()
        head = 0          # oldest unserved request
        seen = 0          # requests that have arrived (arr[:seen] <= now)
        deferred = 0.0    # cumulative time the scheduler chose training/waiting over serving a non-empty queue
        trained = 0
        budget = self.budget_s * self.slack
        B = self.batch_size
        rate = n_req / max(float(arr[-1]), 1e-9) if n_req > 1 else 0.0
        late_limit = abort_late_share * n_req if abort_late_share is not None else math.inf
        late = 0

        def want_training() -> bool:
            if self._train is None:
                return False
            if train_minibatches is not None:
                return trained < train_minibatches
            return head < n_req

        while True:
            now = self.clock.now() - t0
            if stop is not None and stop():
                break
            if until_s is not None and now >= until_s:
                break
            new_seen = int(np.searchsorted(arr, now, side="right"))
            if new_seen > seen:
                first_seen_deferral[seen:new_seen] = deferred
                seen = new_seen
            if seen - head > self.max_queue:   # overload: shed the oldest beyond the bound
                drop = seen - head - self.max_queue
                result.dropped += drop
                head += drop
            q = seen - head
            if q == 0 and not want_training():
                if head >= n_req:
                    break
                self.clock.wait_until(t0 + arr[head])
                result.idle_s += max(0.0, arr[head] - now)
                continue
            serve = 0
            if q >= B:
                serve = B
            elif q > 0:
                oldest_wait = now - arr[head]
                if want_training():
                    more = min(B, q + int(rate * self._est_train))
                    if oldest_wait + self._est_train + self._est_inf[more] > budget:
                        serve = q
                else:
                    deadline = arr[head] + budget - self._est_inf[min(B, q + 1)]
                    nxt = arr[seen] if seen < n_req else math.inf
                    if now >= deadline or nxt > arr[head] + budget:
                        serve = q
                    else:   # wait for the next request or the deadline, whichever is first
                        until = min(nxt, deadline)
                        self.clock.wait_until(t0 + until)
                        waited = max(0.0, until - now)
                        result.idle_s += waited
                        deferred += waited
                        continue
            if serve:
                start = now
                d = float(self._infer(serve))
                self.clock.ran(d)
                self._learn_inf(serve, d)
                idx = slice(head, head + serve)
                execution[idx] = d
                batching[idx] = deferred - first_seen_deferral[idx]
                queueing[idx] = np.maximum(0.0, start - arr[idx] - batching[idx])
                lat[idx] = start + d - arr[idx]
                result.batches.append((serve, d))
                if on_served is not None:
                    on_served(lat[idx], result.dropped)
                head += serve
                late += int(np.sum(lat[idx] > self.budget_s))
                if late > late_limit:
                    result.aborted = True
                    break
                continue
            # train one minibatch (a non-empty queue waits: that is batching time for its requests)
            d = float(self._train()) if self._train is not None else 0.0
            self.clock.ran(d)
            self._est_train += EWMA * (d - self._est_train)
            if q > 0:
                deferred += d
            result.train_times_s.append(d)
            trained += 1
        result.span_s = self.clock.now() - t0
        return result


def check_serviceable(rate: float, budget_s: float, latency_s: Mapping[int, float], workload: str) -> None:
    """Refuse a request stream no configuration can serve within its budget. ``latency_s`` maps a batch size to the
    lowest latency of one forward pass of that many requests over the board's modes (measured or predicted).

    - a budget below the fastest single-request latency: InvalidArgument on ``latency_budget`` naming it;
    - no batch size keeps up with ``rate`` (n requests per pass arrive faster than a pass serves them):
      InvalidArgument on ``arrival_rate`` naming the highest rate any batch size sustains;
    - the best latency among the batch sizes that keep up is over the budget: InvalidArgument on ``arrival_rate``
      naming that best achievable latency."""
    check_arrival_rate(rate)
    check_latency_budget(budget_s)
    fastest = latency_s[min(latency_s)]
    if budget_s < fastest:
        raise InvalidArgument(f"latency budget {budget_s * 1e3:g} ms is below the fastest single-request latency of "
                              f"{workload} on this board, {fastest * 1e3:.1f} ms", field="latency_budget")
    stable = {n: t for n, t in latency_s.items() if rate * t / n < 1.0}
    if not stable:
        top = max(n / t for n, t in latency_s.items())
        raise InvalidArgument(f"no mode serves {workload} at {rate:g} requests/s: at most {top:.1f} requests/s "
                              "(the largest batch at the fastest mode)", field="arrival_rate")
    best = min(stable.values())
    if best > budget_s:
        raise InvalidArgument(f"no mode serves {workload} at {rate:g} requests/s within {budget_s * 1e3:g} ms: the best "
                              f"achievable latency is {best * 1e3:.1f} ms (batch {min(stable, key=stable.__getitem__)})",
                              field="arrival_rate")


def bucket_counts(latencies_s: Sequence[float] | np.ndarray) -> list[int]:
    """Requests per latency bucket (``INFERENCE_LATENCY_BUCKETS_S``, then +Inf; not cumulative)."""
    lat = np.asarray(latencies_s, dtype=float)
    idx = np.searchsorted(np.asarray(INFERENCE_LATENCY_BUCKETS_S), lat, side="left")
    return [int(c) for c in np.bincount(idx, minlength=len(INFERENCE_LATENCY_BUCKETS_S) + 1)]


def affine_latency(latency_s: Mapping[int, float]) -> Callable[[int], float]:
    """Seconds per forward pass of any batch size from measured ones (linear between them, flat outside)."""
    sizes = sorted(latency_s)
    ys = [latency_s[n] for n in sizes]
    return lambda n: float(np.interp(n, sizes, ys))


@dataclass(frozen=True)
class BatchChoice:
    """A chosen largest inference batch: the simulated p95 (s) and training minibatches/s, whether it met the
    planning margin, and what was compared."""

    batch_size: int
    p95_s: float
    train_per_s: float
    within: bool
    compared: dict[int, tuple[float, float]]


def choose_batch_size(latency_s: Mapping[int, float], train_s: float, *, budget_s: float,
                      arrivals_s: np.ndarray, candidates: Sequence[int], margin: float = 0.9) -> BatchChoice:
    """The largest batch that lets training run fastest while the simulated p95 stays within ``margin`` x the budget:
    the managed scheduler run in virtual time on the measured forward-pass latencies and a training minibatch of
    ``train_s``; none within: the one with the lowest p95 (``within`` False)."""
    infer = affine_latency(latency_s)
    compared: dict[int, tuple[float, float]] = {}
    for b in candidates:
        r = ManagedScheduler(batch_size=b, latency_budget_s=budget_s, infer=infer, train=lambda: train_s,
                             infer_estimate_s=infer, train_estimate_s=train_s, clock=VirtualClock()).run(arrivals_s)
        p95 = r.percentile_s(LATENCY_PERCENTILE)
        compared[b] = (p95 if math.isfinite(p95) else math.inf, r.train_throughput)
    ok = [b for b, (p, _) in compared.items() if p <= budget_s * margin]
    if ok:
        b = max(ok, key=lambda k: (compared[k][1], -k))
        return BatchChoice(b, compared[b][0], compared[b][1], True, compared)
    b = min(compared, key=lambda k: compared[k][0])
    return BatchChoice(b, compared[b][0], compared[b][1], False, compared)
