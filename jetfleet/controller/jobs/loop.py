"""The closed loop: a job's goal kept on the full windows of its board's telemetry (``windows.py``). No I/O here:
the runner feeds the windows in and carries the decisions out, so the loop runs the same on a twin at 1000x, on a
board, and in ``jetfleet eval choices``.

On each window the goal (``goals.py``) says whether it broke the limit and which step to take. A step is checked on
the first full window of the mode it led to: if that mode did worse than the one it left, on what the step was for
(``Goal.worse``), the loop steps back, rules the mode out and says why (an ``undo`` step; it does not use up one
of the job's steps). A mode whose first window found no reason to step is settled: the loop steps from it again
only when a window breaks the limit."""

from __future__ import annotations

import math

from jetfleet.controller.jobs.goals import Goal, PowerBudget
from jetfleet.controller.jobs.windows import Window
from jetfleet.controller.powertrain.feedback import Feedback, Observation, Step
from jetfleet.controller.powertrain.optimize import choice_at
from jetfleet.shared.errors import FailedPrecondition


class ClosedLoop:
    """The job's goal kept on its windows: how many steps it has left and what each window decides."""

    def __init__(self, goal: Goal, feedback: Feedback, index: dict[str, int], *, max_steps: int,
                 steps_used: int = 0) -> None:
        self.goal, self.feedback, self.index = goal, feedback, index
        self.max_steps, self.steps_used = max_steps, steps_used
        self.windows = 0
        self.windows_missed = 0     # windows that broke the goal's limit
        self.last_missed = False
        self.undone = 0
        self._settled: set[int] = set()   # modes whose first window found no reason to step
        self._check: tuple[str, Window] | None = None   # the last step's kind and the window before it
        self.latency_budget_ms = goal.latency_budget_ms if isinstance(goal, PowerBudget) else 0.0
        self.latency_missed = False
        self.latency_windows_missed = 0

    def on_window(self, w: Window, p95_ms: float = math.nan) -> Step | None:
        """Decide on a full window of the current mode (and, serving inference, the stream's p95 over it)."""
        self.windows += 1
        i = self.index[w.mode]
        self.last_missed = self.goal.missed(w)
        self.windows_missed += self.last_missed
        if self.latency_budget_ms:
            self.latency_missed = math.isfinite(p95_ms) and p95_ms > self.latency_budget_ms
            self.latency_windows_missed += self.latency_missed
        undo = self._undo(i, w)
        if undo is not None:
            return undo
        steps_left = self.max_steps - self.steps_used
        step: Step | None = None
        if self.latency_missed and not self.last_missed and steps_left > 1:   # the last step kept for a correction
            step = self._faster(i, w, p95_ms)
        if step is None:
            if steps_left <= 0 or (i in self._settled and not self.last_missed):
                self._observe(i, w)
                return None
            step = self.goal.step(self.feedback, i, w, steps_left)
        if step is None:
            self._settled.add(i)
            return None
        self.steps_used += 1
        self._check = (step.kind, w)
        return step

    def _observe(self, i: int, w: Window) -> None:
        self.feedback.observe(Observation(i, w.power_w, w.time_ms),
                              over_budget=isinstance(self.goal, PowerBudget) and self.last_missed)

    def _undo(self, i: int, w: Window) -> Step | None:
        """The first window of the mode a step led to, if that mode did worse: the step back to the mode it left."""
        check, self._check = self._check, None
        if check is None or check[1].mode == w.mode:
            return None   # no step taken, or it did not take effect (the board refused it)
        kind, before = check
        why = self.goal.worse(kind, before, w)
        if not why:
            return None
        self._observe(i, w)
        self.feedback.rule_out(i)
        self.undone += 1
        back = choice_at(self.feedback.predictions(), self.index[before.mode], self.goal.describe())
        return Step(back, f"undo the {kind} step: {why}", "undo")

    def _faster(self, i: int, w: Window, p95_ms: float) -> Step | None:
        """A latency step: the fastest mode predicted within the power budget, if faster than mode ``i``."""
        try:
            c = self.goal.choose(self.feedback.predictions(), 1, self.feedback.allowed)
        except FailedPrecondition:
            return None
        if c.index == i or c.time_ms >= w.time_ms:
            return None   # nothing faster within the power budget: the power path goes on as usual
        self._observe(i, w)
        return Step(c, f"observed p95 {p95_ms:.1f} ms over the {self.latency_budget_ms:g} ms latency budget: "
                       f"{c.time_ms:.1f} ms per minibatch predicted instead of {w.time_ms:.1f}", "latency")
