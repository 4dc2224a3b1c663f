"""What a running job learns from its board's progress reports, on the board's clock: its totals, how
long it spent in each mode, full windows of a mode's mean power and time per minibatch, and the
closed loop's decisions (``powertrain.feedback``) on each window. No I/O here: the runner feeds the
reports in and carries the decisions out, so the loop runs the same on a twin at 1000x and on a board.

A window is ``window_s`` board seconds of one mode: it starts at the first report after the mode took
effect (after the run's warm-up minibatches for a fresh run), and its power is the board energy
over it divided by its length: everything the board drew while training, at the sensors' rate."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from jetfleet.controller.powertrain.feedback import Feedback, Observation, Step, deadline_step, power_step
from jetfleet.controller.powertrain.service import tolerance_w
from jetfleet.shared.errors import FailedPrecondition

WARMUP_MINIBATCHES = 10      # a fresh run's first minibatches (cuDNN autotuning, allocator growth) are not measured
DEADLINE_TOLERANCE = 0.02    # an ETA this much past the time left counts as late


@dataclass(frozen=True)
class Point:
    """A job's totals at one progress report: minibatches, board seconds of training, energy, the mode, board time."""

    done: int
    elapsed_s: float
    energy_j: float
    mode: str
    t_s: float


@dataclass(frozen=True)
class Window:
    """A full window of one mode: mean power (W), time per minibatch (ms), its span."""

    mode: str
    power_w: float
    time_ms: float
    start: Point
    end: Point


@dataclass
class Tracker:
    """Segments (time and energy per mode) and full windows of a job, from its progress points."""

    window_s: float
    segments: list[dict[str, Any]] = field(default_factory=list)
    _last: Point | None = None
    _start: Point | None = None      # the open window's start
    _run_start_done: int = 0
    _want: str = ""                  # after a step: no window until a report shows this mode

    def new_run(self, at: Point) -> None:
        """A new training command starts at ``at`` (its warm-up is skipped before a window opens)."""
        self._last = at
        self._start = None
        self._run_start_done = at.done

    def reset_window(self, mode: str) -> None:
        """A step to ``mode`` was taken: the next window starts at the first report in it (reports the board sent
        before the step took effect, still in flight, open no window)."""
        self._start = None
        self._want = mode

    def add(self, p: Point, device_id: str) -> Window | None:
        """Account a report's progress to its mode's segment; return a window when one is full."""
        last = self._last
        self._last = p
        if last is None:
            return None
        d_done, d_s, d_j = p.done - last.done, p.elapsed_s - last.elapsed_s, p.energy_j - last.energy_j
        if d_done < 0 or d_s < 0:
            return None   # a report older than the last: nothing new
        mode = p.mode if last.mode == p.mode else last.mode  # a step: the minibatches so far ran mostly in the old mode
        seg = self.segments[-1] if self.segments else None
        if seg is None or seg["mode"] != mode or seg["device_id"] != device_id:
            seg = {"mode": mode, "device_id": device_id, "minibatches": 0, "seconds": 0.0, "energy_j": 0.0}
            self.segments.append(seg)
        seg["minibatches"] += d_done
        seg["seconds"] += d_s
        seg["energy_j"] += d_j
        if self._want and p.mode == self._want:
            self._want = ""
        if self._want or last.mode != p.mode or p.done - self._run_start_done < WARMUP_MINIBATCHES:
            self._start = None
            return None
        if self._start is None or self._start.mode != p.mode:
            self._start = p
            return None
        s = self._start
        if p.elapsed_s - s.elapsed_s < self.window_s or p.done <= s.done:
            return None
        self._start = p
        span = p.elapsed_s - s.elapsed_s
        return Window(p.mode, (p.energy_j - s.energy_j) / span, span / (p.done - s.done) * 1e3, s, p)


class ClosedLoop:
    """The job's goal kept on its windows: how many steps it has left and what each window decides."""

    def __init__(self, feedback: Feedback, index: dict[str, int], *, goal: str, power_budget_w: float,
                 deadline_s: float, minibatches: int, max_steps: int, steps_used: int = 0,
                 latency_budget_ms: float = 0.0) -> None:
        self.feedback, self.index = feedback, index
        self.goal, self.budget_w, self.deadline_s, self.minibatches = goal, power_budget_w, deadline_s, minibatches
        self.max_steps, self.steps_used = max_steps, steps_used
        self.windows = 0
        self.windows_missed = 0     # windows over the budget (beyond the sensor noise) or late
        self.last_missed = False
        self._settled: set[int] = set()   # modes whose first window found no reason to step
        self.latency_budget_ms = latency_budget_ms   # a job serving inference: its p95 budget (0: none)
        self.latency_missed = False
        self.latency_windows_missed = 0

    def on_window(self, w: Window, p95_ms: float = math.nan) -> Step | None:
        """Decide on a full window of the current mode (and, serving inference, the stream's p95 over it): a step,
        or None to stay. Power over its budget steps down first; else a p95 over the latency budget steps to the
        fastest mode predicted within the power budget, if that is faster than this one."""
        self.windows += 1
        i = self.index[w.mode]
        steps_left = self.max_steps - self.steps_used
        if self.latency_budget_ms:
            self.latency_missed = math.isfinite(p95_ms) and p95_ms > self.latency_budget_ms
            self.latency_windows_missed += self.latency_missed
        if self.goal == "power":
            self.last_missed = w.power_w > self.budget_w + tolerance_w(self.budget_w)
            self.windows_missed += self.last_missed
            if self.latency_missed and not self.last_missed and steps_left > 0:
                step = self._faster(i, w, p95_ms)
                if step is not None:
                    self.steps_used += 1
                    return step
            if steps_left <= 0 or (i in self._settled and not self.last_missed):
                self.feedback.observe(Observation(i, w.power_w, w.time_ms), over_budget=self.last_missed)
                return None
            step = power_step(self.feedback, i, w.power_w, w.time_ms, budget_w=self.budget_w,
                              tolerance_w=tolerance_w(self.budget_w), steps_left=steps_left)
        elif self.goal == "deadline":
            remaining = self.minibatches - w.end.done
            left = self.deadline_s - w.end.elapsed_s
            self.last_missed = w.time_ms / 1e3 * remaining > left * (1 + DEADLINE_TOLERANCE)
            self.windows_missed += self.last_missed
            if steps_left <= 0 or (i in self._settled and not self.last_missed):
                self.feedback.observe(Observation(i, w.power_w, w.time_ms))
                return None
            step = deadline_step(self.feedback, i, w.power_w, w.time_ms, remaining_minibatches=remaining,
                                 time_left_s=left, tolerance=DEADLINE_TOLERANCE, steps_left=steps_left)
        else:
            return None
        if step is not None:
            self.steps_used += 1
        else:
            self._settled.add(i)
        return step

    def _faster(self, i: int, w: Window, p95_ms: float) -> Step | None:
        """A latency step: the fastest mode predicted within the power budget, if faster than mode ``i``."""
        try:
            c = self.feedback.choose(power_budget_w=self.budget_w)
        except FailedPrecondition:
            return None
        if c.index == i or c.time_ms >= w.time_ms:
            return None   # nothing faster within the power budget: the power path goes on as usual
        self.feedback.observe(Observation(i, w.power_w, w.time_ms))
        return Step(c, f"observed p95 {p95_ms:.1f} ms over the {self.latency_budget_ms:g} ms latency budget: "
                       f"{c.time_ms:.1f} ms per minibatch predicted instead of {w.time_ms:.1f}", "latency")
