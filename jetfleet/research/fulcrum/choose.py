"""Fulcrum's choice: maximise training throughput s.t. p95 inference latency <= a budget and power <= a budget,
over (power mode, inference batch size) with the managed scheduler's slack as the interleaving parameter.

Strategies (each returns a ``Choice``: the configuration, what it expected, and how many modes it profiled):
- ``gmd``: multi-dimensional descent over the four mode knobs from a sensible start (all cores, top memory clock,
  middle CPU and GPU clocks), the batch size chosen per profiled mode, first improvement taken, steps of two
  grid positions then one. Domain knowledge orders and prunes the directions: over the power budget only steps
  down are tried, cores and CPU first (power rises steadily with every knob; the GPU buys the most throughput);
  within it, GPU up first, then the other knobs up, then trades (one knob up, another down); once a GPU step up
  gains < 3% (the plateau) it is not tried alone again. At most ``GMD_MAX_MODES`` modes are profiled.
- ``als``: active learning: a random seed set, an ensemble of small NNs predicting both workloads' time and
  power in every mode, then rounds profiling the unprofiled modes that are predicted Pareto-optimal (training
  time, power, inference latency) with the most ensemble disagreement. Budget-free: the profiled set is
  reused for every budget and arrival rate; the choice is the best of the profiled modes for the scenario.
- ``random_k``: the best of k random profiled modes; ``nn``: PowerTrain-style predictions of every mode from
  an NN trained on 50 random profiled modes (from scratch, no reference transfer), the choice from predictions;
  ``maxn``: MAXN, best batch size; ``optimum``: exhaustive over every (mode, batch size) on the twin's
  noiseless truth (branch and bound on a throughput upper bound).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from jetfleet.research.fulcrum.space import BATCH_SIZES, Lab, Outcome, Profile, Scenario, grid_modes, plan
from jetfleet.shared.catalog import PowerMode, get_catalog
from jetfleet.shared.concurrency import DEFAULT_SLACK

# Planning margins: a plan counts as within budget only with p95 <= 0.9 x the latency budget and power <= 0.97 x the
# power budget. A plan replays one 20 s sample of arrivals on measured profiles; the real run sees other arrivals,
# per-step jitter and the sensor's noise, and a plan right at a budget misses it about half the time.
LATENCY_MARGIN = 0.9
POWER_MARGIN = 0.97
GMD_MAX_MODES = 15
GPU_PLATEAU = 0.03
ALS_SEED = 20
ALS_ROUND = 10
ALS_MODES = 100
NN_MODES = 50
RANDOM_K = 15


@dataclass(frozen=True)
class Choice:
    """A strategy's configuration, what it expected of it, and its cost."""

    strategy: str
    mode: PowerMode | None
    batch_size: int
    expected: Outcome | None
    known: Profile | None          # what the strategy knows of the chosen mode (the scheduler's first estimates)
    modes_profiled: int


