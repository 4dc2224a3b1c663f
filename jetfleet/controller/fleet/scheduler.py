"""A queue of jobs sharing one power domain (the lab, or a group of its boards) under a cap.

- **Placement**: queued jobs, by priority (high first), then deadline (earliest first), then arrival, go to
  a free board of a model they can run. A job starts when the joint choice with it is feasible and its
  priority-weighted throughput is at least what the running jobs reach without it; of the free boards'
  models the one giving the best joint value is taken.
- **Joint modes** (``knapsack.solve``): every running job's candidate modes (the Pareto front of its
  model's predicted time against *upper-bound* power) are options; the budget is the cap minus what the
  idle boards draw; the value of a mode is priority x throughput, where throughput is the job's speed
  relative to its fastest predicted mode on any board model (so a minibatch of BERT and one of LSTM count
  by the work they carry). Re-chosen whenever a job starts or ends: a running job may be slowed so another
  can start, and sped up when power frees.
- **The aggregate loop** (``observe``): each window's measured board powers correct each job's model (the
  ratio of observed to predicted power at its mode, applied to its other modes with a small margin). When
  the lab's measured sum is over the cap by more than the sensors' tolerance, the jobs losing the least
  throughput per watt step down first; when it is under the cap by more than the headroom, the jobs
  gaining the most throughput per watt step up while their corrected power fits.

No I/O and no clock of its own: the controller and the evaluation (``jetfleet eval fleet``) call the same
code with their own time."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from jetfleet.controller.fleet.knapsack import Option, solve
from jetfleet.controller.powertrain.optimize import Predictions, pareto_front
from jetfleet.shared.errors import FailedPrecondition, InvalidArgument

OVER_TOLERANCE = 0.01    # the sensors' noise: a sum this far over the cap counts as over (INA3221 ~1%)
HEADROOM = 0.04          # under the cap by more than this share: step up
LOOP_MARGIN = 0.02       # a corrected prediction's margin (the ratio is measured at one mode)
RATIO_GAIN = 0.5         # how fast the observed/predicted ratio follows new windows
WAIT_GAIN = 0.25         # a queued job waits for a busy faster board if it would finish this much sooner there


@dataclass(frozen=True)
class Board:
    """A board in the domain: id, model, and the power it draws idle (W)."""

    board_id: str
    model: str
    idle_w: float            # what it draws when no job of this domain runs there
    available: bool = True   # False: busy with other work (its draw counts, nothing is placed there)


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
    cap_w: float
    queue: list[FleetJob] = field(default_factory=list)
    running: dict[str, FleetJob] = field(default_factory=dict)    # board id -> job
    board_ratio: dict[str, float] = field(default_factory=dict)   # board id -> its last job's observed ratio

    def __post_init__(self) -> None:
        self.check_cap(self.cap_w)

    # --- inputs ---------------------------------------------------------------------------------------
    @property
    def idle_sum_w(self) -> float:
        """What the domain draws with every board idle."""
        return sum(b.idle_w for b in self.boards)

    def check_cap(self, cap_w: float) -> None:
        """A cap must be positive (math.inf: none) and above the domain's idle power (what the boards draw idle)."""
        if not cap_w > 0:
            raise InvalidArgument(f"cap {cap_w!r} W: expected a positive number of watts", field="cap_w")
        if cap_w < self.idle_sum_w:
            raise InvalidArgument(f"cap {cap_w:g} W is below the idle power of its {len(self.boards)} boards "
                                  f"({self.idle_sum_w:.1f} W): nothing could ever run", field="cap_w")

    def set_cap(self, cap_w: float) -> list[Change]:
        """A new cap: checked, then the running jobs' modes re-chosen (and queued jobs started if it allows)."""
        self.check_cap(cap_w)
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
        return np.asarray(job.priority * job.ref_ms / job.candidates[model].time_ms)

    def _board(self, board_id: str) -> Board:
        for b in self.boards:
            if b.board_id == board_id:
                return b
        return Board(board_id, self.running[board_id].model, 0.0, available=False)   # a running job's board that went offline

    def _joint(self, placed: list[tuple[FleetJob, Board]]) -> tuple[list[int], float] | None:
        busy = {b.board_id for _, b in placed}
        budget = self.cap_w - sum(b.idle_w for b in self.boards if b.board_id not in busy)
        groups = [[Option(float(p), float(v)) for p, v in zip(self.power_of(j, b.model), self.value_of(j, b.model),
                                                              strict=True)] for j, b in placed]
        return solve(groups, budget)

    def schedule(self) -> list[Change]:
        """Re-choose the running jobs' modes jointly and start what the cap allows; the changes to make."""
        placed = [(j, self._board(bid)) for bid, j in self.running.items()]
        for j, _ in placed:
            j.ceiling = 1 << 30      # a new joint choice: the loop's ceilings start again
        best = self._joint(placed)
        starts: list[FleetJob] = []
        awaited: set[str] = set()       # busy boards a queued job waits for (the next job does not count on them)
        for job in sorted(self.queue, key=FleetJob.key):
            taken = {j.board for j in starts}
            free = [b for b in self.boards if b.available and b.board_id not in self.running
                    and b.model in job.candidates and b.board_id not in taken]
            tried: list[tuple[Board, tuple[list[int], float]]] = []
            for b in free:
                job.board = b.board_id     # what this board showed of its power counts (power_of)
                r = self._joint([*placed, (job, b)])
                if r is not None:
                    tried.append((b, r))
            job.board = ""
            if not tried:
                continue
            board, r = max(tried, key=lambda t: t[1][1])
            if best is not None and r[1] < best[1] - 1e-9:
                continue
            wait_for = self._worth_waiting(job, board, awaited)
            if wait_for:
                awaited.add(wait_for)
                continue
            placed.append((job, board))
            job.board, job.model = board.board_id, board.model
            starts.append(job)
            best = r
        if len(starts) > 1 and best is not None:
            placed, best = self._swap(placed, starts, best)
        changes: list[Change] = []
        if best is None:
            if placed:   # the running jobs no longer fit (a lower cap): each to its lowest-power mode
                best = ([0] * len(placed), 0.0)
            else:
                return changes
        for (job, board), k in zip(placed, best[0], strict=True):
            mode = job.candidates[board.model].modes[k]
            if job in starts:
                self.queue.remove(job)
                self.running[board.board_id] = job
                job.option = k
                changes.append(Change(job.job_id, board.board_id, mode, "start", "placed by the joint choice"))
            elif k != job.option:
                old = job.option
                job.option = k
                changes.append(Change(job.job_id, board.board_id, mode, "rechoose",
                                      "joint choice: " + ("slowed" if k < old else "sped up")))
        return changes

    def _worth_waiting(self, job: FleetJob, board: Board, awaited: set[str]) -> str:
        """A busy board of another model on which the job, started when that board frees (its job's remaining
        minibatches at its current mode), would still finish clearly sooner (by WAIT_GAIN) than on ``board`` at
        its fastest: that board's id (the job waits for it), else ''. Keeps long jobs off slow boards, which
        would otherwise set the makespan."""
        left = job.minibatches - job.done
        here_s = left * float(job.candidates[board.model].time_ms.min()) / 1e3
        best_s, best_bid = here_s * (1 - WAIT_GAIN), ""
        for bid, other in self.running.items():
            b = self._board(bid)
            if bid in awaited or b.model == board.model or b.model not in job.candidates or not b.available:
                continue
            frees_s = (other.minibatches - other.done) * float(other.candidates[b.model].time_ms[other.option]) / 1e3
            there_s = frees_s + left * float(job.candidates[b.model].time_ms.min()) / 1e3
            if there_s < best_s:
                best_s, best_bid = there_s, bid
        return best_bid

    def _swap(self, placed: list[tuple[FleetJob, Board]], starts: list[FleetJob],
              best: tuple[list[int], float]) -> tuple[list[tuple[FleetJob, Board]], tuple[list[int], float]]:
        """Jobs placed in one pass, greedily in queue order: exchange their boards pairwise while the joint value
        grows (two jobs on two board models are better matched the other way round)."""
        improved = True
        while improved:
            improved = False
            idx = [i for i, (j, _) in enumerate(placed) if j in starts]
            for a, b in itertools.combinations(idx, 2):
                (ja, ba), (jb, bb) = placed[a], placed[b]
                if ba.model == bb.model or bb.model not in ja.candidates or ba.model not in jb.candidates:
                    continue
                trial = list(placed)
                trial[a], trial[b] = (ja, bb), (jb, ba)
                ja.board, jb.board = bb.board_id, ba.board_id
                r = self._joint(trial)
                ja.board, jb.board = ba.board_id, bb.board_id
                if r is not None and r[1] > best[1] + 1e-9:
                    placed, best, improved = trial, r, True
                    ja.board, ja.model, jb.board, jb.model = bb.board_id, bb.model, ba.board_id, ba.model
                    break
        return placed, best

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
    def predicted_sum_w(self) -> float:
        """The running jobs' power as the scheduler reckons it plus the idle boards'."""
        total = sum(b.idle_w for b in self.boards if b.board_id not in self.running)
        for bid, j in self.running.items():
            total += float(self.power_of(j, self._board(bid).model)[j.option])
        return total

    def observe(self, board_power_w: dict[str, float]) -> list[Change]:
        """A window's mean power per board (W): correct each running job's power model; then step down (over the
        cap) by least throughput lost per watt, or up (headroom) by most throughput gained per watt. Boards
        missing from the window count at the prediction."""
        for bid, j in self.running.items():
            if bid in board_power_w:
                c = j.candidates[self._board(bid).model]
                r = board_power_w[bid] / float(c.power_w[j.option])
                j.ratio = r if math.isnan(j.ratio) else j.ratio + RATIO_GAIN * (r - j.ratio)
                self.board_ratio[bid] = j.ratio
        measured = sum(board_power_w.get(b.board_id, b.idle_w) if b.board_id not in self.running else
                       board_power_w.get(b.board_id, float(self.power_of(self.running[b.board_id], b.model)
                                                         [self.running[b.board_id].option]))
                       for b in self.boards)
        changes: list[Change] = []
        if measured > self.cap_w:    # any excess: a window's mean is good to ~0.3%, the target is 1%
            est = measured
            while est > self.cap_w * (1 - OVER_TOLERANCE / 2):
                step = self._cheapest_down()
                if step is None:
                    break
                job, dp = step
                job.ceiling = min(job.ceiling, job.option)   # it was over here: no step back up to it until re-chosen
                job.option -= 1
                est -= dp
                changes.append(self._change(job, "over", f"lab {measured:.1f} W over the {self.cap_w:g} W cap"))
        elif measured < self.cap_w * (1 - HEADROOM):
            est = self.predicted_sum_w()
            while True:
                step = self._best_up(self.cap_w * (1 - OVER_TOLERANCE) - est)   # land inside the noise band
                if step is None:
                    break
                job, dp = step
                job.option += 1
                est += dp
                changes.append(self._change(job, "headroom", f"lab {measured:.1f} W under the {self.cap_w:g} W cap"))
        final: dict[str, Change] = {}    # several steps of one job in a window: one move (to the last), in first order
        for ch in changes:
            final[ch.job_id] = ch
        return list(final.values())

    def _change(self, job: FleetJob, kind: str, reason: str) -> Change:
        model = self._board(job.board).model
        return Change(job.job_id, job.board, job.candidates[model].modes[job.option], kind, reason)

    def _cheapest_down(self) -> tuple[FleetJob, float] | None:
        best: tuple[float, FleetJob, float] | None = None
        for bid, j in self.running.items():
            if j.option <= 0:
                continue
            m = self._board(bid).model
            p, v = self.power_of(j, m), self.value_of(j, m)
            dp = float(p[j.option] - p[j.option - 1])
            cost = float(v[j.option] - v[j.option - 1]) / max(dp, 1e-9)
            if best is None or cost < best[0]:
                best = (cost, j, dp)
        return None if best is None else (best[1], best[2])

    def _best_up(self, room_w: float) -> tuple[FleetJob, float] | None:
        best: tuple[float, FleetJob, float] | None = None
        for bid, j in self.running.items():
            m = self._board(bid).model
            if j.option >= min(len(j.candidates[m].modes), j.ceiling) - 1:
                continue
            p, v = self.power_of(j, m), self.value_of(j, m)
            dp = float(p[j.option + 1] - p[j.option])
            if dp > room_w:
                continue
            gain = float(v[j.option + 1] - v[j.option]) / max(dp, 1e-9)
            if gain > 0 and (best is None or gain > best[0]):
                best = (gain, j, dp)
        return None if best is None else (best[1], best[2])

    # --- reporting ------------------------------------------------------------------------------------------
    def plan(self) -> list[dict[str, object]]:
        """job -> board -> mode with predicted power (bound used), its throughput; queued jobs with no board."""
        rows: list[dict[str, object]] = []
        for bid, j in sorted(self.running.items()):
            m = self._board(bid).model
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
