"""Evaluations that reproduce PowerTrain's tables, on emulated boards or any two profile files.

Truth on the twin: every mode of the grid as the twin's profiler would measure it on one board —
the very ``EmulatedBoard`` (model, seed) a lab runs, so its board-to-board variation is the same —
plus the noise left after averaging 40 minibatches and ~25 power samples; computed from the
board's steady state, not through a campaign, so an evaluation over tens of thousands of modes
takes seconds."""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass

import numpy as np

from jetfleet.controller import profiles_csv
from jetfleet.controller.powertrain import nn as P
from jetfleet.controller.powertrain.optimize import Predictions, choose
from jetfleet.controller.powertrain.select import check_k, pick_random, pick_spread, pick_uncertain
from jetfleet.shared.catalog import PowerMode
from jetfleet.shared.errors import FailedPrecondition, InvalidArgument
from jetfleet.twin import EmulatedBoard

WINDOW_NOISE = 0.005   # relative noise left in a 40-minibatch window's median time and mean power


@dataclass(frozen=True)
class Grid:
    """Modes with their measured minibatch time (ms) and power (W)."""

    modes: list[PowerMode]
    x: np.ndarray
    time_ms: np.ndarray
    power_w: np.ndarray
    label: str


def twin_truth(board: str, workload: str, grid: str = "powertrain", seed: int = 0) -> Grid:
    """Every mode of ``grid`` as emulated board (``board``, ``seed``) measures ``workload``."""
    twin = EmulatedBoard(board, seed)
    modes = twin.catalog.grid(grid)
    expected = np.array([twin.expected(workload, m) for m in modes])
    rng = np.random.default_rng([seed, 77])
    t = expected[:, 0] * 1e3 * rng.lognormal(0, WINDOW_NOISE, len(modes))
    p = expected[:, 1] * rng.lognormal(0, WINDOW_NOISE, len(modes))
    return Grid(modes, np.array([m.as_tuple() for m in modes], float), t, p, f"{workload}@{board}")


def grid_from_csv(text: str, name: str) -> Grid:
    """A profile file in jetfleet's CSV schema, observations of one mode averaged."""
    rows = profiles_csv.parse(text, name)
    models = {r.board_model for r in rows}
    workloads = {r.workload for r in rows}
    if len(models) != 1 or len(workloads) != 1:
        raise InvalidArgument(f"{name} mixes board models {sorted(models)} / workloads {sorted(workloads)}; "
                              "one of each per file", field="csv")
    acc: dict[PowerMode, list[tuple[float, float]]] = {}
    for r in rows:
        acc.setdefault(r.mode, []).append((r.minibatch_time_ms, r.power_w))
    modes = sorted(acc)
    t = np.array([np.mean([a for a, _ in acc[m]]) for m in modes])
    p = np.array([np.mean([b for _, b in acc[m]]) for m in modes])
    return Grid(modes, np.array([m.as_tuple() for m in modes], float), t, p, f"{workloads.pop()}@{models.pop()}")


@dataclass
class TransferScore:
    """MAPE % per repeat of transferred and from-scratch models, for time and for power."""

    time_transfer: list[float]
    time_scratch: list[float]
    power_transfer: list[float]
    power_scratch: list[float]

    def summary(self) -> dict[str, list[float]]:
        """Each list as [median, 25th percentile, 75th percentile]."""
        def med_iqr(v: list[float]) -> list[float]:
            return [float(np.median(v)), float(np.percentile(v, 25)), float(np.percentile(v, 75))]

        return {k: med_iqr(v) for k, v in vars(self).items()}


@dataclass(frozen=True)
class References:
    """The reference time and power networks trained on one grid."""

    time: P.Net
    power: P.Net


def train_references(g: Grid, seed: int = 0, epochs: int = 100,
                     dropout: tuple[float, ...] = P.DEFAULT_DROPOUT) -> References:
    """Train the reference time and power networks on every mode of ``g`` (together, in one stacked pass)."""
    time_net, power_net = P.train_references(g.x, [g.time_ms, g.power_w], seed=seed, epochs=epochs, dropout=dropout)
    return References(time_net, power_net)