class Planner:
    """Plans configurations of one scenario on profiles, with a cache (a plan is deterministic)."""

    def __init__(self, sc: Scenario, lab: Lab, arrivals: np.ndarray, slack: float = DEFAULT_SLACK) -> None:
        self.sc, self.lab, self.arrivals, self.slack = sc, lab, arrivals, slack
        self._cache: dict[tuple[PowerMode, int, Profile], Outcome] = {}

    def outcome(self, mode: PowerMode, b: int, prof: Profile) -> Outcome:
        """The planned outcome of (mode, batch size) on ``prof``."""
        key = (mode, b, prof)
        if key not in self._cache:
            self._cache[key] = plan(prof, b, self.sc, self.arrivals, self.lab.idle_w(mode), self.slack)
        return self._cache[key]

    def ok(self, o: Outcome) -> bool:
        """Within both budgets with the planning margins."""
        return o.p95_s <= LATENCY_MARGIN * self.sc.latency_budget_s and o.power_w <= POWER_MARGIN * self.sc.power_budget_w

    def upper_bound(self, prof: Profile, b: int) -> float:
        """Training throughput cannot exceed the GPU share inference leaves (full batches) / minibatch time;
        0 when power cannot be within budget (both kinds of step over it) or a batch alone is over the latency."""
        t_b, w_b = prof.infer_at(b)
        if min(prof.train_w, w_b) > self.sc.power_budget_w or prof.infer_at(1)[0] > self.sc.latency_budget_s:
            return 0.0
        return max(0.0, 1.0 - self.sc.rate * t_b / b) / prof.train_s

    def best(self, candidates: Sequence[tuple[PowerMode, Profile]]) -> tuple[PowerMode, int, Outcome] | None:
        """The feasible (mode, batch size) of highest planned throughput among ``candidates`` (branch and bound:
        configurations are planned in order of their upper bound until none can beat the best)."""
        items = [(self.upper_bound(p, b), i, b) for i, (_, p) in enumerate(candidates) for b in BATCH_SIZES]
        items.sort(key=lambda x: -x[0])
        best: tuple[PowerMode, int, Outcome] | None = None
        for ub, i, b in items:
            if ub <= 0 or (best is not None and ub <= best[2].train_per_s):
                break
            mode, prof = candidates[i]
            o = self.outcome(mode, b, prof)
            if self.ok(o) and (best is None or o.train_per_s > best[2].train_per_s):
                best = (mode, b, o)
        return best

    def score(self, mode: PowerMode, prof: Profile) -> tuple[float, int, Outcome]:
        """A mode's value for descent: (score, best batch size, outcome); feasible scores are throughputs,
        infeasible ones minus their violation."""
        found = self.best([(mode, prof)])
        if found is not None:
            return found[2].train_per_s, found[1], found[2]
        outs = [(self.outcome(mode, b, prof), b) for b in BATCH_SIZES]
        o, b = min(outs, key=lambda x: x[0].violation(self.sc))
        return -o.violation(self.sc) - 1e-3, b, o


def _choice(name: str, found: tuple[PowerMode, int, Outcome] | None, profiles: dict[PowerMode, Profile],
            n: int, fallback: tuple[PowerMode, int, Outcome] | None = None) -> Choice:
    pick = found or fallback
    if pick is None:
        return Choice(name, None, 0, None, None, n)
    return Choice(name, pick[0], pick[1], pick[2], profiles.get(pick[0]), n)


