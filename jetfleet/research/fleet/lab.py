"""An accelerated emulated lab under a cap, driven by a simulated clock: the same ``FleetScheduler`` the
controller runs decides; the twin boards' true behaviour (``EmulatedBoard.expected``: each board's own
variation included) says how fast jobs go and what the boards draw; each window's measured power carries a
window's sensor noise. Event-driven: between a window's end, an arrival and a job's end nothing changes.

The predictions are real PowerTrain models: a reference on ResNet-18 on AGX Orin's 4,368-mode grid,
transferred to every (workload, board model) with 50 modes profiled on one board of the model (balanced
strategy, 5-fold conformal calibration, upper bounds at 90%) — what a job builds before it runs.

Policies compared under one cap, one set of boards and one arrival sequence:
- ``joint``: the fleet scheduler (joint modes by the knapsack, placement, the aggregate loop);
- ``maxn``: every job at MAXN, a queued job held back until its MAXN upper bound fits under the cap;
- ``split``: the cap split equally per board, each job at the fastest mode whose upper bound fits its share."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from jetfleet.controller.fleet.scheduler import Board, Candidates, Change, FleetJob, FleetScheduler
from jetfleet.research.powertrain.choices import calibrated_repeats
from jetfleet.research.powertrain.evaluate import References, train_references, twin_truth
from jetfleet.shared.catalog import get_catalog
from jetfleet.twin import EmulatedBoard
from jetfleet.twin.physics import idle_state

WINDOW_S = 10.0           # board seconds per aggregate-loop window
WINDOW_NOISE = 0.003      # a window's mean power, relative
WORKLOADS = ("resnet18", "mobilenet_v3", "yolo_v8n", "bert_base", "lstm")
LAB = ("agx-orin", "agx-orin", "agx-orin", "agx-xavier", "agx-xavier", "agx-xavier", "orin-nano", "orin-nano")
CONFIDENCE = 0.9


@dataclass(frozen=True)
class Models:
    """Candidates per (workload, board model) from PowerTrain models, and the mode strings' PowerModes."""

    candidates: dict[tuple[str, str], Candidates]


def build_models(workloads: tuple[str, ...], board_models: tuple[str, ...], *, k: int = 50, epochs: int = 100,
                 progress: Callable[[str], None] = lambda s: None) -> Models:
    """Train the reference and transfer it to every (workload, board model) as a job would."""
    progress("reference resnet18 on agx-orin")
    refs: References = train_references(twin_truth("agx-orin", "resnet18"), epochs=epochs)
    out: dict[tuple[str, str], Candidates] = {}
    for m in sorted(set(board_models)):
        for w in workloads:
            progress(f"transfer to {w} on {m}")
            g = twin_truth(m, w, "powertrain", seed=0)
            rep = calibrated_repeats(refs, g, k, 1, "balanced")[0]
            out[(w, m)] = Candidates.from_predictions(rep.predictions(g, CONFIDENCE), str(get_catalog(m).maxn))
    return Models(out)


