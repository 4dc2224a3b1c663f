"""The knapsack's branch and bound (``knapsack.solve`` when its first pass is not within the gap): over the jobs
whose option the first pass could not settle, pruned by Lagrangian bounds with the prices re-chosen for the rooms
left, to the gap or a node budget."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from jetfleet.controller.fleet.knapsack import Prepared, Solution

SCALES = (1.0, 0.8, 1.25)   # the bounds' lab prices: the first pass's times these


class Search:
    """Branch and bound over the jobs whose option the first pass could not settle (``knapsack.Prepared``).

    The jobs are taken those in no rack first, then rack by rack. The bound at a node is the Lagrangian one with
    the prices re-chosen for the rooms left: for each of a few lab prices (the relaxation's, scaled), the jobs in
    no rack at that price, the rack being searched at the best of a few prices of its own (its jobs' steps'
    values per watt, and the relaxation's, scaled), and the racks not yet reached at their best price for their
    whole room (a constant). Every such price gives a valid bound; the least is taken."""

    def __init__(self, p: Prepared, reduced: np.ndarray, top: np.ndarray, price: np.ndarray, lam: float,
                 mu: np.ndarray, pick: np.ndarray, best: float, bound: float, gap: float, max_nodes: int) -> None:
        self.p, self.gap, self.max_nodes, self.nodes = p, gap, max_nodes, 0
        self.best, self.best_pick, self.root_bound = best, pick.copy(), bound
        # An option whose best case (the bound with its job forced to it) cannot beat the incumbent goes.
        alive = bound - top[:, None] + reduced > best + self._slack(best)
        alive[np.arange(len(pick)), pick] = True     # the incumbent's own options stay (the search may repeat it)
        open_ = np.nonzero(alive.sum(axis=1) > 1)[0]
        # no rack first, then rack by rack; in each, the jobs with few options open first, alike jobs together
        alike = {int(i): (p.power[i].tobytes(), p.value[i].tobytes(), alive[i].tobytes()) for i in open_}
        free = sorted((int(i) for i in open_), key=lambda i: (int(p.rack[i]), int(alive[i].sum()), alike[i]))
        self.free = free
        # Jobs alike (same options, same rack) are interchangeable: of their choices only those in falling order
        # are searched (any solution is one of them, permuted).
        self.alike_prev = [d > 0 and alike[free[d]] == alike[free[d - 1]] and p.rack[free[d]] == p.rack[free[d - 1]]
                           for d in range(len(free))]
        fixed = np.ones(len(pick), bool)
        fixed[free] = False
        # the rooms hold back every free job's lowest option; the search spends each choice's extra watts
        self.room, rroom = p.rooms(np.where(fixed, pick, 0))
        self.rroom = [float(x) for x in rroom]
        self.fixed_value = float(p.value[fixed, pick[fixed]].sum()) if fixed.any() else 0.0
        # per free job, by falling reduced value: (option, extra watts over its lowest, value)
        self.opts = [[(int(k), float(p.power[i, k] - p.power[i, 0]), float(p.value[i, k]))
                      for k in np.argsort(-reduced[i]) if alive[i, k]] for i in free]
        self.rack = [int(p.rack[i]) for i in free]
        self.bounds = self._bounds(free, price, lam, mu)

    def _bounds(self, free: list[int], price: np.ndarray, lam: float,
                mu: np.ndarray) -> list[tuple[float, list[float], list[list[tuple[float, list[float]]]], list[float]]]:
        """Per lab price: (the price, the suffix sums of the no-rack jobs' terms by depth, per depth the current
        rack's (price above the lab's, suffix of its jobs' terms) choices, per depth the racks not yet reached)."""
        p = self.p
        n = len(free)
        rows = np.asarray(free, dtype=np.int64)
        live = np.isfinite(p.power[rows])
        pw = np.where(live, p.power[rows], 0.0)
        base = p.power[rows, 0]

        def terms(prices: np.ndarray) -> np.ndarray:    # each job's Lagrangian term at its price, base priced back
            t = np.where(live, p.value[rows] - prices[:, None] * pw, -np.inf).max(axis=1)
            return t + prices * base

        def suffix(t: np.ndarray, mask: np.ndarray) -> list[float]:
            return [float(x) for x in np.concatenate([np.cumsum(np.where(mask, t, 0.0)[::-1])[::-1], [0.0]])]

        racks = [r for r in dict.fromkeys(self.rack) if r >= 0]
        rack_of = np.asarray(self.rack, dtype=np.int64)
        choices: dict[int, list[float]] = {}
        for r in racks:     # the rack's own prices: its open jobs' steps' values per watt, and the relaxation's
            sel = rows[rack_of == r]
            with np.errstate(invalid="ignore", divide="ignore"):   # the rows' padding: inf - inf
                steps = np.diff(p.value[sel], axis=1) / np.diff(p.power[sel], axis=1)
            steps = steps[np.isfinite(steps) & (steps > 0)]
            own = lam + (mu[r] if r < len(mu) else 0.0)
            qs = np.quantile(steps, np.linspace(0, 1, 5)) if len(steps) else np.zeros(0)
            choices[r] = sorted({0.0, *(own * s for s in SCALES), *(float(x) for x in qs)})
        out = []
        for lam_s in sorted({lam * s for s in SCALES}):
            nonrack = suffix(terms(np.full(n, lam_s)), rack_of < 0)
            per_rack: dict[int, list[tuple[float, list[float]]]] = {}
            whole: dict[int, float] = {}
            for r in racks:
                opts = []
                for pi in sorted({max(x, lam_s) for x in choices[r]}):
                    opts.append((pi - lam_s, suffix(terms(np.full(n, pi)), rack_of == r)))
                per_rack[r] = opts
                first = self.rack.index(r)
                whole[r] = min(extra * self.rroom[r] + suf[first] for extra, suf in opts)
            current = [per_rack.get(self.rack[d], []) if d < n else [] for d in range(n + 1)]
            later = [sum(whole[r] for r in racks if r > (self.rack[d] if d < n else max(racks, default=-1)))
                     for d in range(n + 1)]
            out.append((lam_s, nonrack, current, later))
        return out

    def _slack(self, best: float) -> float:
        return self.gap * max(best, 0.0) + 1e-12

    def run(self) -> Solution:
        """Search depth first, the most promising option of each job first; the best found and what was proved."""
        free, opts, racks, rroom, bounds, alike_prev = self.free, self.opts, self.rack, self.rroom, self.bounds, \
            self.alike_prev
        depth_end = len(free)
        choice = [0] * depth_end
        found: list[list[int]] = []
        limit = [self.best + self._slack(self.best)]

        def visit(depth: int, value: float, room: float) -> bool:
            """False once the node budget is spent."""
            self.nodes += 1
            if self.nodes > self.max_nodes:
                return False
            if depth == depth_end:
                if value > self.best:
                    self.best = value
                    limit[0] = value + self._slack(value)
                    found.append(list(choice))
                return True
            r = racks[depth]
            left = rroom[r] if r >= 0 else 0.0
            for lam_s, nonrack, current, later in bounds:
                b = value + lam_s * room + nonrack[depth] + later[depth]
                if current[depth]:
                    b += min(extra * left + suf[depth] for extra, suf in current[depth])
                if b <= limit[0]:
                    return True
            cap_k = choice[depth - 1] if alike_prev[depth] else len(choice) + (1 << 30)
            for k, extra, v in opts[depth]:
                if k > cap_k or extra > room or (r >= 0 and extra > rroom[r]):
                    continue
                choice[depth] = k
                if r >= 0:
                    rroom[r] -= extra
                    ok = visit(depth + 1, value + v, room - extra)
                    rroom[r] += extra
                else:
                    ok = visit(depth + 1, value + v, room - extra)
                if not ok:
                    return False
            return True

        complete = visit(0, self.fixed_value, self.room)
        pick = self.best_pick
        if found:
            pick = pick.copy()
            pick[free] = found[-1]
        bound = self.best + self._slack(self.best) if complete else self.root_bound
        return self.p.answer(pick, self.best, max(bound, self.best), "search" if complete else "cut", self.nodes)