def gmd(planner: Planner) -> Choice:
    """Multi-dimensional gradient descent with domain-knowledge pruning (see the module docstring)."""
    sc, lab = planner.sc, planner.lab
    cat = get_catalog(sc.board)
    axes = [tuple(sorted({getattr(m, k) for m in cat.grid("inference")})) for k in ("cores", "cpu_mhz", "gpu_mhz",
                                                                                      "mem_mhz")]
    idx = [len(axes[0]) - 1, len(axes[1]) // 2, len(axes[2]) // 2, len(axes[3]) - 1]
    profiles: dict[PowerMode, Profile] = {}
    scores: dict[PowerMode, tuple[float, int, Outcome]] = {}

    def mode_of(ix: Sequence[int]) -> PowerMode:
        return PowerMode(int(axes[0][ix[0]]), float(axes[1][ix[1]]), float(axes[2][ix[2]]), float(axes[3][ix[3]]))

    def evaluate(ix: Sequence[int]) -> tuple[float, int, Outcome]:
        m = mode_of(ix)
        if m not in scores:
            profiles[m] = lab.profile(sc.training, sc.inference, m)
            scores[m] = planner.score(m, profiles[m])
        return scores[m]

    cur = evaluate(idx)
    gpu_up = True
    step = 2
    GPU, MEM, CPU, CORES = 2, 3, 1, 0  # noqa: N806 - knob indices
    while len(profiles) < GMD_MAX_MODES:
        over_power = cur[2].power_w > POWER_MARGIN * sc.power_budget_w
        if over_power:    # shed power where it costs least throughput: cores and CPU first, the GPU last
            moves = [[(CORES, -1)], [(CPU, -1)], [(MEM, -1)], [(GPU, -1)]]
        else:             # speed up where it pays (GPU first, while it gains), then trade one knob for another
            moves = ([[(GPU, +1)]] if gpu_up else []) + [[(CPU, +1)], [(MEM, +1)], [(CORES, +1)],
                                                         [(GPU, +1), (CPU, -1)], [(GPU, +1), (CORES, -1)],
                                                         [(GPU, +1), (MEM, -1)], [(CPU, +1), (GPU, -1)],
                                                         [(MEM, +1), (CPU, -1)]]
        moved = False
        for move in moves:
            j = list(idx)
            for k, d in move:
                j[k] = min(max(0, j[k] + d * step), len(axes[k]) - 1)
            if j == idx or mode_of(j) in scores:
                continue
            if len(profiles) >= GMD_MAX_MODES:
                break
            v = evaluate(j)
            if move == [(GPU, +1)] and cur[0] > 0 and v[0] < cur[0] * (1 + GPU_PLATEAU):
                gpu_up = False          # GPU gains have plateaued: stop trying GPU steps up alone
            if v[0] > cur[0]:           # first improvement: take it and look again from there
                idx, cur, moved = j, v, True
                break
        if not moved:
            if step == 1:
                break
            step = 1
    feasible = [(m, s) for m, s in scores.items() if s[0] > 0]
    if feasible:
        m, s = max(feasible, key=lambda x: x[1][0])
        return Choice("GMD", m, s[1], s[2], profiles[m], len(profiles))
    m, s = max(scores.items(), key=lambda x: x[1][0])
    return Choice("GMD", m, s[1], s[2], profiles[m], len(profiles))


# --- models of both workloads (ALS, the NN baseline) -------------------------------------------------------
def _features(modes: Sequence[PowerMode]) -> np.ndarray:
    return np.array([[m.cores, m.cpu_mhz, m.gpu_mhz, m.mem_mhz] for m in modes], dtype=float)


def fit_ensemble(x: np.ndarray, y: np.ndarray, members: int, seed: int,
                 epochs: int = 400) -> Callable[[np.ndarray], np.ndarray]:
    """An ensemble of small MLPs (4 -> 64 -> 64 -> outputs, standardised inputs and targets, Adam, full batch);
    returns predict(x) -> (members, n, outputs)."""
    import torch

    xm, xs = x.mean(0), np.where(x.std(0) > 1e-9, x.std(0), 1.0)
    ym, ys = y.mean(0), np.where(y.std(0) > 1e-9, y.std(0), 1.0)
    xt = torch.tensor((x - xm) / xs, dtype=torch.float32)
    yt = torch.tensor((y - ym) / ys, dtype=torch.float32)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)   # tiny networks: a second thread costs more in synchronisation than it gains
    nets = []
    try:
        nets = [_train_one(xt, yt, seed * 101 + k, epochs) for k in range(members)]
    finally:
        torch.set_num_threads(threads)

    def predict(xq: np.ndarray) -> np.ndarray:
        q = torch.tensor((xq - xm) / xs, dtype=torch.float32)
        with torch.no_grad():
            return np.stack([net(q).numpy() * ys + ym for net in nets])

    return predict


def _train_one(xt: Any, yt: Any, seed: int, epochs: int) -> Any:
    import torch

    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(xt.shape[1], 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                              torch.nn.ReLU(), torch.nn.Linear(64, yt.shape[1]))
    opt = torch.optim.Adam(net.parameters(), lr=3e-3, weight_decay=1e-4)
    for _ in range(epochs):
        opt.zero_grad()
        loss = torch.mean((net(xt) - yt) ** 2)
        loss.backward()
        opt.step()
    return net


def _layers(points: np.ndarray) -> np.ndarray:
    """Each row's non-domination layer: 0 on the Pareto front, 1 on the front of the rest, ..."""
    layer = np.full(len(points), -1)
    left = np.arange(len(points))
    k = 0
    while len(left):
        front = _pareto(points[left])
        layer[left[front]] = k
        left = left[~front]
        k += 1
    return layer


def _pareto(points: np.ndarray) -> np.ndarray:
    """Mask of the non-dominated rows (every column minimised)."""
    n = len(points)
    keep = np.ones(n, dtype=bool)
    for i in range(n):
        if keep[i]:
            dominated = np.all(points[i] <= points, axis=1) & np.any(points[i] < points, axis=1)
            keep &= ~dominated
    return keep


@dataclass
class AlsModel:
    """ALS's budget-free result for one (board, workload pair): the profiled modes and their profiles."""

    profiles: dict[PowerMode, Profile]


