"""The modes of all running jobs chosen jointly: a multiple-choice knapsack, with racks.

Each running job offers a few options (its candidate modes: power in W, the value of running in it);
exactly one option per job is taken so that the summed power stays within the lab's budget, the summed
power of the jobs of each rack within that rack's budget, and the summed value is the largest. A rack is a
subset of the jobs (each job in at most one), so the budgets nest: the lab's over all, a rack's over its own.

Solved in real watts (no power grid), exactly or to a stated relative gap:

1. Each job's dominated options go (more power, no more value); its remaining options' upper concave hull gives
   the increments of the linear relaxation, taken greedily by value per watt while the lab and the racks have
   room (Sinha and Zoltners). The same pass with whole increments, then single moves to any option that still
   fits, is a solution (``value``); Lagrange multipliers read off the relaxation's break points (the lab's, and
   each full rack's above it) give an upper bound on the optimum (``bound``, weak duality: valid whatever the
   multipliers).
2. If ``value`` is within ``gap`` of ``bound`` it is the answer (at hundreds of jobs it is, with a gap of
   1e-6 or so: one job's step is a sliver of the total). Otherwise racks of a few jobs are folded into one job
   each (``frontier.py``: their Pareto frontier of summed power and value) and that problem, with the lab's budget
   alone, is solved the same way; else an option whose best case (the bound with the job forced to it) cannot
   beat ``value`` is dropped, jobs left with one option are fixed, and the few jobs left are searched depth first
   (``search.py``, branch and bound) to ``gap`` or ``max_nodes``. ``bound`` is then what was proved.

``exhaustive`` is the brute force the tests and the evaluation check it against on small instances."""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from jetfleet.controller.fleet.frontier import fold
from jetfleet.controller.fleet.search import Search

GAP = 1e-4             # the relative gap to the proven optimum at which a solution is taken (0.01 %)
MAX_NODES = 10_000     # branch and bound gives up here and returns its best with the bound it proved
MAX_DEPTH = 64         # more jobs left open than this: no search (the first pass's value and bound stand)
MAX_MOVES = 64         # local moves tried after the first pass
_EPS_W = 1e-9          # budgets are met to this (a sum of floats never lands over by rounding)


@dataclass(frozen=True)
class Option:
    """One candidate of a job: its power (W, the bound the budget is checked against) and its value."""

    power_w: float
    value: float


@dataclass(frozen=True)
class Solution:
    """One option index per job; their summed value; an upper bound on the optimum (``value <= optimum <=
    bound``); how it was found (``greedy``: the first pass was within the gap; ``search``: branch and bound;
    ``folded``: the racks folded into one job each (``frontier.py``), then solved to the gap; ``cut``: the search
    stopped at ``max_nodes``), the search's nodes; and the relaxation's prices: value per
    watt of the lab's budget (``lam``) and, on top of it, of each rack's (``mu``), what one more watt is worth."""

    picks: list[int]
    value: float
    bound: float
    method: str
    nodes: int = 0
    lam: float = 0.0
    mu: tuple[float, ...] = ()

    @property
    def gap(self) -> float:
        """(bound - value) / bound: how far from the optimum the value may be, at most (0 when both are 0)."""
        return 0.0 if self.bound <= 0 else max(0.0, (self.bound - self.value) / self.bound)


def solve(groups: Sequence[Sequence[Option]], budget_w: float, *, racks: Sequence[int] | None = None,
          rack_budgets_w: Sequence[float] = (), gap: float = GAP, max_nodes: int = MAX_NODES) -> Solution | None:
    """One option per group maximising the summed value within the budgets (the module's docstring); None when
    even the lowest-power options do not fit, a group is empty, or a budget is not a number >= 0. No groups:
    an empty solution. An infinite budget constrains nothing. ``racks[i]``: the rack of group i (an index into
    ``rack_budgets_w``), -1 for none."""
    k = max((len(g) for g in groups), default=0)
    power = np.full((len(groups), max(k, 1)), np.nan)
    value = np.full((len(groups), max(k, 1)), np.nan)
    for i, g in enumerate(groups):
        power[i, :len(g)] = [o.power_w for o in g]
        value[i, :len(g)] = [o.value for o in g]
    return solve_arrays(power, value, budget_w, racks=None if racks is None else np.asarray(racks, dtype=np.int64),
                        rack_budgets_w=np.asarray(rack_budgets_w, dtype=float), gap=gap, max_nodes=max_nodes)


