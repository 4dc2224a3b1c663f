"""The modes of all running jobs chosen jointly: a multiple-choice knapsack.

Each running job offers a few options (its candidate modes: power in W, the value of running in it);
exactly one option per job is taken so that the summed power stays within a budget and the summed
value is the largest. Solved exactly on a power grid (``resolution_w``; every option's power is
rounded *up* to it, so a solution never exceeds the budget in real watts) by dynamic programming
over the jobs, vectorised over the grid: O(jobs x options x budget/resolution). ``exhaustive`` is
the brute force the evaluation checks it against on small instances."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RESOLUTION_W = 0.05
MAX_CELLS = 200_000      # budget / resolution beyond this: the resolution coarsens (rounding stays upward)


@dataclass(frozen=True)
class Option:
    """One candidate of a job: its power (W, the bound the budget is checked against) and its value."""

    power_w: float
    value: float


def solve(groups: Sequence[Sequence[Option]], budget_w: float, *,
          resolution_w: float = RESOLUTION_W) -> tuple[list[int], float] | None:
    """One option index per group maximising the summed value with summed power <= ``budget_w``; with the
    summed value. None when even the lowest-power options do not fit. No groups: ([], 0). An infinite budget
    constrains nothing."""
    if not groups:
        return ([], 0.0) if budget_w >= 0 else None
    if any(not g for g in groups) or not budget_w >= 0:
        return None
    if math.isinf(budget_w):   # no cap: every group's highest-power option fits
        budget_w = sum(max(o.power_w for o in g) for g in groups)
    res = max(resolution_w, budget_w / MAX_CELLS)
    cells = int(math.floor(budget_w / res + 1e-9))
    neg = -np.inf
    best = np.full(cells + 1, neg)
    best[0] = 0.0
    choices: list[np.ndarray] = []
    for g in groups:
        new = np.full(cells + 1, neg)
        pick = np.full(cells + 1, -1, dtype=np.int32)
        for j, opt in enumerate(g):
            w = int(math.ceil(opt.power_w / res - 1e-9))
            if w > cells:
                continue
            cand = np.full(cells + 1, neg)
            cand[w:] = best[:cells + 1 - w] + opt.value
            better = cand > new
            new[better] = cand[better]
            pick[better] = j
        best = new
        choices.append(pick)
        if not np.isfinite(best).any():
            return None
    end = int(np.argmax(best))
    if not np.isfinite(best[end]):
        return None
    total = float(best[end])
    out: list[int] = []
    c = end
    for g, pick in zip(reversed(groups), reversed(choices), strict=True):
        j = int(pick[c])
        out.append(j)
        c -= int(math.ceil(g[j].power_w / res - 1e-9))
    out.reverse()
    return out, total


def exhaustive(groups: Sequence[Sequence[Option]], budget_w: float) -> tuple[list[int], float] | None:
    """The optimum by enumerating every combination (small instances only: the product of the group sizes)."""
    best: tuple[list[int], float] | None = None
    for combo in itertools.product(*(range(len(g)) for g in groups)):
        p = sum(groups[i][j].power_w for i, j in enumerate(combo))
        if p > budget_w + 1e-9:
            continue
        v = sum(groups[i][j].value for i, j in enumerate(combo))
        if best is None or v > best[1] + 1e-12:
            best = (list(combo), v)
    return best
