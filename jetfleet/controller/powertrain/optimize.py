"""From predictions to a choice: the time-power Pareto front and the goals an operator sets.

Every prediction carries calibrated bounds (``calibrate.py``): a power budget is met by the
fastest mode whose *upper* power bound is within it, a deadline by the lowest-power mode whose
*upper* time bound meets it. Epoch time = minibatch time x minibatches per epoch; energy per
epoch = power x epoch time.

A model is trusted only where it was fitted (``coverage.py``): a mode outside its coverage is marked
(``Predictions.covered``), its bounds are widened by ``OUTSIDE_COVERAGE_FACTOR``, and ``choose``
prefers the modes inside; a choice outside says so (``Choice.covered``, ``Choice.coverage_note``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from jetfleet.controller.powertrain.coverage import Coverage
from jetfleet.shared.catalog import PowerMode
from jetfleet.shared.errors import FailedPrecondition, InvalidArgument
from jetfleet.shared.quantity import check_deadline_s, check_power_budget_w

# The bounds of a mode outside its model's coverage (predicted at the nearest covered point, ``ModelRepo``) are
# widened: upper bound x F, lower / F. ``bench/coverage.py`` chose F on the twin (docs/models.md): references
# fitted on partial AGX Orin grids (its first 210 modes, 2 cores only, the lower half of one knob, the complete
# grid; ResNet-18, MobileNetV3, LSTM, YOLOv8n), the largest factor that 90% of the modes outside needed to fall
# within their widened 90% bounds: 3.31 beyond a knob's span the fit saw move, 9.59 beyond a knob it saw at one
# level only (fitted on 2 cores, MobileNetV3 at 4-12 cores is off by 265%).
OUTSIDE_COVERAGE_FACTOR = 3.5
NEVER_MOVED_FACTOR = 10.0


@dataclass(frozen=True)
class Predictions:
    """Predicted time per minibatch (ms) and power (W) of each of ``modes``, index for index, with bounds
    (equal to the prediction where no calibration is known)."""

    modes: list[PowerMode]
    time_ms: np.ndarray        # per minibatch
    power_w: np.ndarray
    time_lo: np.ndarray = None  # type: ignore[assignment]  # None: the prediction itself
    time_hi: np.ndarray = None  # type: ignore[assignment]
    power_lo: np.ndarray = None  # type: ignore[assignment]
    power_hi: np.ndarray = None  # type: ignore[assignment]
    confidence: float = 0.0    # the level of the bounds; 0 when they are the point predictions
    time_log: tuple[float, float] = (0.0, 0.0)    # the (lower, upper) log factors the bounds apply
    power_log: tuple[float, float] = (0.0, 0.0)
    covered: np.ndarray = None  # type: ignore[assignment]  # per mode: inside the model's coverage; None: all
    coverage: Coverage | None = None                # the model's coverage, where it is known

    def __post_init__(self) -> None:
        for name, base in (("time_lo", "time_ms"), ("time_hi", "time_ms"), ("power_lo", "power_w"),
                           ("power_hi", "power_w")):
            if getattr(self, name) is None:
                object.__setattr__(self, name, getattr(self, base))
        if self.covered is None:
            object.__setattr__(self, "covered", np.ones(len(self.modes), bool))

    def outside_coverage(self, coverage: Coverage) -> Predictions:
        """These predictions marked with the modes ``coverage`` holds (``covered``), the bounds of every other
        mode widened by OUTSIDE_COVERAGE_FACTOR (NEVER_MOVED_FACTOR beyond a knob the fit saw at one level), on
        both sides: going up a knob does not always draw more power (a data-bound MobileNetV3 draws less at a
        higher memory clock: docs/models.md)."""
        x = np.array([m.as_tuple() for m in self.modes], float)
        covered = coverage.covered(x)
        f = np.where(covered, 1.0, np.where(coverage.never_moved(x), NEVER_MOVED_FACTOR, OUTSIDE_COVERAGE_FACTOR))
        return replace(self, time_lo=self.time_lo / f, time_hi=self.time_hi * f, power_lo=self.power_lo / f,
                       power_hi=self.power_hi * f, covered=covered, coverage=coverage)

    def coverage_note(self, i: int) -> str:
        """Why mode ``i`` is outside the model's coverage, and what that does to its bounds ('' inside)."""
        if self.covered[i] or self.coverage is None:
            return ""
        mode = self.modes[i]
        f = NEVER_MOVED_FACTOR if self.coverage.never_moved(np.array(mode.as_tuple(), float))[0] \
            else OUTSIDE_COVERAGE_FACTOR
        return (f"{mode} is outside the model's coverage ({self.coverage.reason(mode)}): predicted at the nearest "
                f"mode it covers, bounds widened x{f:g}")

    def bounded(self, confidence: float, time_log: tuple[float, float], power_log: tuple[float, float]) -> Predictions:
        """These predictions with bounds: each (lower, upper) pair is the log factor applied to the prediction."""
        return replace(self, time_lo=self.time_ms * np.exp(time_log[0]), time_hi=self.time_ms * np.exp(time_log[1]),
                       power_lo=self.power_w * np.exp(power_log[0]), power_hi=self.power_w * np.exp(power_log[1]),
                       confidence=confidence, time_log=time_log, power_log=power_log)

    def interval(self, i: int, quantity: str) -> str:
        """'29.9 W (bounds 27.1-32.6 W at 90%)' for mode ``i`` (quantity ``power`` or ``time``)."""
        if quantity == "power":
            v, lo, hi, unit = self.power_w[i], self.power_lo[i], self.power_hi[i], "W"
        else:
            v, lo, hi, unit = self.time_ms[i], self.time_lo[i], self.time_hi[i], "ms"
        if not self.confidence:
            return f"{v:.1f} {unit}"
        return f"{v:.1f} {unit} (bounds {lo:.1f}-{hi:.1f} {unit} at {self.confidence:.0%})"


