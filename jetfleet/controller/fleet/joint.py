"""The joint choice's problem as the scheduler grows it: one row of options (power, value) per placed job, the
rack each counts in, and the budgets the lab's cap and the rack caps leave them once the other boards' draw is
taken off. A trial placement is one more row, solved without copying the rest (``knapsack.solve_arrays``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from jetfleet.controller.fleet.knapsack import GAP, MAX_NODES, Solution, solve_arrays

TRIAL_GAP = 1e-3        # a trial placement or exchange is judged to 0.1 % (the pass's final choice to GAP) ...
TRIAL_NODES = 1_000
EXACT_JOBS = 16         # ... but with this few jobs every choice is the optimum (a gap of 0: small labs, exactly)


@dataclass(frozen=True)
class Domain:
    """The caps over some boards: the lab's (math.inf: none) and each capped rack's, and what the boards draw
    when none of them runs a job of the queue (idle, or their other work's draw), in all and per rack."""

    cap_w: float
    racks: tuple[str, ...]                 # the capped racks, by name
    rack_caps_w: tuple[float, ...]
    idle_w: float
    rack_idle_w: tuple[float, ...]
    index: dict[str, int] = field(default_factory=dict, compare=False)   # rack name -> its index in ``racks``

    @classmethod
    def of(cls, boards: Iterable[tuple[str, float]], cap_w: float, group_caps_w: Mapping[str, float]) -> Domain:
        """From (rack group, idle W) per board and the caps."""
        racks = tuple(sorted(group_caps_w))
        idle = {g: 0.0 for g in racks}
        total = 0.0
        for group, idle_w in boards:
            total += idle_w
            if group in idle:
                idle[group] += idle_w
        return cls(cap_w, racks, tuple(group_caps_w[g] for g in racks), total, tuple(idle[g] for g in racks),
                   {g: i for i, g in enumerate(racks)})

    def rack(self, group: str) -> int:
        """The index of a board's capped rack, -1 when its rack has no cap (or it has none)."""
        return self.index.get(group, -1)


class JointRows:
    """The placed jobs' options as rows of a knapsack, with the budgets they share (``Domain``)."""

    def __init__(self, domain: Domain, capacity: int, width: int) -> None:
        self.domain = domain
        self.power = np.full((max(capacity, 1), max(width, 1)), np.nan)
        self.value = np.full_like(self.power, np.nan)
        self.rack = np.full(len(self.power), -1, dtype=np.int64)
        self.n = 0
        self.freed_w = 0.0                      # idle draw of the boards placed on (their job's power replaces it)
        self.rack_freed_w = np.zeros(len(domain.racks))
        self.base_w = 0.0                       # the placed jobs' lowest options, summed (all, and per rack)
        self.rack_base_w = np.zeros(len(domain.racks))
        self._budgets: tuple[float, np.ndarray] | None = None

    def budgets(self) -> tuple[float, np.ndarray]:
        """What the lab's cap and each rack's leave for the placed jobs."""
        if self._budgets is None:
            d = self.domain
            self._budgets = (d.cap_w - (d.idle_w - self.freed_w), np.asarray(d.rack_caps_w, dtype=float)
                             - (np.asarray(d.rack_idle_w, dtype=float) - self.rack_freed_w))
        return self._budgets

    def _write(self, i: int, power_w: np.ndarray, value: np.ndarray) -> None:
        if len(power_w) > self.power.shape[1]:   # a wider front than planned: grow the rows (rare)
            extra = len(power_w) - self.power.shape[1]
            self.power = np.pad(self.power, ((0, 0), (0, extra)), constant_values=np.nan)
            self.value = np.pad(self.value, ((0, 0), (0, extra)), constant_values=np.nan)
        if i >= len(self.power):
            self.power = np.pad(self.power, ((0, len(self.power)), (0, 0)), constant_values=np.nan)
            self.value = np.pad(self.value, ((0, len(self.value)), (0, 0)), constant_values=np.nan)
            self.rack = np.pad(self.rack, (0, len(self.rack)), constant_values=-1)
        self.power[i] = np.nan
        self.value[i] = np.nan
        self.power[i, :len(power_w)] = power_w
        self.value[i, :len(value)] = value

    def add(self, power_w: np.ndarray, value: np.ndarray, rack: int, idle_w: float) -> int:
        """Place a job (its options; the rack and idle draw of its board); returns its row."""
        i = self.n
        self._write(i, power_w, value)
        self.rack[i] = rack
        self.n += 1
        self._account(power_w, rack, idle_w, 1.0)
        return i

    def replace(self, i: int, power_w: np.ndarray, value: np.ndarray, rack: int, idle_w: float,
                old_idle_w: float) -> None:
        """Row ``i`` moves to another board (a swap): its options there, that board's rack and idle draw."""
        self._account(self.power[i][np.isfinite(self.power[i])], int(self.rack[i]), old_idle_w, -1.0)
        self._write(i, power_w, value)
        self.rack[i] = rack
        self._account(power_w, rack, idle_w, 1.0)

    def _account(self, power_w: np.ndarray, rack: int, idle_w: float, sign: float) -> None:
        low = float(np.min(power_w)) if len(power_w) else 0.0
        self._budgets = None
        self.freed_w += sign * idle_w
        self.base_w += sign * low
        if rack >= 0:
            self.rack_freed_w[rack] += sign * idle_w
            self.rack_base_w[rack] += sign * low

    def fits_lowest(self, low_w: float, rack: int, idle_w: float) -> bool:
        """Whether one more job whose lowest option draws ``low_w`` fits beside every placed job's lowest (on a
        board of ``rack`` that draws ``idle_w`` idle): the exact test of whether a joint choice exists with it."""
        lab, racks = self.budgets()
        if self.base_w + low_w > lab + idle_w + 1e-9:
            return False
        return rack < 0 or float(self.rack_base_w[rack]) + low_w <= float(racks[rack]) + idle_w + 1e-9

    def price(self, solution: Solution, rack: int) -> float:
        """The value per watt of a board's budgets at a joint choice: the lab's, plus its rack's."""
        return solution.lam + (solution.mu[rack] if 0 <= rack < len(solution.mu) else 0.0)

    def fits_beside(self, solution: Solution, low_w: float, rack: int, idle_w: float) -> bool:
        """Whether one more job's lowest option fits in what the budgets leave beside ``solution`` (the placed jobs
        it did not choose for, placed since, at their lowest): it could start without slowing anyone."""
        n = len(solution.picks)
        used = self.power[np.arange(n), solution.picks]
        later = np.nanmin(self.power[n:self.n], axis=1) if self.n > n else np.zeros(0)
        lab, racks = self.budgets()
        if float(used.sum() + later.sum()) + low_w > lab + idle_w + 1e-9:
            return False
        if rack < 0:
            return True
        mine = float(used[self.rack[:n] == rack].sum() + later[self.rack[n:self.n] == rack].sum())
        return mine + low_w <= float(racks[rack]) + idle_w + 1e-9

    def solve(self, gap: float = GAP, max_nodes: int = MAX_NODES) -> Solution | None:
        """The joint choice of the placed jobs: to ``gap``, or the optimum with EXACT_JOBS or fewer."""
        if self.n <= EXACT_JOBS:
            gap, max_nodes = 0.0, MAX_NODES
        lab, racks = self.budgets()
        if self.n == 0:
            return Solution([], 0.0, 0.0, "greedy") if lab >= 0 and (racks >= 0).all() else None
        return solve_arrays(self.power[:self.n], self.value[:self.n], lab, racks=self.rack[:self.n],
                            rack_budgets_w=racks, gap=gap, max_nodes=max_nodes)

    def trial(self, power_w: np.ndarray, value: np.ndarray, rack: int, idle_w: float) -> Solution | None:
        """The joint choice with one more job, to TRIAL_GAP (nothing is kept)."""
        self.add(power_w, value, rack, idle_w)
        try:
            return self.solve(TRIAL_GAP, TRIAL_NODES)
        finally:
            self.n -= 1
            self._account(power_w, rack, idle_w, -1.0)