def pick(strategy: str, g: Grid, k: int, rng: np.random.Generator, refs: References | None = None) -> np.ndarray:
    """Indices of k modes of ``g`` to profile by ``strategy``: random, spread, or uncertain (which needs ``refs``)."""
    if strategy == "random":
        return pick_random(g.x, k, rng)
    if strategy == "spread":
        return pick_spread(g.x, k, rng)
    if strategy == "uncertain":
        if refs is None:
            raise InvalidArgument("uncertainty sampling needs a reference", field="strategy")

        def spread(idx: np.ndarray) -> np.ndarray:
            # a small deep ensemble (4 heads, one stacked pass): its disagreement is the model's uncertainty,
            # with or without dropout layers in the reference
            nets = P.transfer_many(refs.time, [(g.x[idx], g.time_ms[idx])] * 4, epochs=150)
            logs = np.log(np.stack([n.predict(g.x) for n in nets]))
            result: np.ndarray = logs.std(axis=0)
            return result

        return pick_uncertain(g.x, k, rng, spread)
    raise InvalidArgument(f"strategy {strategy!r}: expected random, spread or uncertain", field="strategy")


@dataclass
class Trial:
    """One repeat: the indices of the profiled modes, and every mode predicted by transfer and from scratch."""

    idx: np.ndarray
    transfer_time: np.ndarray
    transfer_power: np.ndarray
    scratch_time: np.ndarray
    scratch_power: np.ndarray


def run_trial(refs: References, target: Grid, k: int, seed: int, strategy: str = "random") -> Trial:
    """Pick k modes of ``target`` (seeded), transfer and train from scratch on them, and predict every mode."""
    check_k(k, len(target.modes))
    rng = np.random.default_rng(seed)
    idx = pick(strategy, target, k, rng, refs)
    x, t, p = target.x[idx], target.time_ms[idx], target.power_w[idx]
    return Trial(idx, P.transfer(refs.time, x, t, seed=seed).predict(target.x),
                 P.transfer(refs.power, x, p, seed=seed).predict(target.x),
                 P.from_scratch(x, t, seed=seed).predict(target.x), P.from_scratch(x, p, seed=seed).predict(target.x))


def run_trials(refs: References, target: Grid, k: int, seeds: list[int], strategy: str = "random") -> list[Trial]:
    """``run_trial`` for each seed, the modes picked as it picks them, and every network of every trial trained in
    a few stacked passes (``nn.transfer_many``/``scratch_many``): the repeats of an evaluation cost about what two
    trials did one network at a time."""
    check_k(k, len(target.modes))
    picks = [pick(strategy, target, k, np.random.default_rng(seed), refs) for seed in seeds]
    times = [(target.x[i], target.time_ms[i]) for i in picks]
    powers = [(target.x[i], target.power_w[i]) for i in picks]
    seed = seeds[0] if seeds else 0
    tt = P.transfer_many(refs.time, times, seed=seed)
    tp = P.transfer_many(refs.power, powers, seed=seed)
    scratch = P.scratch_many(times + powers, seed=seed)
    n = len(picks)
    return [Trial(idx, tt[r].predict(target.x), tp[r].predict(target.x), scratch[r].predict(target.x),
                  scratch[n + r].predict(target.x)) for r, idx in enumerate(picks)]


def score_transfer(refs: References, target: Grid, k: int, repeats: int, strategy: str = "random",
                   trials: list[Trial] | None = None) -> TransferScore:
    """MAPE over every target mode for ``repeats`` trials (seeds 0, 1, ...), each appended to ``trials`` if given."""
    s = TransferScore([], [], [], [])
    for tr in run_trials(refs, target, k, list(range(repeats)), strategy):
        if trials is not None:
            trials.append(tr)
        s.time_transfer.append(P.mape(tr.transfer_time, target.time_ms))
        s.time_scratch.append(P.mape(tr.scratch_time, target.time_ms))
        s.power_transfer.append(P.mape(tr.transfer_power, target.power_w))
        s.power_scratch.append(P.mape(tr.scratch_power, target.power_w))
    return s