@dataclass(frozen=True)
class Choice:
    """A chosen mode, its index, predicted time (ms) and power (W) with their bounds, the goal, and time (s)
    and energy (J) per epoch. ``at_risk``: no mode met the goal at the bound's confidence, so this is the one
    closest to it (the closed loop watches it). ``covered`` False: the mode is outside the model's coverage
    (no mode inside met the goal), its bounds widened; ``coverage_note`` says why."""

    mode: PowerMode
    index: int
    time_ms: float
    power_w: float
    goal: str
    epoch_s: float
    energy_per_epoch_j: float
    time_hi_ms: float = 0.0
    power_hi_w: float = 0.0
    time_lo_ms: float = 0.0
    power_lo_w: float = 0.0
    at_risk: bool = False
    covered: bool = True        # inside the model's coverage; outside, ``coverage_note`` says why
    coverage_note: str = ""


def pareto_front(time_ms: np.ndarray, power_w: np.ndarray) -> np.ndarray:
    """Indices of the modes no other mode beats on both time and power, fastest first."""
    order = np.lexsort((power_w, time_ms))
    front: list[int] = []
    best_power = np.inf
    for i in order:
        if power_w[i] < best_power:
            front.append(int(i))
            best_power = power_w[i]
    return np.asarray(front, dtype=np.int64)


def check_goal(power_budget_w: float | None, deadline_s: float | None, min_energy: bool,
               minibatches_per_epoch: int) -> None:
    """InvalidArgument unless exactly one goal is given and every number is in range."""
    goals = sum(x is not None and x is not False for x in (power_budget_w, deadline_s, min_energy or None))
    if goals != 1:
        raise InvalidArgument("give exactly one goal: a power budget, a deadline, or minimum energy", field="goal")
    if minibatches_per_epoch < 1:
        raise InvalidArgument("minibatches_per_epoch must be >= 1", field="minibatches_per_epoch")
    if power_budget_w is not None:
        check_power_budget_w(power_budget_w)
    if deadline_s is not None:
        check_deadline_s(deadline_s)


def choose(p: Predictions, *, power_budget_w: float | None = None, deadline_s: float | None = None,
           min_energy: bool = False, minibatches_per_epoch: int = 1, allowed: np.ndarray | None = None) -> Choice:
    """``choose_among`` preferring the modes inside the model's coverage: a mode outside is chosen only when no
    mode inside meets the goal (by its bounds), and is then marked ``covered=False`` with the reason."""
    def among(mask: np.ndarray | None) -> Choice:
        return choose_among(p, power_budget_w=power_budget_w, deadline_s=deadline_s, min_energy=min_energy,
                            minibatches_per_epoch=minibatches_per_epoch, allowed=mask)

    ok = np.ones(len(p.modes), bool) if allowed is None else np.asarray(allowed, bool)
    inside = ok & p.covered
    refused: FailedPrecondition | None = None
    if inside.any() and (ok & ~p.covered).any():
        try:
            c = among(inside)
            if not c.at_risk:
                return c
        except FailedPrecondition as e:
            refused = e
    try:
        c = among(allowed)
    except FailedPrecondition as e:
        if refused is None:
            raise
        # name the mode the model knows (the one outside has only its widened bounds to show)
        raise FailedPrecondition(f"{refused.message}; nor can a mode outside the model's coverage, by its widened "
                                 "bounds", field=refused.field) from e
    return c if p.covered[c.index] else replace(c, covered=False, coverage_note=p.coverage_note(c.index))