def solve_arrays(power_w: np.ndarray, value: np.ndarray, budget_w: float, *, racks: np.ndarray | None = None,
                 rack_budgets_w: np.ndarray | None = None, gap: float = GAP,
                 max_nodes: int = MAX_NODES) -> Solution | None:
    """``solve`` on arrays: row i holds job i's options (power and value), NaN where a job has fewer options."""
    n = power_w.shape[0]
    rb = np.zeros(0) if rack_budgets_w is None else np.asarray(rack_budgets_w, dtype=float)
    rk = np.full(n, -1, dtype=np.int64) if racks is None else np.asarray(racks, dtype=np.int64)
    if not (budget_w >= 0) or not np.all(rb >= 0) or (len(rk) and (rk.max() >= len(rb) or rk.min() < -1)):
        return None
    if n == 0:
        return Solution([], 0.0, 0.0, "greedy")
    p = Prepared.build(power_w, value, budget_w, rk, rb)
    if p is None:
        return None
    return p.solve(gap, max_nodes)


@dataclass
class Prepared:
    """The options left after dropping what cannot fit or is dominated, sorted by power in each row (NaN-free:
    padding is +inf power, -inf value), with the map back to the caller's indices and the budgets."""

    power: np.ndarray      # (n, k)
    value: np.ndarray
    orig: np.ndarray       # (n, k) the caller's option index
    count: np.ndarray      # (n,) options per row
    rack: np.ndarray       # (n,) rack index, -1 none
    budget: float          # the lab's (finite)
    rack_budget: np.ndarray
    lam: float = 0.0       # the relaxation's prices, once solved
    mu: tuple[float, ...] = ()

    @classmethod
    def build(cls, power_w: np.ndarray, value: np.ndarray, budget_w: float, rack: np.ndarray,
              rack_budget: np.ndarray) -> Prepared | None:
        """The problem as the first pass and the search take it; None when it cannot be met (``solve``)."""
        pw = np.where(np.isnan(power_w) | np.isnan(value), np.inf, power_w).astype(float)
        if not np.isfinite(pw).any(axis=1).all() or (pw < 0).any():
            return None
        best_w = np.where(np.isfinite(pw), pw, -np.inf)
        rb = rack_budget.copy()
        if math.isinf(budget_w):    # no lab cap: every job's highest-power option fits
            budget_w = float(np.max(best_w, axis=1).sum()) + 1.0
        for r in range(len(rb)):
            if math.isinf(rb[r]):
                rb[r] = float(np.max(best_w[rack == r], axis=1, initial=0.0).sum()) + 1.0
        # Options over a budget stay: none is ever taken (every step checks the rooms), but the relaxation must see
        # them, or a budget that keeps a job from its fastest mode would look slack and its price be 0.
        vv = np.where(np.isfinite(pw), value, -np.inf)
        order = np.lexsort((-vv, pw), axis=1)      # by power, then the better value first
        pw = np.take_along_axis(pw, order, axis=1)
        vv = np.take_along_axis(vv, order, axis=1)
        # dominated: not strictly more value than some option of no more power
        before = np.maximum.accumulate(vv, axis=1)
        keep = np.isfinite(pw) & np.concatenate([np.ones((len(pw), 1), bool), vv[:, 1:] > before[:, :-1]], axis=1)
        # compact: kept options to the left, in order
        pos = np.argsort(~keep, axis=1, kind="stable")
        pw, vv, order = (np.take_along_axis(a, pos, axis=1) for a in (pw, vv, order))
        count = keep.sum(axis=1)
        width = int(count.max())
        pad = np.arange(width)[None, :] >= count[:, None]
        pw, vv, order = pw[:, :width].copy(), vv[:, :width].copy(), order[:, :width]
        pw[pad], vv[pad] = np.inf, -np.inf
        budget = float(budget_w) - _EPS_W
        rbud = rb - _EPS_W
        if pw[:, 0].sum() > budget or any(pw[rack == r, 0].sum() > rbud[r] for r in range(len(rb))):
            return None
        return cls(pw, vv, order, count, rack, budget, rbud)

    # --- the relaxation, a first solution and the bound ------------------------------------------------------
    def _increments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The hull's steps of every row, by falling value per watt: (row, option left, option reached, watts,
        value)."""
        n, k = self.power.shape
        on = np.arange(k)[None, :] < self.count[:, None]
        while True:   # drop points under the chord of their neighbours on the hull, all rows at once
            idx = np.where(on, np.arange(k)[None, :], -1)
            prev = np.maximum.accumulate(idx, axis=1)
            prev = np.concatenate([np.full((n, 1), -1), prev[:, :-1]], axis=1)
            nidx = np.where(on, np.arange(k)[None, :], k)
            nxt = np.minimum.accumulate(nidx[:, ::-1], axis=1)[:, ::-1]
            nxt = np.concatenate([nxt[:, 1:], np.full((n, 1), k)], axis=1)
            mid = on & (prev >= 0) & (nxt < k)
            rows = np.nonzero(mid)
            pi, ni = prev[rows], nxt[rows]
            p0, v0 = self.power[rows[0], pi], self.value[rows[0], pi]
            p1, v1 = self.power[rows], self.value[rows]
            p2, v2 = self.power[rows[0], ni], self.value[rows[0], ni]
            # under (or on) the chord from prev to next: not on the hull (collinear points are kept out too)
            below = (v1 - v0) * (p2 - p0) <= (v2 - v0) * (p1 - p0)
            if not below.any():
                break
            # a point under the chord of two others is on no upper hull: all such go at once
            on[rows[0][below], rows[1][below]] = False
        r, c = np.nonzero(on)
        first = np.concatenate([[True], r[1:] != r[:-1]])
        step = ~first
        rows, to = r[step], c[step]
        frm = c[np.nonzero(step)[0] - 1]
        dw = self.power[rows, to] - self.power[rows, frm]
        dv = self.value[rows, to] - self.value[rows, frm]
        order = np.lexsort((to, rows, -(dv / dw)))
        return rows[order], frm[order], to[order], dw[order], dv[order]

    def solve(self, gap: float, max_nodes: int) -> Solution:
        """The first pass, then the search if the first pass is not within ``gap`` (the module's docstring)."""
        rows, frm, to, dw, dv = self._increments()
        n = len(self.power)
        nr = len(self.rack_budget)
        base_w = self.power[:, 0]
        room = self.budget - float(base_w.sum())
        rroom = np.array([self.rack_budget[r] - base_w[self.rack == r].sum() for r in range(nr)])
        lam, mu, taken = self._relax(rows, dw, dv, room, rroom.copy())
        price = lam + np.where(self.rack >= 0, mu[np.maximum(self.rack, 0)] if nr else 0.0, 0.0)
        live = np.isfinite(self.power)
        reduced = np.where(live, self.value - price[:, None] * np.where(live, self.power, 0.0), -np.inf)
        top = reduced.max(axis=1)
        bound = lam * self.budget + float(mu @ self.rack_budget if nr else 0.0) + float(top.sum())
        pick = np.zeros(n, dtype=np.int64)
        np.maximum.at(pick, rows[taken], to[taken])    # the relaxation rounded down: each row's last whole step
        self._fill(pick, rows, frm, to, dw, taken)
        self._improve(pick, pairs=False)
        if bound - self._value(pick) > gap * bound:    # not there yet: exchanges between jobs too
            self._improve(pick, pairs=True)
        best = self._value(pick)
        bound = max(bound, best)
        self.lam, self.mu = lam, tuple(float(x) for x in mu)
        if bound - best <= gap * max(bound, 0.0) + 1e-12:
            return self.answer(pick, best, bound, "greedy", 0)
        folded = fold(self) if nr else None
        if folded is not None:    # racks of a few jobs: each folded into one job, the lab's budget left alone
            sol = solve_arrays(folded.power, folded.value, self.budget, gap=gap, max_nodes=max_nodes)
            if sol is not None and sol.value >= best:
                return Solution(folded.unfold(sol.picks, n, self.orig), sol.value, max(sol.bound, sol.value),
                                "cut" if sol.method == "cut" else "folded", sol.nodes, lam, self.mu)
        search = Search(self, reduced, top, price, lam, mu, pick, best, bound, gap, max_nodes)
        if len(search.free) > MAX_DEPTH:
            return self.answer(pick, best, bound, "cut", 0)
        return search.run()

    def _relax(self, rows: np.ndarray, dw: np.ndarray, dv: np.ndarray, room: float,
               rroom: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """The relaxation, greedily: the hull's steps by falling value per watt while the lab and their rack have
        room; a rack that fills takes no more (the step that filled it is taken in part), and the lab filling ends
        it. Returns its prices: the lab's value per watt where it fills (lambda, 0 if it never does) and for each
        rack that filled first, its own break's value per watt above lambda (mu); and the steps taken whole.
        Vectorised: one pass per rack that fills, plus one."""
        nr = len(rroom)
        eff = dv / dw
        rk = self.rack[rows] if len(rows) else np.zeros(0, dtype=np.int64)
        taken = np.zeros(len(rows), bool)
        full = np.zeros(nr, bool)
        rack_eff = np.zeros(nr)
        lam = 0.0
        start = 0
        while start < len(rows):
            idx = start + np.nonzero(~full[rk[start:]] | (rk[start:] < 0))[0] if nr else np.arange(start, len(rows))
            w = dw[idx]
            over = np.cumsum(w) > room + 1e-12
            if nr:
                r = rk[idx]
                inr = r >= 0
                cum_r = _grouped_cumsum(w[inr], r[inr], nr)
                rover = np.zeros(len(idx), bool)
                rover[inr] = cum_r > rroom[r[inr]] + 1e-12
                over |= rover
            hit = np.nonzero(over)[0]
            stop = int(hit[0]) if len(hit) else len(idx)
            whole = idx[:stop]
            taken[whole] = True
            room -= float(dw[whole].sum())
            if nr:
                np.subtract.at(rroom, rk[whole][rk[whole] >= 0], dw[whole][rk[whole] >= 0])
            if stop == len(idx):
                break
            i = int(idx[stop])
            part = dw[i]
            r0 = int(rk[i])
            if r0 >= 0 and part > rroom[r0] + 1e-12:    # its rack fills here (in part)
                full[r0] = True
                rack_eff[r0] = eff[i]
                part = max(rroom[r0], 0.0)
            if part > room + 1e-12:                     # the lab fills here: the relaxation ends
                lam = float(eff[i])
                break
            room -= part
            if r0 >= 0:
                rroom[r0] -= part
            start = i + 1
        return lam, np.where(full, np.maximum(rack_eff - lam, 0.0), 0.0), taken

    def _fill(self, pick: np.ndarray, rows: np.ndarray, frm: np.ndarray, to: np.ndarray, dw: np.ndarray,
              taken: np.ndarray) -> None:
        """After the relaxation rounded down, the greedy goes on: the steps left, by falling value per watt (their
        order in ``rows``), each taken whole if it fits; a row whose step does not fit takes no later one. Only the
        next step of each row is waiting at any time (a heap by position), so this costs the steps taken, not the
        steps there are."""
        room, rroom = self.rooms(pick)
        rk = self.rack[rows]
        chain = np.lexsort((frm, rows))                  # each row's steps in order along it
        following = np.full(len(rows), -1)
        same = rows[chain][1:] == rows[chain][:-1]
        following[chain[:-1][same]] = chain[1:][same]
        heap = [int(i) for i in np.nonzero(~taken & (frm == pick[rows]))[0]]
        heapq.heapify(heap)
        while heap:
            i = heapq.heappop(heap)
            j, r, w = rows[i], rk[i], dw[i]
            if w > room or (r >= 0 and w > rroom[r]):
                continue                                 # the row stays where it is
            pick[j] = to[i]
            room -= w
            if r >= 0:
                rroom[r] -= w
            if following[i] >= 0:
                heapq.heappush(heap, int(following[i]))

    def rooms(self, pick: np.ndarray) -> tuple[float, np.ndarray]:
        """What the lab's and each rack's budget leave with these picks."""
        used = self.power[np.arange(len(pick)), pick]
        return (self.budget - float(used.sum()),
                np.array([self.rack_budget[r] - used[self.rack == r].sum() for r in range(len(self.rack_budget))]))

    def _improve(self, pick: np.ndarray, pairs: bool) -> None:
        """Local moves while any gains, the largest gain first: one job to another option that still fits, or (with
        ``pairs``) two jobs under the same caps exchanging watts (one steps up, the other down to make room)."""
        idx = np.arange(len(pick))
        live = np.isfinite(self.power)
        for _ in range(min(len(pick), MAX_MOVES)):
            room, rroom = self.rooms(pick)
            cur_w, cur_v = self.power[idx, pick], self.value[idx, pick]
            space = np.full(len(pick), room)
            if len(rroom):
                space = np.where(self.rack >= 0, np.minimum(room, rroom[np.maximum(self.rack, 0)]), room)
            dw = np.where(live, self.power - cur_w[:, None], np.inf)
            dv = np.where(live, self.value - cur_v[:, None], -np.inf)
            single = np.where(dw <= space[:, None], dv, -np.inf)
            at = np.unravel_index(int(np.argmax(single)), single.shape)
            best = (float(single[at]), [(int(at[0]), int(at[1]))])
            for r in np.unique(self.rack) if pairs else ():
                pair = _best_pair(dw, dv, np.nonzero(self.rack == r)[0], float(space[self.rack == r][0]))
                if pair is not None and pair[0] > best[0]:
                    best = pair
            if not best[0] > 1e-12:
                return
            for row, k in best[1]:
                pick[row] = k

    def _value(self, pick: np.ndarray) -> float:
        return float(self.value[np.arange(len(pick)), pick].sum())

    def answer(self, pick: np.ndarray, value: float, bound: float, method: str, nodes: int) -> Solution:
        """The solution with ``pick`` (this problem's option indices) in the caller's indices."""
        return Solution([int(x) for x in self.orig[np.arange(len(pick)), pick]], value, bound, method, nodes,
                        self.lam, self.mu)


def _best_pair(dw: np.ndarray, dv: np.ndarray, rows: np.ndarray,
               space: float) -> tuple[float, list[tuple[int, int]]] | None:
    """Of these rows (jobs under the same caps, ``space`` watts left there), the best exchange: one row up by
    ``dw`` watts gaining ``dv``, another down (``dw`` < 0) freeing what the first needs beyond ``space``. The gain
    and the two moves, or None."""
    if len(rows) < 2:
        return None
    w, v = dw[rows], dv[rows]
    up_r, up_k = np.nonzero((w > 0) & (v > 0) & np.isfinite(w))
    dn_r, dn_k = np.nonzero((w < 0) & np.isfinite(w))
    if not len(up_r) or not len(dn_r):
        return None
    freed, loss = -w[dn_r, dn_k], -v[dn_r, dn_k]
    order = np.argsort(-freed)          # most freed first: the cheapest loss among those freeing at least x
    freed, loss, dn_r, dn_k = freed[order], loss[order], dn_r[order], dn_k[order]
    at = _argmin_prefix(loss)
    need = w[up_r, up_k] - space        # watts the down move must free
    # the prefix of ``freed`` (falling) that frees at least ``need``: its length
    n_ok = np.searchsorted(-freed, -need, side="right")
    ok = n_ok > 0
    if not ok.any():
        return None
    j = at[np.maximum(n_ok - 1, 0)]
    gain = np.where(ok & (dn_r[j] != up_r), v[up_r, up_k] - loss[j], -np.inf)
    t = int(np.argmax(gain))
    if not np.isfinite(gain[t]):
        return None
    return float(gain[t]), [(int(rows[up_r[t]]), int(up_k[t])), (int(rows[dn_r[j[t]]]), int(dn_k[j[t]]))]


def _argmin_prefix(x: np.ndarray) -> np.ndarray:
    """For each i, the index of the least of x[:i + 1] (the first, on ties)."""
    best = np.minimum.accumulate(x)
    first = np.where(x == best, np.arange(len(x)), -1)
    return np.maximum.accumulate(first)


def _grouped_cumsum(w: np.ndarray, group: np.ndarray, groups: int) -> np.ndarray:
    """Running sums of ``w`` within each group, in the order given."""
    order = np.argsort(group, kind="stable")
    c = np.cumsum(w[order])
    starts = np.searchsorted(group[order], np.arange(groups))
    before = np.concatenate([[0.0], c])[starts]          # the sum of the groups ahead of each group
    out = np.empty_like(c)
    out[order] = c - before[group[order]]
    return out


def exhaustive(groups: Sequence[Sequence[Option]], budget_w: float, *, racks: Sequence[int] | None = None,
               rack_budgets_w: Sequence[float] = ()) -> tuple[list[int], float] | None:
    """The optimum by enumerating every combination (small instances only: the product of the group sizes)."""
    best: tuple[list[int], float] | None = None
    rk = list(racks) if racks is not None else [-1] * len(groups)
    for combo in itertools.product(*(range(len(g)) for g in groups)):
        p = sum(groups[i][j].power_w for i, j in enumerate(combo))
        if p > budget_w + 1e-9:
            continue
        if any(sum(groups[i][j].power_w for i, j in enumerate(combo) if rk[i] == r) > b + 1e-9
               for r, b in enumerate(rack_budgets_w)):
            continue
        v = sum(groups[i][j].value for i, j in enumerate(combo))
        if best is None or v > best[1] + 1e-12:
            best = (list(combo), v)
    return best
