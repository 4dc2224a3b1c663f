"""The closed loop's model of a target: the calibrated predictions plus what the board showed while a
job ran. Shared by the jobs on the controller and by ``jetfleet eval choices``, so the evaluation
measures the very policy the fleet runs.

After each observed window (a mode's mean power and time per minibatch on the board's clock):
- the observation's log residual against the model corrects the modes around it: a Gaussian
  process on the residuals over the standardised knobs (an RBF kernel, length scale 1, prior 10%,
  plus a constant of 5% for a model that is off everywhere; window noise 1% over 10 board s, more for a
  measurement over a shorter span, whose variance grows as 10 s / its seconds); near an observation
  its own residual replaces the model's guess and the calibrated margin shrinks with the GP's
  posterior variance; far from it only the shared offset moves the predictions;
- a mode seen over the power budget rules out every mode that is at least as high on every knob
  (more cores, higher clocks never draw less power);
- the next step: over the budget (beyond the sensor noise) -> the fastest mode whose corrected upper
  bound fits, or, when it is the job's last step (no correction after it), the fastest mode the board
  already showed within the budget if there is one (a measurement, not a prediction); under it with a
  faster mode available (>= 1% per minibatch predicted) and a step to spare for a correction -> step up.
  The same for a deadline with time and power swapped, except the last step's measured fallback: a late
  window's correction, last or not, aims inside the tolerance on the predictions (``deadline_step``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from jetfleet.controller.powertrain.optimize import Choice, Predictions, choice_at, choose
from jetfleet.shared.errors import FailedPrecondition

LENGTH_SCALE = 1.0      # in standard deviations of each knob over the catalog
PRIOR_SD = 0.10         # how far (log) a residual may wander from the model's guess, locally
OFFSET_SD = 0.05        # ... and all over: a model off by some share everywhere (one constant, shared by all modes)
WINDOW_NOISE_SD = 0.01  # a window's mean power or time per minibatch, relative
WINDOW_S = 10.0         # ... over a window this long (board seconds: the jobs' default); a measurement over a
                        # shorter span is noisier, as a mean is: its variance scales with WINDOW_S / its seconds
STEP_UP_GAIN = 0.01     # step up only for a predicted gain of at least this share (eval choices: 0.03 left
                        # resnet18 on AGX Orin 2.8% from its optimum, 0.01 2.2%; 1.1 steps per choice instead of 0.4)


@dataclass(frozen=True)
class Observation:
    """One window of a mode on the board: mean power (W) and time per minibatch (ms), and the board seconds it
    averaged over when that was shorter than a window (0: a window; ``noise_var``)."""

    index: int
    power_w: float
    time_ms: float
    seconds: float = 0.0

    @property
    def noise_var(self) -> float:
        """The variance of its log power or time: a window's, scaled up for a span shorter than ``WINDOW_S``."""
        scale = WINDOW_S / self.seconds if self.seconds > 0 else 1.0
        return WINDOW_NOISE_SD ** 2 * max(1.0, scale)


@dataclass(frozen=True)
class Step:
    """The loop's decision: go to ``choice`` because of ``reason``; ``kind`` is over, headroom, late or slack."""

    choice: Choice
    reason: str
    kind: str


class _ResidualGP:
    """A Gaussian process on log residuals at observed modes: posterior mean and variance ratio everywhere.
    Repeated observations of one mode are averaged into one point, each weighted by its precision (equal windows:
    the plain mean, with proportionally less noise)."""

    def __init__(self, z: np.ndarray) -> None:
        self.z = z
        self.idx: list[int] = []
        self.res: list[float] = []
        self.precision: list[float] = []

    def add(self, i: int, residual: float, noise_var: float = WINDOW_NOISE_SD ** 2) -> None:
        w = 1.0 / noise_var
        if i in self.idx:
            j = self.idx.index(i)
            self.res[j] += (residual - self.res[j]) * w / (self.precision[j] + w)
            self.precision[j] += w
            return
        self.idx.append(i)
        self.res.append(residual)
        self.precision.append(w)

    def posterior(self) -> tuple[np.ndarray, np.ndarray]:
        n = len(self.z)
        if not self.idx:
            return np.zeros(n), np.ones(n)
        sf, sc = PRIOR_SD ** 2, OFFSET_SD ** 2
        zo = self.z[self.idx]
        k_oo = sc + sf * np.exp(-((zo[:, None, :] - zo[None, :, :]) ** 2).sum(-1) / (2 * LENGTH_SCALE ** 2))
        k_oo += np.diag(1.0 / np.asarray(self.precision, float))
        k_xo = sc + sf * np.exp(-((self.z[:, None, :] - zo[None, :, :]) ** 2).sum(-1) / (2 * LENGTH_SCALE ** 2))
        sol = np.linalg.solve(k_oo, np.column_stack([np.asarray(self.res), k_xo.T]))
        mean = k_xo @ sol[:, 0]
        var = sf + sc - np.einsum("ij,ji->i", k_xo, sol[:, 1:])
        return mean, np.clip(var / (sf + sc), 0.0, 1.0)


def _scaled(q: float, ratio: np.ndarray) -> np.ndarray:
    return np.full(len(ratio), q) if math.isinf(q) else q * np.sqrt(ratio)


