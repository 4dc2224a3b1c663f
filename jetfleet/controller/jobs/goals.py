"""A job's goal as an object: how it chooses a mode, when a window of the board's telemetry breaks it, which step
the closed loop takes, when a step made things worse and is undone, and whether the job kept it. One definition of
each, used by the choice, the loop (``loop.py``) and the summary; ``eval choices`` runs the same objects.

- fastest under a power budget: a window is over when its mean power exceeds the budget by more than the sensors'
  noise (``tolerance_w``); the verdict holds the whole job's mean power and its last window to the budget, and the
  last mode's observed time per minibatch to its predicted upper bound (a mode that ran slower than promised was
  not the fastest the job could have had);
- lowest power within a deadline: a window is late when its time per minibatch, over the minibatches left, would
  end more than DEADLINE_TOLERANCE past the time left; the verdict holds the board time to the deadline and the
  last mode's observed power to its predicted upper bound;
- least energy: no constraint; the verdict holds the last mode's energy per minibatch to its predicted upper bound;
- a fleet share (the lab cap's queue decides the mode): a deadline if it has one.
"""

from __future__ import annotations

import abc
import math
from typing import ClassVar

import numpy as np

from jetfleet.controller.jobs.windows import Window
from jetfleet.controller.powertrain.feedback import Feedback, Observation, Step, deadline_step, power_step
from jetfleet.controller.powertrain.optimize import Choice, Predictions, choose
from jetfleet.controller.powertrain.service import tolerance_w
from jetfleet.controller.store.job_record import JobRecord, Observed, Verdict

DEADLINE_TOLERANCE = 0.02    # an ETA this much past the time left counts as late
UNDO_MARGIN = 0.02           # a step is undone when its mode does this much worse than the mode it left (window noise: 1%)
OBJECTIVE_STEPS = ("headroom", "slack", "latency")   # steps taken for the objective (faster, less power), not the limit


class Goal(abc.ABC):
    """What a job is held to (module docstring)."""

    kind: ClassVar[str]

    @abc.abstractmethod
    def describe(self) -> str:
        """As operators read it: 'fastest under 30 W'."""

    @abc.abstractmethod
    def choose(self, pred: Predictions, minibatches: int, allowed: np.ndarray | None = None) -> Choice:
        """The mode to start in (``optimize.choose``); FailedPrecondition when no mode can meet the goal."""

    def missed(self, w: Window) -> bool:
        """Whether a full window breaks the goal's limit (over the budget, late)."""
        return False

    def step(self, fb: Feedback, i: int, w: Window, steps_left: int) -> Step | None:
        """After a window of mode ``i``: the step to take, or None to stay (the window is observed either way)."""
        fb.observe(Observation(i, w.power_w, w.time_ms))
        return None

    def worse(self, kind: str, before: Window, after: Window) -> str:
        """Why the step of ``kind`` that led from ``before``'s mode to ``after``'s made the job worse ('' if it did
        not): a step for the objective that lost on it, or a step for the limit that took it further away."""
        return ""

    @abc.abstractmethod
    def verdict(self, rec: JobRecord, p95_ms: float = math.nan) -> Verdict:
        """Whether a job that ran to its end kept the goal (see ``judge`` for the others)."""


class PowerBudget(Goal):
    """Fastest under a power budget (W)."""

    kind = "power"

    def __init__(self, budget_w: float, latency_budget_ms: float = 0.0) -> None:
        self.budget_w, self.latency_budget_ms = budget_w, latency_budget_ms

    def describe(self) -> str:
        """'fastest under 30 W'."""
        return f"fastest under {self.budget_w:g} W"

    def choose(self, pred: Predictions, minibatches: int, allowed: np.ndarray | None = None) -> Choice:
        """The fastest mode whose upper power bound fits."""
        return choose(pred, power_budget_w=self.budget_w, minibatches_per_epoch=minibatches, allowed=allowed)

    def over(self, power_w: float) -> bool:
        """A mean power over the budget beyond the sensors' noise."""
        return power_w > self.budget_w + tolerance_w(self.budget_w)

    def missed(self, w: Window) -> bool:
        """The window's mean power is over the budget."""
        return self.over(w.power_w)

    def step(self, fb: Feedback, i: int, w: Window, steps_left: int) -> Step | None:
        """Over: the fastest mode whose corrected bound fits; under with headroom: a faster one (``power_step``)."""
        return power_step(fb, i, w.power_w, w.time_ms, budget_w=self.budget_w, over=self.missed(w),
                          steps_left=steps_left)

    def worse(self, kind: str, before: Window, after: Window) -> str:
        """A step for speed that ran slower, or a step down that drew more."""
        if kind in OBJECTIVE_STEPS and after.time_ms > before.time_ms * (1 + UNDO_MARGIN):
            return (f"{after.mode} ran at {after.time_ms:.1f} ms per minibatch, slower than {before.time_ms:.1f} in "
                    f"{before.mode}")
        if kind == "over" and after.power_w > before.power_w * (1 + UNDO_MARGIN):
            return f"{after.mode} drew {after.power_w:.2f} W, more than {before.power_w:.2f} in {before.mode}"
        return ""

    def verdict(self, rec: JobRecord, p95_ms: float = math.nan) -> Verdict:
        """The job's mean power and its last window within the budget; the last mode no slower than promised."""
        mean_w = rec.energy_j / rec.elapsed_s if rec.elapsed_s > 0 else math.nan
        last = rec.observed
        within = math.isfinite(mean_w) and not self.over(mean_w) and (last is None or not self.over(last.power_w))
        constraint = f"mean {mean_w:.2f} W {'within' if within else 'OVER'} the {self.budget_w:g} W budget"
        if last is not None and self.over(last.power_w):
            constraint += f", last window {last.power_w:.2f} W"
        kept, objective = _objective(rec, "time")
        if self.latency_budget_ms:
            late = math.isfinite(p95_ms) and p95_ms > self.latency_budget_ms
            kept = kept and not late
            objective += (f"; inference p95 {p95_ms:.1f} ms {'OVER' if late else 'within'} its "
                          f"{self.latency_budget_ms:g} ms budget")
        return Verdict(True, within and kept, constraint, objective)


