"""Confirm before committing: measure the modes a power budget's choice would run before running one.

Choosing the fastest mode whose predicted upper power bound fits the budget picks, among the many modes near
the budget, the ones the model under-predicts most: the optimizer's curse. On the real TX2 grids nearly every
over-budget choice was a 1-core mode whose power the model under-predicted, and a calibrated bound (a margin
the same for every mode) cannot know which modes those are. A measurement can: profile the choice, add the
observation to the closed loop's model (``feedback.Feedback``: the mode is corrected, its neighbours too, a
mode seen over the budget rules out every mode at least as high on every knob), choose again, and stop when
the choice is a mode already measured or the profiles allowed are spent. Then commit to the fastest mode
*measured* within the budget (a profiled mode of the model's own k counts: it was measured too), and only
when none is, to the model's corrected choice.

The procedure is driven from outside, one profile at a time (``next_mode``, ``add``, ``commit``), so the
same object serves an evaluation that reads a measured grid and a job that profiles on its board.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from jetfleet.controller.powertrain.feedback import Feedback, Observation
from jetfleet.controller.powertrain.optimize import Choice, choice_at
from jetfleet.shared.errors import InvalidArgument

DEFAULT_PROFILES = 3    # profiles before committing (eval choices on the TX2 grids: docs/jobs.md, "Real grids")
MAX_PROFILES = 20


class Confirmation:
    """Confirm a power budget's choice by measuring it (this module's docstring). ``known``: modes measured
    already (the model's profiled modes) that may be committed to without another profile; they are not fed
    to the loop's model, which already fitted them."""

    def __init__(self, feedback: Feedback, budget_w: float, *, profiles: int = DEFAULT_PROFILES,
                 tolerance_w: float = 0.0, known: Iterable[Observation] = ()) -> None:
        if not 0 <= profiles <= MAX_PROFILES:
            raise InvalidArgument(f"profiles={profiles}: must be 0..{MAX_PROFILES}", field="profiles")
        if not (np.isfinite(budget_w) and budget_w > 0):
            raise InvalidArgument(f"budget {budget_w!r} W: must be a positive number", field="power_budget_w")
        self.feedback, self.budget_w, self.profiles, self.tolerance_w = feedback, budget_w, profiles, tolerance_w
        self.known = {o.index: o for o in known}
        self.measured: dict[int, Observation] = {}
        self._done = False

    def next_mode(self) -> int | None:
        """The index of the mode to profile next, or None: the choice is a measured mode or no profile is left.
        FailedPrecondition when no mode can meet the budget (as ``optimize.choose``)."""
        if self._done or len(self.measured) >= self.profiles:
            return None
        c = self.feedback.choose(power_budget_w=self.budget_w)
        if c.index in self.measured or c.index in self.known:
            self._done = True
            return None
        return c.index

    def add(self, obs: Observation) -> None:
        """The profile of a mode ``next_mode`` named: the loop's model learns it."""
        over = obs.power_w > self.budget_w + self.tolerance_w
        self.feedback.observe(obs, over_budget=over)
        self.measured[obs.index] = obs

    def remember(self, obs: Observation) -> None:
        """A profile made before (a job's, replayed after a restart) that the loop's model has learned already."""
        self.measured[obs.index] = obs

    def commit(self) -> Choice:
        """The mode to run: the fastest measured within the budget, else the model's corrected choice (``at_risk``
        when even that one's upper bound does not fit)."""
        seen = {**self.known, **self.measured}
        fits = [o for o in seen.values() if o.power_w <= self.budget_w and self.feedback.allowed[o.index]]
        if fits:
            best = min(fits, key=lambda o: o.time_ms)
            return choice_at(self.feedback.predictions(), best.index, f"fastest under {self.budget_w:g} W")
        return self.feedback.choose(power_budget_w=self.budget_w)

    @property
    def used(self) -> int:
        """Profiles made so far."""
        return len(self.measured)
