"""`jetfleet eval choices`: do the budgets hold? The fleet's own choice policy on emulated boards.

For a target (workload, board) and k profiled modes (seeded repeats), the models are trained the way
a job trains them (``calibrate.fit_calibrated_many``: transfer plus 5-fold conformal calibration), and
for every power budget the mode is chosen the way a job chooses it (the fastest whose upper power
bound fits); then the closed loop runs the way a job runs it (``jobs.loop.ClosedLoop`` over
``powertrain.feedback``) on windows of the twin's truth for that board (its true mean power and time
per minibatch, with a window's measurement noise), up to its step limit. Scored against the true
optimum of the grid: the time penalty, the share of choices over the budget and over by more than
1 W, before and after the loop, and the steps it used. Beside: PowerTrain's own policy (the point
prediction under the budget, no bounds, no loop) on the same models, and the published figures."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jetfleet.controller.jobs.goals import PowerBudget
from jetfleet.controller.jobs.loop import ClosedLoop
from jetfleet.controller.jobs.windows import Point, Window
from jetfleet.controller.powertrain import nn as P
from jetfleet.controller.powertrain.calibrate import Calibrated, fit_calibrated_many
from jetfleet.controller.powertrain.feedback import Feedback
from jetfleet.controller.powertrain.optimize import Predictions, choose
from jetfleet.controller.powertrain.select import (
    check_k,
    pick_active,
    pick_balanced,
    pick_random,
    pick_spread,
)
from jetfleet.research.powertrain.evaluate import Grid, References
from jetfleet.shared.errors import FailedPrecondition, InvalidArgument

WINDOW_NOISE = 0.003       # a 10 s window's mean power (and time per minibatch), relative: ~100 samples at 2.5%
STRATEGIES = ("random", "spread", "balanced", "active")


@dataclass
class Repeat:
    """One repeat on a target: the profiled modes and the calibrated time and power models."""

    idx: np.ndarray
    time: Calibrated
    power: Calibrated

    def predictions(self, g: Grid, confidence: float) -> Predictions:
        """Every mode of ``g`` predicted, with bounds at ``confidence``."""
        t, p = self.time.calibration, self.power.calibration
        return Predictions(g.modes, self.time.net.predict(g.x), self.power.net.predict(g.x)).bounded(
            confidence, (t.lower_log(confidence), t.upper_log(confidence)),
            (p.lower_log(confidence), p.upper_log(confidence)))


def select(strategy: str, g: Grid, k: int, rng: np.random.Generator, refs: References) -> np.ndarray:
    """Indices of k modes of ``g`` by a selection strategy (``active`` transfers on its first half)."""
    if strategy == "random":
        return pick_random(g.x, k, rng)
    if strategy == "spread":
        return pick_spread(g.x, k, rng)
    if strategy == "balanced":
        return pick_balanced(g.x, k, rng)
    if strategy == "active":
        def features(first: np.ndarray) -> np.ndarray:
            tn = P.transfer_many(refs.time, [(g.x[first], g.time_ms[first])], epochs=150)[0]
            pn = P.transfer_many(refs.power, [(g.x[first], g.power_w[first])], epochs=150)[0]
            return np.concatenate([P.penultimate(tn, g.x), P.penultimate(pn, g.x)], axis=1)

        return pick_active(g.x, k, rng, features)
    raise InvalidArgument(f"strategy {strategy!r}: expected one of {', '.join(STRATEGIES)}", field="strategy")


def calibrated_repeats(refs: References, g: Grid, k: int, repeats: int, strategy: str = "random") -> list[Repeat]:
    """``repeats`` seeded repeats of k modes of ``g``: transferred and calibrated as a job does, all in stacked passes."""
    check_k(k, len(g.modes))
    picks = [select(strategy, g, k, np.random.default_rng(r), refs) for r in range(repeats)]
    times = fit_calibrated_many(refs.time, [(g.x[i], g.time_ms[i]) for i in picks])
    powers = fit_calibrated_many(refs.power, [(g.x[i], g.power_w[i]) for i in picks])
    return [Repeat(i, t, p) for i, t, p in zip(picks, times, powers, strict=True)]


def coverage(g: Grid, reps: list[Repeat], confidence: float) -> dict[str, float]:
    """On the modes each repeat did not profile: how often the truth is under the upper bound (power, time)
    and inside both bounds; the cross-validated MAPE the model reports against its true held-out MAPE."""
    out: dict[str, list[float]] = {k: [] for k in ("power_under_upper", "time_under_upper", "power_inside",
                                                    "time_inside", "power_cv_mape", "power_true_mape",
                                                    "time_cv_mape", "time_true_mape")}
    for r in reps:
        pr = r.predictions(g, confidence)
        held = np.setdiff1d(np.arange(len(g.modes)), r.idx)
        out["power_under_upper"].append(float(np.mean(g.power_w[held] <= pr.power_hi[held])))
        out["time_under_upper"].append(float(np.mean(g.time_ms[held] <= pr.time_hi[held])))
        out["power_inside"].append(float(np.mean((g.power_w[held] >= pr.power_lo[held]) &
                                                 (g.power_w[held] <= pr.power_hi[held]))))
        out["time_inside"].append(float(np.mean((g.time_ms[held] >= pr.time_lo[held]) &
                                                (g.time_ms[held] <= pr.time_hi[held]))))
        out["power_cv_mape"].append(r.power.cv_mape)
        out["power_true_mape"].append(P.mape(pr.power_w[held], g.power_w[held]))
        out["time_cv_mape"].append(r.time.cv_mape)
        out["time_true_mape"].append(P.mape(pr.time_ms[held], g.time_ms[held]))
    return {k: float(np.median(v)) for k, v in out.items()}


@dataclass
class Outcome:
    """The outcome of one (repeat, budget): the truth's index of the first choice, the last, steps, the optimum."""

    first: int
    last: int
    steps: int
    optimum: int
    budget_w: float
    point: int | None = None     # PowerTrain's policy: the point prediction under the budget