@dataclass
class TwinLab:
    """The true boards: (model, seed) twins, their idle power, truth per (board, workload, mode) cached."""

    models: tuple[str, ...]
    twins: list[EmulatedBoard] = field(init=False)
    _cache: dict[tuple[int, str, str], tuple[float, float]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.twins = [EmulatedBoard(m, seed=i + 1) for i, m in enumerate(self.models)]

    def board_id(self, i: int) -> str:
        """Board ``i``'s id: MODEL-I."""
        return f"{self.models[i]}-{i}"

    def boards(self) -> list[Board]:
        """The boards as the scheduler sees them."""
        return [Board(self.board_id(i), t.model, self.idle_w(i)) for i, t in enumerate(self.twins)]

    def idle_w(self, i: int) -> float:
        """Board ``i`` idle at MAXN (W), its own variation included."""
        t = self.twins[i]
        return float(idle_state(t.catalog, t.catalog.maxn).total_w * t.power_factor)

    def truth(self, i: int, workload: str, mode: str) -> tuple[float, float]:
        """(seconds per minibatch, W) of board ``i`` running ``workload`` in ``mode``."""
        key = (i, workload, mode)
        if key not in self._cache:
            t = self.twins[i]
            self._cache[key] = t.expected(workload, t.catalog.parse_mode(mode))
        return self._cache[key]

    def peak_w(self, workloads: tuple[str, ...]) -> float:
        """The boards' summed peak: each board's highest MAXN power over the workloads."""
        return sum(max(self.truth(i, w, str(t.catalog.maxn))[1] for w in workloads) for i, t in enumerate(self.twins))


@dataclass(frozen=True)
class JobSpec:
    """A job of the emulated queue: id, workload, minibatches, priority, arrival (s)."""

    job_id: str
    workload: str
    minibatches: int
    priority: float
    arrival_s: float


def make_jobs(n: int, seed: int, *, workloads: tuple[str, ...] = WORKLOADS, span_s: float = 3600.0,
              job_s: tuple[float, float] = (600.0, 2400.0)) -> list[JobSpec]:
    """``n`` jobs cycling the workloads, arriving uniformly over ``span_s``, each ``job_s`` long at AGX Orin MAXN
    (nominal board), a quarter at priority 2."""
    rng = np.random.default_rng([seed, 17])
    nominal = EmulatedBoard("agx-orin", seed=0)
    maxn = nominal.catalog.maxn
    arrivals = np.sort(rng.uniform(0, span_s, n))
    arrivals[0] = 0.0
    out = []
    for i in range(n):
        w = workloads[i % len(workloads)]
        secs = float(rng.uniform(*job_s))
        mb = max(1, int(secs / nominal.expected(w, maxn)[0]))
        out.append(JobSpec(f"j{i:02d}", w, mb, 2.0 if rng.random() < 0.25 else 1.0, float(arrivals[i])))
    return out


def work_s(spec: JobSpec) -> float:
    """A job's work in AGX Orin MAXN seconds (the throughput unit)."""
    nominal = EmulatedBoard("agx-orin", seed=0)
    return spec.minibatches * nominal.expected(spec.workload, nominal.catalog.maxn)[0]


# --- the baselines (same interface as FleetScheduler: queue, running, submit, schedule, finish, observe) ----
@dataclass
class MaxnHoldback:
    """Every job at MAXN; a queued job starts when its MAXN upper bound fits under the cap."""

    boards: list[Board]
    cap_w: float
    queue: list[FleetJob] = field(default_factory=list)
    running: dict[str, FleetJob] = field(default_factory=dict)

    def submit(self, job: FleetJob) -> None:
        """Queue a job."""
        self.queue.append(job)

    def _fits(self, extra: Board, job: FleetJob) -> bool:
        total = sum(b.idle_w for b in self.boards if b.board_id not in self.running and b is not extra)
        for bid, j in self.running.items():
            total += j.candidates[self._model(bid)].maxn_power_hi_w
        return total + job.candidates[extra.model].maxn_power_hi_w <= self.cap_w

    def _model(self, bid: str) -> str:
        return next(b.model for b in self.boards if b.board_id == bid)

    def schedule(self) -> list[Change]:
        """Start each queued job whose MAXN fits, on the fastest free board."""
        out = []
        for job in sorted(self.queue, key=FleetJob.key):
            free = sorted((b for b in self.boards if b.board_id not in self.running and b.model in job.candidates),
                          key=lambda b: job.candidates[b.model].maxn_time_ms)
            for b in free:
                if self._fits(b, job):
                    self.queue.remove(job)
                    self.running[b.board_id] = job
                    job.board = b.board_id
                    out.append(Change(job.job_id, b.board_id, job.candidates[b.model].maxn_mode, "start", "MAXN fits"))
                    break
        return out

    def finish(self, job_id: str) -> list[Change]:
        """A job ended: its board frees."""
        self.running = {b: j for b, j in self.running.items() if j.job_id != job_id}
        return self.schedule()

    def observe(self, board_power_w: dict[str, float]) -> list[Change]:
        """No loop: the baseline never steps."""
        return []


@dataclass
class EqualSplit(MaxnHoldback):
    """The cap split equally per board; a job runs at the fastest mode whose upper bound fits its board's share."""

    def schedule(self) -> list[Change]:
        """Start each queued job whose MAXN fits, on the fastest free board."""
        share = self.cap_w / len(self.boards)
        out = []
        for job in sorted(self.queue, key=FleetJob.key):
            best: tuple[float, Board, int] | None = None
            for b in self.boards:
                if b.board_id in self.running or b.model not in job.candidates:
                    continue
                c = job.candidates[b.model]
                ok = np.flatnonzero(c.power_hi_w <= share)
                if len(ok):
                    k = int(ok[np.argmin(c.time_ms[ok])])
                    if best is None or c.time_ms[k] < best[0]:
                        best = (float(c.time_ms[k]), b, k)
            if best is not None:
                _, b, k = best
                self.queue.remove(job)
                self.running[b.board_id] = job
                job.board, job.option = b.board_id, k
                out.append(Change(job.job_id, b.board_id, job.candidates[b.model].modes[k], "start", "share fits"))
        return out


POLICIES = {"joint": FleetScheduler, "maxn": MaxnHoldback, "split": EqualSplit}


@dataclass
class RunResult:
    """One run: makespan (s), throughput (AGX Orin MAXN seconds of work per second), mean job time (s), seconds
    the lab's true power was > 1% over the cap, peak over the cap (%), jobs that never started."""

    policy: str
    cap_w: float
    makespan_s: float
    throughput: float
    mean_job_s: float
    over_s: float
    peak_over_pct: float
    changes: int
    unstarted: int


def simulate(policy: str, lab: TwinLab, models: Models, specs: list[JobSpec], cap_w: float,
             *, seed: int = 0, horizon_s: float = 30 * 86400.0) -> RunResult:
    """Run ``specs`` on ``lab`` under ``cap_w`` with a policy; the simulated clock starts at 0."""
    boards = lab.boards()
    index = {b.board_id: i for i, b in enumerate(boards)}
    sched = POLICIES[policy](boards, cap_w)   # type: ignore[operator]
    rng = np.random.default_rng([seed, 5])
    pending = sorted(specs, key=lambda s: s.arrival_s)
    jobs = {s.job_id: FleetJob(s.job_id, s.workload, s.minibatches,
                               {m: models.candidates[(s.workload, m)] for m in {b.model for b in boards}
                                if (s.workload, m) in models.candidates}, s.priority, arrival_s=s.arrival_s)
            for s in specs}
    mode: dict[str, str] = {}          # board -> the mode its job runs
    ends: dict[str, float] = {}
    t, next_window, over_s, peak, n_changes = 0.0, WINDOW_S, 0.0, 0.0, 0

    def apply(changes: list[Change]) -> None:
        nonlocal n_changes
        for c in changes:
            mode[c.board] = c.mode
            n_changes += c.kind != "start"

    def board_power(bid: str) -> float:
        job = sched.running.get(bid)
        if job is None:
            return boards[index[bid]].idle_w
        return lab.truth(index[bid], job.workload, mode[bid])[1]

    while (pending or sched.queue or sched.running) and t < horizon_s:
        while pending and pending[0].arrival_s <= t:
            sched.submit(jobs[pending.pop(0).job_id])
            apply(sched.schedule())
        rates = {bid: 1.0 / lab.truth(index[bid], j.workload, mode[bid])[0] for bid, j in sched.running.items()}
        t_end = min((t + (j.minibatches - j.done) / rates[bid] for bid, j in sched.running.items()), default=math.inf)
        t_next = min(t_end, next_window, pending[0].arrival_s if pending else math.inf)
        if not math.isfinite(t_next):
            break   # jobs queued that no policy decision will ever start
        dt = max(0.0, t_next - t)
        total = sum(board_power(b.board_id) for b in boards)
        if total > cap_w * 1.01:
            over_s += dt
        peak = max(peak, total / cap_w - 1)
        for bid, j in sched.running.items():
            j.done = min(j.minibatches, j.done + rates[bid] * dt)
        t = t_next
        for j in list(sched.running.values()):
            if j.done >= j.minibatches - 1e-6:
                ends[j.job_id] = t
                apply(sched.finish(j.job_id))
        if t >= next_window:
            next_window += WINDOW_S
            measured = {b.board_id: board_power(b.board_id) * float(rng.lognormal(0, WINDOW_NOISE)) for b in boards}
            apply(sched.observe(measured))
    done = [s for s in specs if s.job_id in ends]
    makespan = max(ends.values(), default=math.inf) if len(done) == len(specs) else math.inf
    thr = sum(work_s(s) for s in done) / makespan if math.isfinite(makespan) and makespan > 0 else 0.0
    return RunResult(policy, cap_w, makespan, thr,
                     float(np.mean([ends[s.job_id] - s.arrival_s for s in done])) if done else math.inf,
                     over_s, 100 * max(0.0, peak), n_changes, len(specs) - len(done))