def score_choices(target: Grid, trials: list[Trial], budgets: list[float], presets: dict[str, PowerMode],
                  maxn: PowerMode, minibatches_per_epoch: int = 1) -> dict[str, dict[str, float]]:
    """For each budget: the chosen mode's observed (true) time vs the true optimum, and whether its
    observed power is over the budget. Methods: PT (transfer), NN (from scratch), RND (best of the k
    profiled modes by their measurements), MAX (MAXN), and presets at their nominal budgets."""
    truth = Predictions(target.modes, target.time_ms, target.power_w)
    index = {m: i for i, m in enumerate(target.modes)}
    out: dict[str, list[tuple[float, bool, bool]]] = {"PT": [], "NN": [], "RND": [], "MAX": []}
    for b in budgets:
        try:
            opt = choose(truth, power_budget_w=b, minibatches_per_epoch=minibatches_per_epoch)
        except FailedPrecondition:
            continue

        def score(i: int, method: str, b: float = b, opt_time: float = opt.time_ms) -> None:
            pw = target.power_w[i]
            out[method].append(((target.time_ms[i] / opt_time - 1) * 100, pw > b, pw > b + 1))

        if maxn in index:
            score(index[maxn], "MAX")
        for tr in trials:
            for method, t, p in (("PT", tr.transfer_time, tr.transfer_power), ("NN", tr.scratch_time, tr.scratch_power)):
                try:
                    score(choose(Predictions(target.modes, t, p), power_budget_w=b).index, method)
                except FailedPrecondition:
                    pass
            seen = tr.idx[target.power_w[tr.idx] <= b]
            if len(seen):
                score(int(seen[np.argmin(target.time_ms[seen])]), "RND")
    for name, mode in presets.items():
        nominal = preset_budget_w(name)
        if nominal is not None and mode in index:
            b = nominal
            try:
                opt = choose(truth, power_budget_w=b)
            except FailedPrecondition:   # no mode of the grid is under the preset's nominal budget
                continue
            i = index[mode]
            out.setdefault(f"preset {name}", []).append(((target.time_ms[i] / opt.time_ms - 1) * 100,
                                                         target.power_w[i] > b, target.power_w[i] > b + 1))
    return {m: {"median_penalty_pct": float(np.median([v[0] for v in vals])),
                "over_budget_pct": 100 * float(np.mean([v[1] for v in vals])),
                "over_by_1w_pct": 100 * float(np.mean([v[2] for v in vals])), "choices": len(vals)}
            for m, vals in out.items() if vals}


def preset_budget_w(name: str) -> float | None:
    """A preset's nominal budget from its name: '30W' and 'MODE_30W_6CORE' -> 30.0; None for MAXN and the like."""
    m = re.search(r"(?:^|_)(\d+(?:\.\d+)?)W(?:_|$)", name)
    return float(m.group(1)) if m else None


def transfer_files(reference_csv: str, target_csv: str, k: int, repeats: int, *, strategy: str = "random",
                   names: tuple[str, str] = ("reference", "target"), epochs: int = 100) -> dict[str, object]:
    """Score transfer between two profile CSVs (references on the first, k modes of the second) as a summary dict."""
    ref = grid_from_csv(reference_csv, names[0])
    tgt = grid_from_csv(target_csv, names[1])
    if k > len(tgt.modes):
        raise InvalidArgument(f"{names[1]} has {len(tgt.modes)} distinct modes; k={k} needs at least that many",
                              field="k")
    refs = train_references(ref, epochs=epochs)
    score = score_transfer(refs, tgt, k, repeats, strategy)
    return {"reference": ref.label, "target": tgt.label, "reference_modes": len(ref.modes),
            "target_modes": len(tgt.modes), "k": k, "repeats": repeats, "strategy": strategy,
            "mape": score.summary()}


def csv_text(g: Grid) -> str:
    """A grid in jetfleet's profile CSV schema."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    workload, model = g.label.split("@")
    w.writerow(profiles_csv.REQUIRED)
    for m, t, p in zip(g.modes, g.time_ms, g.power_w, strict=True):
        w.writerow([model, workload, m.cores, f"{m.cpu_mhz:g}", f"{m.gpu_mhz:g}", f"{m.mem_mhz:g}", f"{t:.6g}",
                    f"{p:.6g}"])
    return buf.getvalue()