def run_loop(g: Grid, pred: Predictions, budget_w: float, *, max_steps: int, rng: np.random.Generator,
             noise: float = WINDOW_NOISE, feedback: Feedback | None = None,
             start: int | None = None) -> tuple[int, int, int]:
    """Choose as a job does (or start at ``start`` with a ``feedback`` that has seen what was measured before) and
    run its closed loop on windows of the truth, each with relative ``noise``; (first, last, steps).
    Raises FailedPrecondition when the budget is below every mode's lower bound (a job would be refused)."""
    fb = Feedback(pred) if feedback is None else feedback
    current = first = choose(pred, power_budget_w=budget_w).index if start is None else start
    index = {str(m): i for i, m in enumerate(pred.modes)}
    loop = ClosedLoop(PowerBudget(budget_w), fb, index, max_steps=max_steps)
    for _ in range(max_steps + 1):
        seen = rng.lognormal(0.0, noise, 2)
        at = Point(0, 0.0, 0.0, str(pred.modes[current]), 0.0)
        window = Window(str(pred.modes[current]), float(g.power_w[current] * seen[0]),
                        float(g.time_ms[current] * seen[1]), at, at)
        step = loop.on_window(window)
        if step is None:
            break
        current = step.choice.index
    return first, current, loop.steps_used


def outcomes(g: Grid, reps: list[Repeat], budgets: list[float], *, confidence: float,
             max_steps: int) -> list[Outcome]:
    """Every (repeat, budget) with a true optimum and a choice a job would accept."""
    truth = Predictions(g.modes, g.time_ms, g.power_w)
    out: list[Outcome] = []
    for r_i, rep in enumerate(reps):
        pred = rep.predictions(g, confidence)
        for b in budgets:
            try:
                opt = choose(truth, power_budget_w=b).index
                first, last, steps = run_loop(g, pred, b, max_steps=max_steps,
                                              rng=np.random.default_rng([r_i, int(b * 10)]))
            except FailedPrecondition:
                continue
            o = Outcome(first, last, steps, opt, b)
            ok = np.flatnonzero(pred.power_w <= b)
            if len(ok):
                o.point = int(ok[np.argmin(pred.time_ms[ok])])
            out.append(o)
    return out


@dataclass
class ChoiceScore:
    """Choices scored against the truth: medians and shares in %, before and after the closed loop."""

    choices: int = 0
    penalty_before: float = 0.0
    penalty_after: float = 0.0
    over_before: float = 0.0
    over1_before: float = 0.0
    over_after: float = 0.0
    over1_after: float = 0.0
    steps_mean: float = 0.0
    steps_max: int = 0
    steps_hist: dict[int, int] = field(default_factory=dict)
    point_penalty: float = 0.0       # PowerTrain's policy: point prediction, no loop
    point_over: float = 0.0
    point_over1: float = 0.0


def score(g: Grid, outs: list[Outcome]) -> ChoiceScore:
    """Penalties (median %), over-budget shares (%), steps, and PowerTrain's point policy beside."""
    if not outs:
        return ChoiceScore()

    def pen(i: int, o: Outcome) -> float:
        return (g.time_ms[i] / g.time_ms[o.optimum] - 1) * 100

    def over(i: int, b: float, by: float = 0.0) -> bool:
        return bool(g.power_w[i] > b + by)

    steps = [o.steps for o in outs]
    pts = [o for o in outs if o.point is not None]
    return ChoiceScore(
        len(outs), float(np.median([pen(o.first, o) for o in outs])), float(np.median([pen(o.last, o) for o in outs])),
        100 * float(np.mean([over(o.first, o.budget_w) for o in outs])),
        100 * float(np.mean([over(o.first, o.budget_w, 1.0) for o in outs])),
        100 * float(np.mean([over(o.last, o.budget_w) for o in outs])),
        100 * float(np.mean([over(o.last, o.budget_w, 1.0) for o in outs])),
        float(np.mean(steps)), int(max(steps)), {int(s): steps.count(s) for s in sorted(set(steps))},
        float(np.median([pen(o.point, o) for o in pts if o.point is not None])) if pts else float("nan"),
        100 * float(np.mean([over(o.point, o.budget_w) for o in pts if o.point is not None])) if pts else float("nan"),
        100 * float(np.mean([over(o.point, o.budget_w, 1.0) for o in pts if o.point is not None])) if pts else float("nan"))


def mape_vs_k(refs: References, g: Grid, ks: list[int], repeats: int,
              strategies: tuple[str, ...] = STRATEGIES) -> dict[str, dict[int, tuple[float, float]]]:
    """Median (time, power) MAPE % over every mode of ``g`` by strategy and k (plain transfer, as PowerTrain)."""
    out: dict[str, dict[int, tuple[float, float]]] = {}
    for s in strategies:
        out[s] = {}
        for k in ks:
            picks = [select(s, g, k, np.random.default_rng(r), refs) for r in range(repeats)]
            tn = P.transfer_many(refs.time, [(g.x[i], g.time_ms[i]) for i in picks])
            pn = P.transfer_many(refs.power, [(g.x[i], g.power_w[i]) for i in picks])
            out[s][k] = (float(np.median([P.mape(n.predict(g.x), g.time_ms) for n in tn])),
                         float(np.median([P.mape(n.predict(g.x), g.power_w) for n in pn])))
    return out


def as_dict(s: ChoiceScore) -> dict[str, Any]:
    """A score as JSON-ready data."""
    return {k: v for k, v in vars(s).items()}
