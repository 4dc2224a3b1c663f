"""A queue of jobs sharing one power domain (the lab, with its racks) under caps: the lab-wide one and any
rack's (the boards labelled rack=GROUP).

- **Placement** (``placement.py``): queued jobs, by priority (high first), then deadline (earliest first), then
  arrival, go to a free board of a model they can run. A job starts when the joint choice with it is feasible
  and its priority-weighted throughput is at least what the running jobs reach without it; of the free boards
  the one giving the best joint value is taken.
- **Joint modes** (``knapsack.solve``): every running job's candidate modes (the Pareto front of its model's
  predicted time against *upper-bound* power) are options; the budgets are the lab's cap minus what the other
  boards draw, and each capped rack's cap minus what its other boards draw; the value of a mode is priority x
  throughput, where throughput is the job's speed relative to its fastest predicted mode on any board model (so
  a minibatch of BERT and one of LSTM count by the work they carry). Re-chosen whenever a job starts or ends: a
  running job may be slowed so another can start, and sped up when power frees.
- **The aggregate loop** (``loop.py``): each window's measured board powers correct each job's model (the
  ratio of observed to predicted power at its mode, applied to its other modes with a small margin). When the
  lab's or a rack's measured sum is over its cap, the jobs under that cap losing the least throughput per watt
  step down first; when it is under every cap over a job by more than the headroom, the jobs gaining the most
  throughput per watt step up while their corrected power fits under each of those caps.

No I/O and no clock of its own: the controller and the evaluation (``jetfleet eval fleet``) call the same
code with their own time."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from jetfleet.controller.fleet import loop, placement
from jetfleet.controller.fleet.joint import Domain, JointRows
from jetfleet.controller.powertrain.optimize import Predictions, pareto_front
from jetfleet.shared.errors import FailedPrecondition, InvalidArgument

LOOP_MARGIN = 0.02       # a corrected prediction's margin (the ratio is measured at one mode)


@dataclass(frozen=True)
class Board:
    """A board in the domain: id, model, the power it draws idle (W), and its rack group ('' none)."""

    board_id: str
    model: str
    idle_w: float            # what it draws when no job of this domain runs there
    available: bool = True   # False: busy with other work (its draw counts, nothing is placed there)
    group: str = ""          # its rack (the boards labelled rack=GROUP): a rack's cap covers it


@dataclass(frozen=True)
class Candidates:
    """A job's candidate modes on one board model, by rising power: the Pareto front of predicted time per
    minibatch (ms) against upper-bound power (W), plus the point prediction of power; and MAXN's."""

    modes: tuple[str, ...]
    time_ms: np.ndarray
    power_w: np.ndarray
    power_hi_w: np.ndarray
    maxn: int = -1             # index of MAXN in the full predictions it came from, -1 if unknown
    maxn_mode: str = ""
    maxn_time_ms: float = math.nan
    maxn_power_hi_w: float = math.nan

    @classmethod
    def from_predictions(cls, p: Predictions, maxn_mode: str = "") -> Candidates:
        """The Pareto front of ``p`` on (time, upper power), sorted by rising upper power."""
        front = pareto_front(np.asarray(p.time_ms), np.asarray(p.power_hi))
        front = front[np.argsort(np.asarray(p.power_hi)[front])]
        names = [str(m) for m in p.modes]
        mi = names.index(maxn_mode) if maxn_mode in names else -1
        return cls(tuple(names[i] for i in front), np.asarray(p.time_ms)[front], np.asarray(p.power_w)[front],
                   np.asarray(p.power_hi)[front], mi, maxn_mode,
                   float(p.time_ms[mi]) if mi >= 0 else math.nan, float(p.power_hi[mi]) if mi >= 0 else math.nan)


@dataclass
class FleetJob:
    """A queued or running job: its work, priority, deadline (s on the scheduler's clock), candidates per
    board model; where and how it runs."""

    job_id: str
    workload: str
    minibatches: int
    candidates: dict[str, Candidates]
    priority: float = 1.0
    deadline_s: float = math.inf
    arrival_s: float = 0.0
    board: str = ""
    model: str = ""                  # the board model it was placed on
    option: int = -1
    ceiling: int = 1 << 30           # the aggregate loop steps up no further than below this (a mode seen over)
    ratio: float = math.nan          # observed / predicted power at its modes (the loop's correction)
    started_s: float = math.nan
    done: float = 0.0                # minibatches done (the caller advances it)
    values: dict[str, np.ndarray] = field(default_factory=dict, repr=False)   # per board model (value_of)

    @property
    def ref_ms(self) -> float:
        """Its fastest predicted time per minibatch on any board model: throughput 1.0."""
        return min(float(c.time_ms.min()) for c in self.candidates.values())

    def key(self) -> tuple[float, float, float, str]:
        """Queue order: higher priority, then earlier deadline, then earlier arrival."""
        return (-self.priority, self.deadline_s, self.arrival_s, self.job_id)