def choose_among(p: Predictions, *, power_budget_w: float | None = None, deadline_s: float | None = None,
                 min_energy: bool = False, minibatches_per_epoch: int = 1, allowed: np.ndarray | None = None) -> Choice:
    """The mode that meets one goal: fastest under a power budget, lowest power within a deadline, or least energy.

    Budgets and deadlines are checked against the upper bounds. FailedPrecondition when even the lower
    bounds cannot meet them (naming the lowest-power or the fastest mode with its interval); when only the
    upper bounds cannot, the mode closest to the goal is chosen and marked ``at_risk``. ``allowed`` (a
    boolean mask) restricts the candidates (the closed loop rules out modes it has seen over budget)."""
    check_goal(power_budget_w, deadline_s, min_energy, minibatches_per_epoch)
    ok_mask = np.ones(len(p.modes), bool) if allowed is None else np.asarray(allowed, bool)
    if not ok_mask.any():
        raise FailedPrecondition("every mode has been ruled out", field="goal")
    epoch_s = p.time_ms / 1e3 * minibatches_per_epoch
    energy = p.power_w * epoch_s
    risk = False
    if power_budget_w is not None:
        ok = np.flatnonzero((p.power_hi <= power_budget_w) & ok_mask)
        if len(ok):
            i = int(ok[np.argmin(p.time_ms[ok])])
        else:
            cand = np.flatnonzero(ok_mask)
            low = int(cand[np.argmin(p.power_lo[cand])])
            if p.power_lo[low] > power_budget_w:
                raise FailedPrecondition(f"no mode can run under {power_budget_w:g} W: the lowest-power mode is "
                                         f"{p.modes[low]} at {p.interval(low, 'power')} "
                                         f"({p.interval(low, 'time')} per minibatch)", field="power_budget_w")
            i, risk = int(cand[np.argmin(p.power_hi[cand])]), True
        goal = f"fastest under {power_budget_w:g} W"
    elif deadline_s is not None:
        epoch_hi = p.time_hi / 1e3 * minibatches_per_epoch
        ok = np.flatnonzero((epoch_hi <= deadline_s) & ok_mask)
        if len(ok):
            i = int(ok[np.argmin(p.power_w[ok])])
        else:
            cand = np.flatnonzero(ok_mask)
            fast = int(cand[np.argmin(p.time_lo[cand])])
            if p.time_lo[fast] / 1e3 * minibatches_per_epoch > deadline_s:
                raise FailedPrecondition(
                    f"no mode can finish {minibatches_per_epoch} minibatches in {deadline_s:g} s: the fastest, "
                    f"{p.modes[fast]}, takes {epoch_s[fast]:.1f} s ({p.interval(fast, 'time')} per minibatch)",
                    field="deadline_s")
            i, risk = int(cand[np.argmin(p.time_hi[cand])]), True
        goal = f"lowest power within {deadline_s:g} s"
    else:
        cand = np.flatnonzero(ok_mask)
        i = int(cand[np.argmin(energy[cand])])
        goal = "least energy per epoch"
    return choice_at(p, i, goal, minibatches_per_epoch, at_risk=risk)


def choice_at(p: Predictions, i: int, goal: str, minibatches_per_epoch: int = 1, *, at_risk: bool = False) -> Choice:
    """Mode ``i`` of ``p`` as the choice for ``goal`` (a step back to a mode the job ran before, say), with its
    predictions, bounds, time and energy per epoch, and whether it lies within its model's coverage."""
    epoch_s = float(p.time_ms[i]) / 1e3 * minibatches_per_epoch
    covered = bool(p.covered[i])
    return Choice(p.modes[i], i, float(p.time_ms[i]), float(p.power_w[i]), goal, epoch_s, float(p.power_w[i]) * epoch_s,
                  float(p.time_hi[i]), float(p.power_hi[i]), float(p.time_lo[i]), float(p.power_lo[i]), at_risk,
                  covered=covered, coverage_note="" if covered else p.coverage_note(i))
