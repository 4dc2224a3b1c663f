"""Racks of a few jobs, folded: each rack's jobs become one job whose options are the rack's Pareto frontier (every
way to choose its jobs' options that no other way beats on both summed power and summed value, within the rack's
budget), so the knapsack is left with the lab's budget alone, where its search is at its best (``knapsack.solve``
tries this when its first pass is not within the gap). Exact: a solution of the folded problem is one of the
original, valued the same. Given up when a rack's frontier grows past ``max_points``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from jetfleet.controller.fleet.knapsack import Prepared

MAX_POINTS = 2048        # a rack's frontier beyond this: not folded


@dataclass(frozen=True)
class _Front:
    """A rack's frontier as it grows job by job: each point's power and value, and per job added, for each point,
    the point it came from and the job's option."""

    power: np.ndarray
    value: np.ndarray
    steps: tuple[tuple[np.ndarray, np.ndarray], ...]

    def picks(self, point: int) -> list[int]:
        """The options (one per job, in the order added) that reach ``point``."""
        out = []
        for came_from, option in reversed(self.steps):
            out.append(int(option[point]))
            point = int(came_from[point])
        return out[::-1]


@dataclass(frozen=True)
class Folded:
    """The problem with each rack folded into one row: the rows' power and value (NaN padding), and how to unfold
    a choice: which original rows each row stands for (one, or a rack's) and the rack's frontier."""

    power: np.ndarray
    value: np.ndarray
    members: list[list[int]]
    fronts: list[_Front | None]

    def unfold(self, picks: list[int], n: int, orig: np.ndarray) -> list[int]:
        """A choice of the folded rows as option indices (the caller's) of the ``n`` original rows."""
        out = [0] * n
        for row, k in enumerate(picks):
            front = self.fronts[row]
            chosen = [k] if front is None else front.picks(k)
            for member, option in zip(self.members[row], chosen, strict=True):
                out[member] = int(orig[member, option])
        return out


def fold(p: Prepared, max_points: int = MAX_POINTS) -> Folded | None:
    """``p`` with its racks folded, or None when a rack's frontier passes ``max_points`` (or there are no racks)."""
    racks = sorted({int(r) for r in p.rack if r >= 0})
    if not racks:
        return None
    rows: list[tuple[np.ndarray, np.ndarray, list[int], _Front | None]] = []
    for r in racks:
        members = [int(i) for i in np.nonzero(p.rack == r)[0]]
        front = _front(p, members, min(float(p.rack_budget[r]), p.budget), max_points)
        if front is None:
            return None
        rows.append((front.power, front.value, members, front))
    for i in np.nonzero(p.rack < 0)[0]:
        live = np.isfinite(p.power[i])    # a prefix: the options left, by power (unfolded through ``orig``)
        rows.append((p.power[i][live], p.value[i][live], [int(i)], None))
    width = max(len(pw) for pw, _, _, _ in rows)
    power = np.full((len(rows), width), np.nan)
    value = np.full((len(rows), width), np.nan)
    for j, (pw, v, _, _) in enumerate(rows):
        power[j, :len(pw)] = pw
        value[j, :len(v)] = v
    return Folded(power, value, [m for _, _, m, _ in rows], [f for _, _, _, f in rows])


def _front(p: Prepared, members: list[int], budget: float, max_points: int) -> _Front | None:
    power, value = np.zeros(1), np.zeros(1)
    steps: list[tuple[np.ndarray, np.ndarray]] = []
    for i in members:
        live = np.isfinite(p.power[i])
        pw, v = p.power[i][live], p.value[i][live]
        cand_w = (power[:, None] + pw[None, :]).ravel()
        cand_v = (value[:, None] + v[None, :]).ravel()
        came = np.repeat(np.arange(len(power)), len(pw))
        opt = np.tile(np.arange(len(pw)), len(power))
        ok = cand_w <= budget
        cand_w, cand_v, came, opt = cand_w[ok], cand_v[ok], came[ok], opt[ok]
        order = np.lexsort((-cand_v, cand_w))          # by power, the better value first
        cand_w, cand_v, came, opt = cand_w[order], cand_v[order], came[order], opt[order]
        before = np.concatenate([[-np.inf], np.maximum.accumulate(cand_v)[:-1]])
        keep = cand_v > before                          # more value than anything of no more power
        power, value = cand_w[keep], cand_v[keep]
        if len(power) > max_points or not len(power):
            return None
        steps.append((came[keep], opt[keep]))
    return _Front(power, value, tuple(steps))