@dataclass(frozen=True)
class Change:
    """A decision: ``job`` runs on ``board`` in ``mode`` (a start, or a new mode), and why."""

    job_id: str
    board: str
    mode: str
    kind: str        # start, rechoose, over, headroom
    reason: str


@dataclass
class FleetScheduler:
    """The queue, placement, joint modes and aggregate loop of one power domain (this module's docstring)."""

    boards: list[Board]
    cap_w: float                                                      # the lab-wide cap (math.inf: none)
    queue: list[FleetJob] = field(default_factory=list)
    running: dict[str, FleetJob] = field(default_factory=dict)        # board id -> job
    board_ratio: dict[str, float] = field(default_factory=dict)       # board id -> its last job's observed ratio
    group_caps_w: dict[str, float] = field(default_factory=dict)      # rack group -> its cap
    exact_placed: int = placement.EXACT_PLACED    # placed jobs up to which placements are judged by exact choices

    def __post_init__(self) -> None:
        self.check_cap(self.cap_w)
        for group, cap in self.group_caps_w.items():
            self.check_cap(cap, group)
        self._index: dict[str, Board] = {}

    # --- inputs ---------------------------------------------------------------------------------------
    @property
    def idle_sum_w(self) -> float:
        """What the domain draws with every board idle."""
        return sum(b.idle_w for b in self.boards)

    def check_cap(self, cap_w: float, group: str = "") -> None:
        """A cap must be positive (math.inf: none) and above the idle power of the boards it covers (the lab's
        every board, a rack's the boards of that group, of which it must have one)."""
        if not cap_w > 0:
            raise InvalidArgument(f"cap {cap_w!r} W: expected a positive number of watts", field="cap_w")
        covered = [b for b in self.boards if not group or b.group == group]
        if group and not covered:
            raise InvalidArgument(f"group {group!r} matches no board of the domain", field="group")
        idle = sum(b.idle_w for b in covered)
        if cap_w < idle:
            raise InvalidArgument(f"cap {cap_w:g} W is below the idle power of its {len(covered)} boards "
                                  f"({idle:.1f} W): nothing could ever run", field="cap_w")

    def set_cap(self, cap_w: float, group: str = "") -> list[Change]:
        """A new cap (the lab's, or a rack group's): checked, then the running jobs' modes re-chosen (and queued
        jobs started if it allows)."""
        self.check_cap(cap_w, group)
        if group:
            self.group_caps_w[group] = cap_w
        else:
            self.cap_w = cap_w
        return self.schedule()

    def submit(self, job: FleetJob) -> None:
        """Queue a job; InvalidArgument when no board model of the domain can run it."""
        models = {b.model for b in self.boards}
        if not any(m in models and len(c.modes) for m, c in job.candidates.items()):
            raise InvalidArgument(f"job {job.job_id}: no board model here can run {job.workload} "
                                  f"(boards: {', '.join(sorted(models)) or 'none'}; models for: "
                                  f"{', '.join(sorted(job.candidates)) or 'none'})", field="workload")
        self.queue.append(job)

    # --- the joint choice -------------------------------------------------------------------------------
    def power_of(self, job: FleetJob, model: str) -> np.ndarray:
        """The power each candidate is checked against: the upper bound, or once observed, the point prediction
        times the observed ratio plus a margin."""
        c = job.candidates[model]
        if math.isnan(job.ratio):   # a board seen drawing more than its models said (its own variation): no less
            seen = self.board_ratio.get(job.board, math.nan) if job.board else math.nan
            if math.isnan(seen):
                return c.power_hi_w
            return np.maximum(c.power_hi_w, c.power_w * seen * (1 + LOOP_MARGIN))
        return np.asarray(c.power_w * job.ratio * (1 + LOOP_MARGIN))

    def value_of(self, job: FleetJob, model: str) -> np.ndarray:
        """Priority x throughput of each candidate (predicted: correcting time from the windows churned modes, as
        docs/fleet-cap.md says)."""
        v = job.values.get(model)
        if v is None:
            v = job.values[model] = np.asarray(job.priority * job.ref_ms / job.candidates[model].time_ms)
        return v

    def row(self, job: FleetJob, board: Board) -> tuple[np.ndarray, np.ndarray]:
        """A job's options (power checked, value) were it on ``board`` (whose power it has shown counts)."""
        saved, job.board = job.board, board.board_id
        try:
            return self.power_of(job, board.model), self.value_of(job, board.model)
        finally:
            job.board = saved

    def reindex(self) -> None:
        """Look the boards up by id (called as each pass starts: the caller may have replaced ``boards``)."""
        self._index = {b.board_id: b for b in self.boards}

    def board(self, board_id: str) -> Board:
        """A board by id; a running job's board that went offline is one that draws nothing and takes nothing."""
        b = self._index.get(board_id)
        if b is None:
            self.reindex()
            b = self._index.get(board_id)
        return b if b is not None else Board(board_id, self.running[board_id].model, 0.0, available=False)

    def domain(self) -> Domain:
        """The caps over the boards (only the racks that have a board)."""
        groups = {b.group for b in self.boards}
        return Domain.of(((b.group, b.idle_w) for b in self.boards), self.cap_w,
                         {g: c for g, c in self.group_caps_w.items() if g in groups})

    def schedule(self) -> list[Change]:
        """Re-choose the running jobs' modes jointly and start what the caps allow; the changes to make."""
        self.reindex()
        placed = [(j, self.board(bid)) for bid, j in self.running.items()]
        for j, _ in placed:
            j.ceiling = 1 << 30      # a new joint choice: the loop's ceilings start again
        free = [b for b in self.boards if b.available and b.board_id not in self.running]
        width = max((len(c.modes) for j in [*self.running.values(), *self.queue] for c in j.candidates.values()),
                    default=1)
        domain = self.domain()
        rows = JointRows(domain, len(placed) + len(free), width)
        for j, b in placed:
            p, v = self.row(j, b)
            rows.add(p, v, domain.rack(b.group), b.idle_w)
        starts, best = placement.place(self, rows, placed, free)
        changes: list[Change] = []
        if best is None:
            if not placed:
                return changes
            picks = [0] * len(placed)   # the running jobs no longer fit (a lower cap): each to its lowest-power mode
        else:
            picks = best.picks
        started = {id(j) for j in starts}
        if started:
            self.queue = [j for j in self.queue if id(j) not in started]
        for (job, board), k in zip(placed, picks, strict=True):
            mode = job.candidates[board.model].modes[k]
            if id(job) in started:
                self.running[board.board_id] = job
                job.option = k
                changes.append(Change(job.job_id, board.board_id, mode, "start", "placed by the joint choice"))
            elif k != job.option:
                old = job.option
                job.option = k
                changes.append(Change(job.job_id, board.board_id, mode, "rechoose",
                                      "joint choice: " + ("slowed" if k < old else "sped up")))
        return changes

    def release(self, job_id: str) -> None:
        """Forget a job that ended (done, failed or cancelled): its board is free. Nothing is re-chosen yet."""
        for bid, j in list(self.running.items()):
            if j.job_id == job_id:
                del self.running[bid]
        self.queue = [j for j in self.queue if j.job_id != job_id]

    def finish(self, job_id: str) -> list[Change]:
        """A job ended: its board is free; the others re-chosen (the changes to make: every one must be applied)."""
        self.release(job_id)
        return self.schedule()

    # --- the aggregate loop --------------------------------------------------------------------------------
    def predicted_sum_w(self, group: str | None = None) -> float:
        """The running jobs' power as the scheduler reckons it plus the other boards' draw: the lab's, or a rack
        group's."""
        self.reindex()
        return loop.predicted_w(self, group)

    def observe(self, board_power_w: Mapping[str, float]) -> list[Change]:
        """A window's mean power per board (W): correct each running job's power model; then step down (over a
        cap) by least throughput lost per watt, or up (headroom under every cap over it) by most throughput gained
        per watt. Boards missing from the window count at the prediction."""
        self.reindex()
        out = []
        for job, kind, reason in loop.observe(self, board_power_w):
            mode = job.candidates[self.board(job.board).model].modes[job.option]
            out.append(Change(job.job_id, job.board, mode, kind, reason))
        return out

    # --- reporting ------------------------------------------------------------------------------------------
    def plan(self) -> list[dict[str, object]]:
        """job -> board -> mode with predicted power (bound used), its throughput; queued jobs with no board."""
        self.reindex()
        rows: list[dict[str, object]] = []
        for bid, j in sorted(self.running.items()):
            m = self.board(bid).model
            rows.append({"job_id": j.job_id, "workload": j.workload, "board": bid, "model": m,
                         "mode": j.candidates[m].modes[j.option], "priority": j.priority,
                         "predicted_w": float(self.power_of(j, m)[j.option]),
                         "throughput": float(self.value_of(j, m)[j.option] / j.priority), "state": "running"})
        for j in sorted(self.queue, key=FleetJob.key):
            rows.append({"job_id": j.job_id, "workload": j.workload, "board": "", "model": "", "mode": "",
                         "priority": j.priority, "predicted_w": 0.0, "throughput": 0.0, "state": "queued"})
        return rows


def fastest_within(c: Candidates, power_w: float) -> int:
    """The fastest candidate whose upper-bound power is within ``power_w``; FailedPrecondition if none."""
    ok = np.flatnonzero(c.power_hi_w <= power_w)
    if not len(ok):
        raise FailedPrecondition(f"no mode within {power_w:.1f} W (lowest {float(c.power_hi_w.min()):.1f} W)",
                                 field="cap_w")
    return int(ok[np.argmin(c.time_ms[ok])])