def als_profile(lab: Lab, training: str, inference: str, seed: int = 0, total: int = ALS_MODES,
                epochs: int = 400) -> AlsModel:
    """Active learning over the inference grid (no budget, no rate: reusable for every scenario)."""
    modes = grid_modes(lab.board_model)
    rng = np.random.default_rng([seed, 151])
    chosen = [int(i) for i in rng.choice(len(modes), ALS_SEED, replace=False)]
    x_all = _features(modes)
    while len(chosen) < total:
        y = np.stack([lab.profile(training, inference, modes[i]).vector() for i in chosen])
        pred = fit_ensemble(x_all[chosen], y, 3, seed + len(chosen), epochs)(x_all)
        mean, spread = pred.mean(0), pred.std(0)
        k = len(BATCH_SIZES)
        # objectives: training time and the larger of the two workloads' powers (inference at batch 8): the front
        # every power budget's choice lies on (inference latency rarely binds once a mode trains fast)
        obj = np.stack([mean[:, 0], np.maximum(mean[:, 1], mean[:, 2 + k + 3])], axis=1)
        layer = _layers(obj)
        unc = (spread / np.maximum(1e-9, np.abs(pred).mean(0) + 1e-9)).mean(1)
        taken = set(chosen)
        # the predicted front first, then the next layers, each most uncertain first
        cand = [int(i) for i in np.lexsort((-unc, layer)) if int(i) not in taken]
        chosen += cand[:min(ALS_ROUND, total - len(chosen))]
    return AlsModel({modes[i]: lab.profile(training, inference, modes[i]) for i in chosen})


def als(planner: Planner, model: AlsModel) -> Choice:
    """The best configuration among ALS's profiled modes for this scenario (no new profiling)."""
    cands = list(model.profiles.items())
    return _choice("ALS", planner.best(cands), model.profiles, len(model.profiles))


def random_k(planner: Planner, k: int = RANDOM_K, seed: int = 0) -> Choice:
    """The best of k random profiled modes."""
    modes = grid_modes(planner.sc.board)
    rng = np.random.default_rng([seed, 152])
    picked = [modes[int(i)] for i in rng.choice(len(modes), k, replace=False)]
    profiles = {m: planner.lab.profile(planner.sc.training, planner.sc.inference, m) for m in picked}
    return _choice(f"random-{k}", planner.best(list(profiles.items())), profiles, k)


@dataclass
class NnModel:
    """The NN baseline's predictions of every grid mode (from NN_MODES random profiled modes)."""

    predicted: dict[PowerMode, Profile]
    profiled: int


def nn_predict(lab: Lab, training: str, inference: str, seed: int = 0, k: int = NN_MODES,
               epochs: int = 400) -> NnModel:
    """Train on k random profiled modes, predict every mode of the grid."""
    modes = grid_modes(lab.board_model)
    rng = np.random.default_rng([seed, 153])
    picked = [int(i) for i in rng.choice(len(modes), k, replace=False)]
    x = _features(modes)
    y = np.stack([lab.profile(training, inference, modes[i]).vector() for i in picked])
    pred = fit_ensemble(x[picked], y, 1, seed, epochs)(x)[0]
    return NnModel({m: Profile.from_vector(pred[i]) for i, m in enumerate(modes)}, k)


def nn(planner: Planner, model: NnModel) -> Choice:
    """The best configuration on the NN's predictions of every mode."""
    return _choice(f"NN-{model.profiled}", planner.best(list(model.predicted.items())), model.predicted,
                   model.profiled)


def maxn(planner: Planner) -> Choice:
    """MAXN with its best batch size (profiled once)."""
    m = get_catalog(planner.sc.board).maxn
    prof = planner.lab.profile(planner.sc.training, planner.sc.inference, m)
    s = planner.score(m, prof)
    return Choice("MAXN", m, s[1], s[2], prof, 1)


def optimum(planner: Planner, truth: dict[PowerMode, Profile]) -> Choice:
    """Exhaustive over every mode and batch size on the twin's noiseless truth."""
    found = planner.best(list(truth.items()))
    return _choice("optimum", found, truth, len(truth))


def fastest_single_request_s(truth: dict[PowerMode, Profile]) -> float:
    """The lowest latency any mode gives one request alone (a lower bound on any budget worth asking)."""
    return min(p.infer_s[0] for p in truth.values())


def best_latency_at_rate_s(truth: dict[PowerMode, Profile], rate: float) -> float:
    """The lowest batch latency at which some mode and batch size keeps up with ``rate`` (inference alone)."""
    best = math.inf
    for p in truth.values():
        for i, b in enumerate(BATCH_SIZES):
            if rate * p.infer_s[i] / b < 1.0:
                best = min(best, p.infer_s[i])
    return best
