"""`jetfleet eval choices --reference REF.csv --grid TARGET.csv`: the job's choices scored on a measured grid.

A whole measured grid (a profile CSV with every mode of a board, e.g. the real TX2 grids) is the truth. For
each seeded repeat the job's own pieces run against it: its selection picks k modes (their grid values are
the profiles), the reference trained on REF.csv is transferred to them with 5-fold calibration
(``calibrate.fit_calibrated_many``), and for every power budget a mode is chosen and the closed loop
(``jobs.loop.ClosedLoop`` over ``powertrain.feedback``) runs on windows that observe the grid's value of the
running mode with a window's measurement noise. Policies, side by side on the same models:

- ``point``: PowerTrain's own, the fastest mode whose point prediction fits; no bounds, no loop;
- ``bound``: the fastest mode whose calibrated upper bound fits, then the loop (a job before issue 26);
- ``confirm``: confirm before committing (``powertrain.confirm``): profile the choice, learn, choose again,
  up to ``profiles`` times; commit to the fastest mode measured within the budget; then the loop.

Scored against the grid's optimum for each budget: the share of choices over the budget and over it by more
than 5%, before the loop and after it, the median time penalty, the loop's steps and the profiles spent; and
the models' true MAPE over the modes they did not profile beside the cross-validated MAPE they report.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from jetfleet.controller.powertrain import nn as P
from jetfleet.controller.powertrain.confirm import DEFAULT_PROFILES, Confirmation
from jetfleet.controller.powertrain.feedback import Feedback, Observation
from jetfleet.controller.powertrain.optimize import Predictions, choose
from jetfleet.controller.powertrain.select import check_k
from jetfleet.research.powertrain.choices import STRATEGIES, Repeat, calibrated_repeats, run_loop
from jetfleet.research.powertrain.evaluate import Grid, grid_from_csv, train_references
from jetfleet.shared.errors import FailedPrecondition, InvalidArgument

POLICIES = ("point", "bound", "confirm")
DEFAULT_STRATEGY = "balanced"      # a job's default (jobs.models.JOB_STRATEGIES[0])
DEFAULT_WINDOW_NOISE = 0.02        # a repeated measurement of a mode against the grid's, relative (see docs/jobs.md)
OVER_BY = 0.05                     # "over by more than 5%" of the budget
BUDGETS = 10                       # budgets between the 10th and the 90th percentile of the grid's power


@dataclass(frozen=True)
class MeasuredOptions:
    """How to run the evaluation: profiled modes, repeats, selection, bounds, loop steps, noise, profiles."""

    k: int = 50
    repeats: int = 10
    strategy: str = DEFAULT_STRATEGY
    confidence: float = 0.9
    max_steps: int = 3
    window_noise: float = DEFAULT_WINDOW_NOISE
    profiles: int = DEFAULT_PROFILES

    def check(self, modes: int) -> None:
        """InvalidArgument naming the first option out of range (``modes``: the target grid's)."""
        check_k(self.k, modes)
        if not 1 <= self.repeats <= 100:
            raise InvalidArgument(f"repeats={self.repeats}: must be 1..100", field="repeats")
        if self.strategy not in STRATEGIES:
            raise InvalidArgument(f"strategy {self.strategy!r}: expected one of {', '.join(STRATEGIES)}",
                                  field="strategy")
        if not 0.5 <= self.confidence < 1:
            raise InvalidArgument(f"confidence={self.confidence:g}: must be in [0.5, 1)", field="confidence")
        if not 0 <= self.max_steps <= 10:
            raise InvalidArgument(f"max_steps={self.max_steps}: must be 0..10", field="max_steps")
        if not 0 <= self.window_noise <= 0.5:
            raise InvalidArgument(f"window_noise={self.window_noise:g}: must be 0..0.5", field="window_noise")
        if not 0 <= self.profiles <= 20:
            raise InvalidArgument(f"profiles={self.profiles}: must be 0..20", field="profiles")


@dataclass(frozen=True)
class Outcome:
    """One (repeat, budget, policy): the committed mode, the mode after the loop, its steps and profiles."""

    budget_w: float
    optimum: int
    first: int
    last: int
    steps: int
    profiles: int


@dataclass(frozen=True)
class PolicyScore:
    """A policy's choices against the grid's optimum (shares and penalties in %)."""

    policy: str
    choices: int
    over_budget_before_pct: float
    over_by_5pct_before_pct: float
    over_budget_after_pct: float
    over_by_5pct_after_pct: float
    median_penalty_before_pct: float
    median_penalty_after_pct: float
    steps_mean: float
    steps_max: int
    profiles_mean: float


@dataclass(frozen=True)
class BudgetSet:
    """The policies' scores over one set of budgets (W)."""

    name: str
    budgets_w: list[float]
    policies: list[PolicyScore]


@dataclass(frozen=True)
class ModelScore:
    """The transferred models over the modes they did not profile: true MAPE (median of the repeats) beside the
    5-fold cross-validated MAPE they report; the share of those modes under the power upper bound."""

    time_mape_true_pct: float
    time_mape_cv_pct: float
    power_mape_true_pct: float
    power_mape_cv_pct: float
    power_upper_coverage_mean: float
    power_upper_coverage_min: float


@dataclass(frozen=True)
class MeasuredReport:
    """Everything `eval choices --reference --grid` prints, under plain names (its JSON)."""

    reference: str
    grid: str
    modes: int
    k: int
    repeats: int
    strategy: str
    confidence: float
    max_steps: int
    window_noise: float
    profiles: int
    model: ModelScore
    budget_sets: list[BudgetSet]
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        """The report as plain JSON-ready data."""
        return asdict(self)


def budgets_between(power_w: np.ndarray, count: int = BUDGETS, lo_pct: float = 10, hi_pct: float = 90) -> list[float]:
    """``count`` budgets evenly between two percentiles of a grid's measured power (W, 3 significant decimals)."""
    lo, hi = np.percentile(power_w, [lo_pct, hi_pct])
    return [round(float(b), 3) for b in np.linspace(lo, hi, count)]


def model_score(g: Grid, reps: list[Repeat], confidence: float) -> ModelScore:
    """True and cross-validated MAPE, and the power upper bound's coverage, over each repeat's unprofiled modes."""
    rows = []
    for r in reps:
        held = np.setdiff1d(np.arange(len(g.modes)), r.idx)
        pr = r.predictions(g, confidence)
        rows.append((P.mape(pr.time_ms[held], g.time_ms[held]), r.time.cv_mape,
                     P.mape(pr.power_w[held], g.power_w[held]), r.power.cv_mape,
                     float(np.mean(g.power_w[held] <= pr.power_hi[held]))))
    a = np.array(rows)
    med = np.median(a, axis=0)
    return ModelScore(float(med[0]), float(med[1]), float(med[2]), float(med[3]), float(a[:, 4].mean()),
                      float(a[:, 4].min()))


def _measure(g: Grid, i: int, noise: float, rng: np.random.Generator) -> Observation:
    seen = rng.lognormal(0.0, noise, 2)
    return Observation(i, float(g.power_w[i] * seen[0]), float(g.time_ms[i] * seen[1]))


def policy_outcome(policy: str, g: Grid, rep: Repeat, pred: Predictions, budget_w: float, opts: MeasuredOptions,
                   rng: np.random.Generator) -> Outcome:
    """One policy's choice for ``budget_w`` and its loop on the grid's truth. FailedPrecondition when the policy
    refuses the budget (below every mode's lower bound), as a job would."""
    truth = Predictions(g.modes, g.time_ms, g.power_w)
    optimum = choose(truth, power_budget_w=budget_w).index
    if policy == "point":
        point = Predictions(g.modes, pred.time_ms, pred.power_w)
        chosen = choose(point, power_budget_w=budget_w).index
        return Outcome(budget_w, optimum, chosen, chosen, 0, 0)
    if policy == "bound":
        first, last, steps = run_loop(g, pred, budget_w, max_steps=opts.max_steps, rng=rng, noise=opts.window_noise)
        return Outcome(budget_w, optimum, first, last, steps, 0)
    if policy == "confirm":
        fb = Feedback(pred)
        known = [Observation(int(j), float(g.power_w[j]), float(g.time_ms[j])) for j in rep.idx]
        conf = Confirmation(fb, budget_w, profiles=opts.profiles, known=known)
        while (i := conf.next_mode()) is not None:
            conf.add(_measure(g, i, opts.window_noise, rng))
        start = conf.commit().index
        first, last, steps = run_loop(g, pred, budget_w, max_steps=opts.max_steps, rng=rng, noise=opts.window_noise,
                                      feedback=fb, start=start)
        return Outcome(budget_w, optimum, first, last, steps, conf.used)
    raise InvalidArgument(f"policy {policy!r}: expected one of {', '.join(POLICIES)}", field="policy")


def score(policy: str, g: Grid, outs: list[Outcome]) -> PolicyScore:
    """Shares over the budget (and over by more than 5%) and median penalties, before and after the loop."""
    if not outs:
        nan = float("nan")
        return PolicyScore(policy, 0, nan, nan, nan, nan, nan, nan, nan, 0, nan)

    def over(i: int, b: float, by: float = 0.0) -> float:
        return 100.0 * float(g.power_w[i] > b * (1 + by))

    def pen(i: int, o: Outcome) -> float:
        return float((g.time_ms[i] / g.time_ms[o.optimum] - 1) * 100)

    steps = [o.steps for o in outs]
    return PolicyScore(
        policy, len(outs),
        float(np.mean([over(o.first, o.budget_w) for o in outs])),
        float(np.mean([over(o.first, o.budget_w, OVER_BY) for o in outs])),
        float(np.mean([over(o.last, o.budget_w) for o in outs])),
        float(np.mean([over(o.last, o.budget_w, OVER_BY) for o in outs])),
        float(np.median([pen(o.first, o) for o in outs])), float(np.median([pen(o.last, o) for o in outs])),
        float(np.mean(steps)), int(max(steps)), float(np.mean([o.profiles for o in outs])))


def evaluate(ref: Grid | None, g: Grid, opts: MeasuredOptions, *, policies: tuple[str, ...] = POLICIES,
             progress: Callable[[str], None] = lambda s: None, reps: list[Repeat] | None = None) -> MeasuredReport:
    """Run the evaluation of ``g`` with references trained on ``ref``, or on the models of ``reps`` (fitted
    already; ``ref`` may then be None)."""
    opts.check(len(g.modes))
    t0 = time.perf_counter()
    if reps is None:
        if ref is None:
            raise InvalidArgument("a reference grid is needed to fit the models", field="reference")
        progress(f"training the references on {ref.label} ({len(ref.modes)} modes)")
        refs = train_references(ref)
        progress(f"selecting, transferring and calibrating {opts.repeats} repeats of k = {opts.k} ({opts.strategy})")
        reps = calibrated_repeats(refs, g, opts.k, opts.repeats, opts.strategy)
    progress("choosing and running the closed loop on the grid's truth")
    budgets = budgets_between(g.power_w)
    by_policy: dict[str, list[Outcome]] = {p: [] for p in policies}
    refused = 0
    for r_i, rep in enumerate(reps):
        pred = rep.predictions(g, opts.confidence)
        for b in budgets:
            for p in policies:
                # a noise stream per (repeat, budget, policy), keyed by the name's length: point draws none, so
                # bound (5) and confirm (7) are apart
                rng = np.random.default_rng([r_i, int(b * 1000), len(p)])
                try:
                    by_policy[p].append(policy_outcome(p, g, rep, pred, b, opts, rng))
                except FailedPrecondition:
                    refused += 1
    half = len(budgets) // 2
    sets = [("all", budgets), ("low", budgets[:half]), ("high", budgets[half:])]
    budget_sets = [BudgetSet(name, bs, [score(p, g, [o for o in by_policy[p] if o.budget_w in bs]) for p in policies])
                   for name, bs in sets]
    notes = [f"{refused} (repeat, budget, policy) choices refused: the budget is below every mode's lower bound"] \
        if refused else []
    return MeasuredReport(ref.label if ref is not None else "", g.label, len(g.modes), opts.k, opts.repeats,
                          opts.strategy, opts.confidence, opts.max_steps, opts.window_noise, opts.profiles,
                          model_score(g, reps, opts.confidence), budget_sets, time.perf_counter() - t0, notes)


def evaluate_files(reference_csv: str, grid_csv: str, opts: MeasuredOptions, *, names: tuple[str, str] = (
        "reference", "grid"), progress: Callable[[str], None] = lambda s: None) -> MeasuredReport:
    """``evaluate`` on two profile CSVs (jetfleet's schema): the reference's grid and the measured target grid."""
    ref = grid_from_csv(reference_csv, names[0])
    g = grid_from_csv(grid_csv, names[1])
    if len(g.modes) < opts.k:
        raise InvalidArgument(f"{names[1]} has {len(g.modes)} distinct modes; k={opts.k} needs at least that many",
                              field="k")
    return evaluate(ref, g, opts, progress=progress)


def _header(r: MeasuredReport) -> list[str]:
    m = r.model
    return [f"{r.grid} ({r.modes} modes) from references on {r.reference}; k = {r.k} {r.strategy} modes, {r.repeats} "
            f"repeats, {r.confidence:.0%} upper bounds, at most {r.max_steps} loop steps, window noise "
            f"{r.window_noise:.1%}, at most {r.profiles} confirming profiles",
            f"model over the modes it did not profile (median of the repeats): time MAPE {m.time_mape_true_pct:.1f}% "
            f"(it reports {m.time_mape_cv_pct:.1f}% cross-validated), power {m.power_mape_true_pct:.1f}% "
            f"({m.power_mape_cv_pct:.1f}%); the power upper bound covers {m.power_upper_coverage_mean:.0%} of them "
            f"(lowest repeat {m.power_upper_coverage_min:.0%})"]


def text_report(r: MeasuredReport) -> str:
    """The report as a terminal shows it: per budget set, one line per policy."""
    lines = _header(r)
    for bs in r.budget_sets:
        lines.append(f"budgets {bs.name} ({len(bs.budgets_w)}: {bs.budgets_w[0]:g}-{bs.budgets_w[-1]:g} W)")
        lines.append(f"  {'policy':<8} {'choices':>7}  over / >5% before  over / >5% after  penalty before / after"
                     "  steps mean (max)  profiles")
        for p in bs.policies:
            lines.append(f"  {p.policy:<8} {p.choices:>7}  {p.over_budget_before_pct:5.1f}% / {p.over_by_5pct_before_pct:4.1f}%"
                         f"    {p.over_budget_after_pct:5.1f}% / {p.over_by_5pct_after_pct:4.1f}%"
                         f"    {p.median_penalty_before_pct:5.1f}% / {p.median_penalty_after_pct:5.1f}%"
                         f"        {p.steps_mean:4.2f} ({p.steps_max})       {p.profiles_mean:4.2f}")
    return "\n".join(lines + r.notes)


def markdown(r: MeasuredReport) -> str:
    """The report as markdown tables (``--out``)."""
    lines = ["# Choices on a measured grid", "", *_header(r), "",
             "| budgets | policy | choices | over before | >5% over before | over after | >5% over after | "
             "penalty before | penalty after | steps (max) | profiles |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for bs in r.budget_sets:
        for p in bs.policies:
            lines.append(f"| {bs.name} ({bs.budgets_w[0]:g}-{bs.budgets_w[-1]:g} W) | {p.policy} | {p.choices} | "
                         f"{p.over_budget_before_pct:.1f}% | {p.over_by_5pct_before_pct:.1f}% | "
                         f"{p.over_budget_after_pct:.1f}% | {p.over_by_5pct_after_pct:.1f}% | "
                         f"{p.median_penalty_before_pct:.1f}% | {p.median_penalty_after_pct:.1f}% | "
                         f"{p.steps_mean:.2f} ({p.steps_max}) | {p.profiles_mean:.2f} |")
    return "\n".join(lines + ["", *r.notes])
