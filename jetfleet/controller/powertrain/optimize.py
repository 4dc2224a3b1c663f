"""From predictions to a choice: the time-power Pareto front and the goals an operator sets.

Epoch time = minibatch time x minibatches per epoch; energy per epoch = power x epoch time."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from jetfleet.shared.catalog import PowerMode
from jetfleet.shared.errors import FailedPrecondition, InvalidArgument


@dataclass(frozen=True)
class Predictions:
    modes: list[PowerMode]
    time_ms: np.ndarray        # per minibatch
    power_w: np.ndarray


@dataclass(frozen=True)
class Choice:
    mode: PowerMode
    index: int
    time_ms: float
    power_w: float
    goal: str
    epoch_s: float
    energy_per_epoch_j: float


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


def choose(p: Predictions, *, power_budget_w: float | None = None, deadline_s: float | None = None,
           min_energy: bool = False, minibatches_per_epoch: int = 1) -> Choice:
    goals = sum(x is not None and x is not False for x in (power_budget_w, deadline_s, min_energy or None))
    if goals != 1:
        raise InvalidArgument("give exactly one goal: a power budget, a deadline, or minimum energy", field="goal")
    if minibatches_per_epoch < 1:
        raise InvalidArgument("minibatches_per_epoch must be >= 1", field="minibatches_per_epoch")
    epoch_s = p.time_ms / 1e3 * minibatches_per_epoch
    energy = p.power_w * epoch_s
    if power_budget_w is not None:
        if not power_budget_w > 0:
            raise InvalidArgument("the power budget must be positive", field="power_budget_w")
        ok = np.flatnonzero(p.power_w <= power_budget_w)
        if not len(ok):
            low = int(np.argmin(p.power_w))
            raise FailedPrecondition(
                f"no mode is predicted under {power_budget_w:g} W; the lowest-power mode is {p.modes[low]} at "
                f"{p.power_w[low]:.1f} W ({p.time_ms[low]:.1f} ms per minibatch)", field="power_budget_w")
        i = int(ok[np.argmin(p.time_ms[ok])])
        goal = f"fastest under {power_budget_w:g} W"
    elif deadline_s is not None:
        if not deadline_s > 0:
            raise InvalidArgument("the deadline must be positive", field="deadline_s")
        ok = np.flatnonzero(epoch_s <= deadline_s)
        if not len(ok):
            fast = int(np.argmin(epoch_s))
            raise FailedPrecondition(
                f"no mode is predicted to finish {minibatches_per_epoch} minibatches in {deadline_s:g} s; the "
                f"fastest, {p.modes[fast]}, takes {epoch_s[fast]:.1f} s", field="deadline_s")
        i = int(ok[np.argmin(p.power_w[ok])])
        goal = f"lowest power within {deadline_s:g} s"
    else:
        i = int(np.argmin(energy))
        goal = "least energy per epoch"
    return Choice(p.modes[i], i, float(p.time_ms[i]), float(p.power_w[i]), goal, float(epoch_s[i]), float(energy[i]))