class Deadline(Goal):
    """Lowest power that finishes the job's minibatches within a deadline (board seconds)."""

    kind = "deadline"

    def __init__(self, deadline_s: float, minibatches: int) -> None:
        self.deadline_s, self.minibatches = deadline_s, minibatches

    def describe(self) -> str:
        """'lowest power within 900 s'."""
        return f"lowest power within {self.deadline_s:g} s"

    def choose(self, pred: Predictions, minibatches: int, allowed: np.ndarray | None = None) -> Choice:
        """The lowest-power mode whose upper time bound makes the deadline."""
        return choose(pred, deadline_s=self.deadline_s, minibatches_per_epoch=minibatches, allowed=allowed)

    def _left(self, w: Window) -> tuple[int, float]:
        return self.minibatches - w.end.done, self.deadline_s - w.end.elapsed_s

    def missed(self, w: Window) -> bool:
        """At the window's pace the job would end too late."""
        remaining, left = self._left(w)
        return remaining > 0 and w.time_ms / 1e3 * remaining > left * (1 + DEADLINE_TOLERANCE)

    def step(self, fb: Feedback, i: int, w: Window, steps_left: int) -> Step | None:
        """Late: a faster mode; with slack: one of less power (``deadline_step``)."""
        remaining, left = self._left(w)
        return deadline_step(fb, i, w.power_w, w.time_ms, remaining_minibatches=remaining, time_left_s=left,
                             tolerance=DEADLINE_TOLERANCE, late=self.missed(w), steps_left=steps_left)

    def worse(self, kind: str, before: Window, after: Window) -> str:
        """A step for less power that drew more, or a step to make up time that ran slower."""
        if kind in OBJECTIVE_STEPS and after.power_w > before.power_w * (1 + UNDO_MARGIN):
            return f"{after.mode} drew {after.power_w:.2f} W, more than {before.power_w:.2f} in {before.mode}"
        if kind == "late" and after.time_ms > before.time_ms * (1 + UNDO_MARGIN):
            return (f"{after.mode} ran at {after.time_ms:.1f} ms per minibatch, slower than {before.time_ms:.1f} in "
                    f"{before.mode}")
        return ""

    def verdict(self, rec: JobRecord, p95_ms: float = math.nan) -> Verdict:
        """Board time within the deadline; the last mode's power no higher than promised."""
        on_time = rec.elapsed_s <= self.deadline_s * (1 + DEADLINE_TOLERANCE)
        constraint = f"{rec.elapsed_s:.0f} board s {'within' if on_time else 'PAST'} the {self.deadline_s:g} s deadline"
        kept, objective = _objective(rec, "power")
        return Verdict(True, on_time and kept, constraint, objective)


class LeastEnergy(Goal):
    """Least energy per minibatch."""

    kind = "energy"

    def describe(self) -> str:
        """'least energy'."""
        return "least energy"

    def choose(self, pred: Predictions, minibatches: int, allowed: np.ndarray | None = None) -> Choice:
        """The mode of least predicted energy."""
        return choose(pred, min_energy=True, minibatches_per_epoch=minibatches, allowed=allowed)

    def verdict(self, rec: JobRecord, p95_ms: float = math.nan) -> Verdict:
        """The last mode's energy per minibatch no higher than promised."""
        kept, objective = _objective(rec, "energy")
        return Verdict(True, kept, "", objective)