class Feedback:
    """A target's calibrated predictions corrected by what the board showed (this module's docstring)."""

    def __init__(self, base: Predictions) -> None:
        self.base = base
        self.time_log, self.power_log = base.time_log, base.power_log
        x = np.array([m.as_tuple() for m in base.modes], float)
        std = x.std(axis=0)
        self.knobs = x
        z = (x - x.mean(axis=0)) / np.where(std > 0, std, 1.0)
        self._power, self._time = _ResidualGP(z), _ResidualGP(z)
        self.allowed = np.ones(len(base.modes), bool)
        self.observations: list[Observation] = []

    def rule_out(self, index: int) -> None:
        """Never choose mode ``index`` again (a step to it made the job worse)."""
        self.allowed[index] = False

    def observe(self, obs: Observation, *, over_budget: bool = False) -> None:
        """Add one window; a window over the budget rules out every mode at least as high on every knob."""
        self.observations.append(obs)
        self._power.add(obs.index, math.log(obs.power_w / self.base.power_w[obs.index]), obs.noise_var)
        self._time.add(obs.index, math.log(obs.time_ms / self.base.time_ms[obs.index]), obs.noise_var)
        if over_budget:
            self.allowed &= ~np.all(self.knobs >= self.knobs[obs.index], axis=1)

    def measured_within(self, budget_w: float) -> int | None:
        """The fastest mode not ruled out whose observations on the board averaged within ``budget_w`` itself (not
        the sensors' tolerance above it), or None if the board showed none. The averages are the model's own per-mode
        points (``_ResidualGP``: log residuals weighted by precision, so a short confirming profile counts for less
        than a full window); both GPs get every observation, in the same order."""
        b, power, time = self.base, self._power, self._time
        within = [(b.time_ms[i] * math.exp(rt), i) for i, rp, rt in zip(power.idx, power.res, time.res)
                  if self.allowed[i] and b.power_w[i] * math.exp(rp) <= budget_w]
        return int(min(within)[1]) if within else None

    def predictions(self) -> Predictions:
        """The base predictions corrected by the observations, with bounds that narrow near them."""
        pm, pv = self._power.posterior()
        tm, tv = self._time.posterior()
        b = self.base
        power = b.power_w * np.exp(pm)
        time = b.time_ms * np.exp(tm)
        p = Predictions(b.modes, time, power, time * np.exp(_scaled(self.time_log[0], tv)),
                        time * np.exp(_scaled(self.time_log[1], tv)), power * np.exp(_scaled(self.power_log[0], pv)),
                        power * np.exp(_scaled(self.power_log[1], pv)), b.confidence, b.time_log, b.power_log)
        return p if b.coverage is None else p.outside_coverage(b.coverage)   # outside the model's coverage: wider

    def choose(self, **goal: float | int | bool | None) -> Choice:
        """``optimize.choose`` on the corrected predictions among the modes not ruled out."""
        return choose(self.predictions(), allowed=self.allowed, **goal)  # type: ignore[arg-type]


def power_step(fb: Feedback, current: int, power_w: float, time_ms: float, *, budget_w: float, over: bool,
               steps_left: int) -> Step | None:
    """After a window of ``current`` under a power budget (``over``: the goal judged it over the budget, see
    ``jobs.goals``): the step to take, or None to stay."""
    fb.observe(Observation(current, power_w, time_ms), over_budget=over)
    if not over and steps_left < 2:
        return None    # keep the last step for a correction
    last = fb.measured_within(budget_w) if over and steps_left < 2 else None
    if last is not None:   # the last correction, with no step after it: a mode the board showed within the budget
        c = choice_at(fb.predictions(), last, f"fastest under {budget_w:g} W")
        return Step(c, f"observed {power_w:.2f} W over the {budget_w:g} W budget; the last step goes to the "
                       f"fastest mode measured within it", "over")
    try:
        c = fb.choose(power_budget_w=budget_w)
    except FailedPrecondition:
        return None
    if c.index == current:
        return None
    if over:
        return Step(c, f"observed {power_w:.2f} W over the {budget_w:g} W budget", "over")
    if c.time_ms <= time_ms * (1 - STEP_UP_GAIN) and not c.at_risk:
        return Step(c, f"observed {power_w:.2f} W leaves headroom under {budget_w:g} W: "
                       f"{c.time_ms:.1f} ms per minibatch predicted instead of {time_ms:.1f}", "headroom")
    return None


def deadline_step(fb: Feedback, current: int, power_w: float, time_ms: float, *, remaining_minibatches: int,
                  time_left_s: float, tolerance: float, late: bool, steps_left: int) -> Step | None:
    """After a window of ``current`` under a deadline (``late``: the goal judged its ETA past the time left, see
    ``jobs.goals``): the step to take (late: faster; slack: less power), or None."""
    fb.observe(Observation(current, power_w, time_ms))
    if remaining_minibatches <= 0:
        return None
    if not late and steps_left < 2:
        return None
    if time_left_s <= 0:
        return None
    try:   # a correction aims inside the tolerance, so the windows it takes to land do not make it late again
        c = fb.choose(deadline_s=time_left_s / (1 + tolerance) if late else time_left_s,
                      minibatches_per_epoch=remaining_minibatches)
    except FailedPrecondition:
        return None
    if c.index == current:
        return None
    eta = time_ms / 1e3 * remaining_minibatches
    if late:
        return Step(c, f"ETA {eta:.0f} s overshoots the {time_left_s:.0f} s left", "late")
    if c.power_w <= power_w * (1 - STEP_UP_GAIN) and not c.at_risk:
        return Step(c, f"ETA {eta:.0f} s leaves slack in {time_left_s:.0f} s: {c.power_w:.1f} W predicted instead of "
                       f"{power_w:.1f}", "slack")
    return None