class FleetShare(Goal):
    """Throughput under the lab cap (the fleet queue chooses and steps the mode), with an optional deadline."""

    kind = "fleet"

    def __init__(self, priority: float, deadline_s: float = 0.0) -> None:
        self.priority, self.deadline_s = priority, deadline_s

    def describe(self) -> str:
        """'throughput under the lab cap, priority 1'."""
        return (f"throughput under the lab cap, priority {self.priority:g}"
                + (f", deadline {self.deadline_s:g} s" if self.deadline_s else ""))

    def choose(self, pred: Predictions, minibatches: int, allowed: np.ndarray | None = None) -> Choice:
        """Fleet jobs are placed by the queue, not chosen alone."""
        raise NotImplementedError("the fleet queue chooses a fleet job's mode")

    def verdict(self, rec: JobRecord, p95_ms: float = math.nan) -> Verdict:
        """Within its deadline, if it has one (the cap is the lab's: `fleet plan` shows it)."""
        if not self.deadline_s:
            return Verdict(True, True, "the lab cap is the fleet queue's (see `jetfleet fleet plan`)", "")
        on_time = rec.elapsed_s <= self.deadline_s
        return Verdict(True, on_time, f"{rec.elapsed_s:.0f} board s {'within' if on_time else 'PAST'} the "
                                      f"{self.deadline_s:g} s deadline", "")


def goal_of(rec: JobRecord) -> Goal:
    """The goal a record was submitted with."""
    if rec.goal == "power":
        stream = rec.options.inference
        return PowerBudget(rec.power_budget_w, stream.latency_budget_s * 1e3 if stream is not None else 0.0)
    if rec.goal == "deadline":
        return Deadline(rec.deadline_s, rec.minibatches)
    if rec.goal == "energy":
        return LeastEnergy()
    return FleetShare(rec.options.priority or 1.0, rec.deadline_s)


def judge(rec: JobRecord, goal: Goal, p95_ms: float = math.nan) -> Verdict:
    """The job's verdict: its goal's for a job that ran to its end; not judged for one that was cancelled or failed."""
    if rec.state == "done":
        return goal.verdict(rec, p95_ms)
    return Verdict(False, False, f"{rec.state} after {rec.minibatches_done} of {rec.minibatches} minibatches", "")


def _promised(rec: JobRecord) -> tuple[float, float, float, float] | None:
    """The last mode's predictions (time, time upper bound, power, power upper bound): the step that led to it, or
    the first choice. None when neither names it (a fleet job the queue placed)."""
    if rec.steps and rec.steps[-1].to_mode == rec.mode:
        s = rec.steps[-1]
        return s.predicted_time_ms, s.predicted_time_ms_hi or s.predicted_time_ms, s.predicted_power_w, \
            s.predicted_power_w_hi
    c = rec.choice
    if c is not None and c.mode == rec.mode:
        return c.time_ms, c.time_hi_ms, c.power_w, c.power_hi_w
    return None


def _objective(rec: JobRecord, quantity: str) -> tuple[bool, str]:
    """The last mode's observed ``quantity`` (time, power or energy per minibatch) against its predicted upper bound."""
    promised, last = _promised(rec), rec.observed
    if promised is None:
        return True, f"{rec.mode or 'its mode'}: no prediction to hold it to (placed by the fleet queue)"
    ran = [s for s in rec.segments if s.mode == rec.mode]
    n, secs, joules = sum(s.minibatches for s in ran), sum(s.seconds for s in ran), sum(s.energy_j for s in ran)
    if (last is None or last.mode != rec.mode) and n and secs > 0 and {s.mode for s in rec.segments} == {rec.mode}:
        # one mode throughout and no full window of it (windows longer than the job): all its training in that mode,
        # warm-up included (not an attached job's steps profiled or measured online in other modes before it)
        last = Observed(rec.mode, joules / secs, secs / n * 1e3, 0.0)
    if last is None or last.mode != rec.mode:
        return True, f"{rec.mode or 'its mode'}: no full window observed to hold to its prediction"
    t, t_hi, p, p_hi = promised
    outside = "" if rec.choice is None or rec.choice.covered or rec.choice.mode != rec.mode else \
        " (outside its model's coverage: bounds widened)"
    if quantity == "time":
        ok = last.time_ms <= t_hi
        return ok, (f"{last.time_ms:.1f} ms per minibatch in {rec.mode} {'within' if ok else 'SLOWER than'} its "
                    f"prediction {t:.1f} ms (upper bound {t_hi:.1f}){outside}")
    if quantity == "power":
        ok = last.power_w <= p_hi
        return ok, (f"{last.power_w:.2f} W in {rec.mode} {'within' if ok else 'ABOVE'} its prediction {p:.2f} W "
                    f"(upper bound {p_hi:.2f})")
    e, e_hi = last.power_w * last.time_ms / 1e3, p_hi * t_hi / 1e3
    ok = e <= e_hi
    return ok, (f"{e:.2f} J per minibatch in {rec.mode} {'within' if ok else 'ABOVE'} its prediction "
                f"{p * t / 1e3:.2f} J (upper bound {e_hi:.2f})")
