"""`jetfleet eval fulcrum`: every strategy over training x inference pairs x power budgets x latency budgets x
arrival rates on emulated boards; per strategy the share of runs meeting both budgets when actually run on the
board, the throughput gap to the optimum, modes profiled and wall time (docs/fulcrum.md)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from jetfleet.research.fulcrum import choose as C
from jetfleet.research.fulcrum.space import Lab, Outcome, Scenario, actually_run, grid_modes
from jetfleet.shared.concurrency import DEFAULT_SLACK, poisson_arrivals

PUBLISHED = {"within_budgets_pct": 97.0, "gap_pct": 7.0, "gmd_modes": 15, "als_modes": "50-150"}
TARGETS = {"within_budgets_pct": 98.0, "gap_pct": 5.0, "gmd_modes": 15}
STRATEGIES = ("GMD", "ALS", f"random-{C.RANDOM_K}", f"NN-{C.NN_MODES}", "NN-20", "MAXN", "optimum")


Pairs = dict[tuple[str, str], tuple[tuple[float, ...], tuple[float, ...]]]


@dataclass(frozen=True)
class Setup:
    """The evaluation's grid: per board its power budgets and its (training, inference) pairs, each with arrival
    rates and latency budgets (a board's budgets follow its speed: AGX Xavier trains ResNet-18 5.6x slower than
    AGX Orin, and a request that arrives during a minibatch waits for it); ``horizon_s`` of Poisson arrivals per
    run (planning and the actual run use different seeds)."""

    boards: dict[str, tuple[tuple[float, ...], Pairs]]
    horizon_s: float = 20.0
    slack: float = DEFAULT_SLACK
    seed: int = 0
    als_modes: int = C.ALS_MODES
    nn_modes: int = C.NN_MODES
    epochs: int = 400

    def scenarios(self) -> list[Scenario]:
        """Every combination of the grid."""
        return [Scenario(b, tr, inf, rate, lat, pw) for b, (pws, pairs) in self.boards.items()
                for (tr, inf), (rates, lats) in pairs.items() for rate in rates for lat in lats for pw in pws]


FULL = Setup(boards={
    "agx-orin": ((20.0, 30.0, 40.0), {("resnet18", "mobilenet_v3"): ((10.0, 30.0), (0.12, 0.2)),
                                      ("mobilenet_v3", "yolo_v8n"): ((5.0, 15.0), (0.15, 0.3))}),
    "agx-xavier": ((15.0, 20.0, 28.0), {("lstm", "resnet18"): ((5.0, 15.0), (0.15, 0.3)),
                                        ("resnet18", "mobilenet_v3"): ((5.0, 10.0), (0.5, 1.0))})})
# The machinery in seconds (a test and `--quick`): one scenario, smaller ALS/NN sets and shorter training.
SMALL = Setup(boards={"agx-orin": ((30.0,), {("resnet18", "mobilenet_v3"): ((10.0,), (0.12,))})}, horizon_s=6.0,
              als_modes=30, nn_modes=20, epochs=80)


@dataclass
class Run:
    """One strategy on one scenario."""

    scenario: Scenario
    strategy: str
    mode: str
    batch_size: int
    modes_profiled: int
    wall_s: float
    actual: Outcome | None
    within: bool
    optimum_per_s: float
    gap_pct: float | None = None


@dataclass
class Report:
    """Every run, the scenarios left out, and the setup."""

    runs: list[Run] = field(default_factory=list)
    infeasible: list[Scenario] = field(default_factory=list)
    setup: dict[str, Any] = field(default_factory=dict)

    def table(self) -> list[dict[str, Any]]:
        """Per strategy: share within both budgets (%), mean and median gap to the optimum (%), modes profiled,
        wall time per choice (s)."""
        out = []
        for s in STRATEGIES:
            rs = [r for r in self.runs if r.strategy == s]
            if not rs:
                continue
            gaps = [r.gap_pct for r in rs if r.gap_pct is not None]
            out.append({"strategy": s, "runs": len(rs),
                        "within_budgets_pct": 100.0 * sum(r.within for r in rs) / len(rs),
                        "gap_mean_pct": float(np.mean(gaps)) if gaps else float("nan"),
                        "gap_median_pct": float(np.median(gaps)) if gaps else float("nan"),
                        "modes_profiled_mean": float(np.mean([r.modes_profiled for r in rs])),
                        "modes_profiled_max": int(max(r.modes_profiled for r in rs)),
                        "wall_s_mean": float(np.mean([r.wall_s for r in rs]))})
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"setup": self.setup, "published": PUBLISHED, "targets": TARGETS, "table": self.table(),
                "infeasible_scenarios": [asdict(s) for s in self.infeasible],
                "runs": [{**asdict(r.scenario), "strategy": r.strategy, "mode": r.mode, "batch_size": r.batch_size,
                          "modes_profiled": r.modes_profiled, "wall_s": r.wall_s, "within": r.within,
                          "gap_pct": r.gap_pct, "optimum_per_s": r.optimum_per_s,
                          **({"train_per_s": r.actual.train_per_s, "p95_ms": r.actual.p95_s * 1e3,
                              "power_w": r.actual.power_w} if r.actual else {})} for r in self.runs]}


def evaluate(setup: Setup = FULL, progress: Callable[[int, int, str], None] | None = None) -> Report:
    """Run every strategy on every scenario of ``setup``; a scenario no configuration can meet (the exhaustive
    optimum finds none) is listed apart and not scored."""
    report = Report(setup={"boards": {b: {"power_budgets_w": list(p), "pairs": [
                               {"training": t, "inference": i, "rates": list(r), "latency_budgets_s": list(lb)}
                               for (t, i), (r, lb) in pairs.items()]} for b, (p, pairs) in setup.boards.items()},
                           "horizon_s": setup.horizon_s, "slack": setup.slack, "percentile": 95})
    scenarios = setup.scenarios()
    labs = {b: Lab(b, setup.seed) for b in setup.boards}
    truths: dict[tuple[str, str, str], dict[Any, Any]] = {}
    models: dict[tuple[str, str, str], tuple[C.AlsModel, float, C.NnModel, float]] = {}
    for i, sc in enumerate(scenarios):
        if progress is not None:
            progress(i, len(scenarios), f"{sc.board} {sc.training}+{sc.inference} {sc.rate:g}/s "
                                        f"{sc.latency_budget_s * 1e3:g} ms {sc.power_budget_w:g} W")
        lab = labs[sc.board]
        key = (sc.board, sc.training, sc.inference)
        if key not in truths:
            truths[key] = {m: lab.truth(sc.training, sc.inference, m) for m in grid_modes(sc.board)}
            t = time.perf_counter()
            am = C.als_profile(lab, sc.training, sc.inference, setup.seed, setup.als_modes, setup.epochs)
            als_s = time.perf_counter() - t
            t = time.perf_counter()
            nm = C.nn_predict(lab, sc.training, sc.inference, setup.seed, setup.nn_modes, setup.epochs)
            models[key] = (am, als_s, nm, time.perf_counter() - t)
        am, als_s, nm, nn_s = models[key]
        plan_arr = poisson_arrivals(sc.rate, setup.horizon_s, setup.seed * 1000 + 2 * i)
        act_arr = poisson_arrivals(sc.rate, setup.horizon_s, setup.seed * 1000 + 2 * i + 1)
        planner = C.Planner(sc, lab, plan_arr, setup.slack)
        t = time.perf_counter()
        opt = C.optimum(planner, truths[key])
        opt_s = time.perf_counter() - t
        if opt.mode is None:
            report.infeasible.append(sc)
            continue
        opt_actual = actually_run(sc, opt.mode, opt.batch_size, opt.known, act_arr, setup.slack,  # type: ignore[arg-type]
                                  setup.seed)
        best = opt_actual.train_per_s
        strategies: list[tuple[Callable[[], C.Choice], float]] = [
            (partial(C.gmd, planner), 0.0), (partial(C.als, planner, am), als_s),
            (partial(C.random_k, planner, C.RANDOM_K, setup.seed + i), 0.0), (partial(C.nn, planner, nm), nn_s),
            (partial(C.maxn, planner), 0.0)]
        for make, setup_s in strategies:
            t = time.perf_counter()
            ch = make()
            wall = time.perf_counter() - t + setup_s
            report.runs.append(_score(sc, ch, wall, act_arr, setup.slack, best, setup.seed))
        report.runs.append(Run(sc, "optimum", str(opt.mode), opt.batch_size, opt.modes_profiled, opt_s, opt_actual,
                               opt_actual.feasible(sc), best, 0.0))
    return report


def _score(sc: Scenario, ch: C.Choice, wall: float, arrivals: np.ndarray, slack: float, best: float,
           seed: int) -> Run:
    if ch.mode is None or ch.known is None:
        return Run(sc, ch.strategy, "none", 0, ch.modes_profiled, wall, None, False, best, 100.0)
    actual = actually_run(sc, ch.mode, ch.batch_size, ch.known, arrivals, slack, seed)
    gap = 100.0 * (best - actual.train_per_s) / best if best > 0 else 0.0
    return Run(sc, ch.strategy, str(ch.mode), ch.batch_size, ch.modes_profiled, wall, actual, actual.feasible(sc),
               best, gap)


def markdown(report: Report, plots: Sequence[str] = ()) -> str:
    """The report's table beside the published figures and our targets."""
    rows = report.table()
    lines = ["| strategy | runs | within both budgets % | gap to optimum, mean % | median % | modes profiled "
             "(mean / max) | wall s per choice |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['strategy']} | {r['runs']} | {r['within_budgets_pct']:.1f} | {r['gap_mean_pct']:.1f} | "
                     f"{r['gap_median_pct']:.1f} | {r['modes_profiled_mean']:.1f} / {r['modes_profiled_max']} | "
                     f"{r['wall_s_mean']:.2f} |")
    lines += ["", "| figure | published (Fulcrum) | target | ours GMD | ours ALS |", "|---|---|---|---|---|"]
    by = {r["strategy"]: r for r in rows}
    g, a = by.get("GMD"), by.get("ALS")
    if g and a:
        lines += [f"| runs within both budgets | > 97% | >= 98% | {g['within_budgets_pct']:.1f}% | "
                  f"{a['within_budgets_pct']:.1f}% |",
                  f"| mean gap to optimal throughput | within 7% | <= 5% | {g['gap_mean_pct']:.1f}% | "
                  f"{a['gap_mean_pct']:.1f}% |",
                  f"| modes profiled | GMD ~15, ALS 50-150 | GMD <= 15 | {g['modes_profiled_max']} (max) | "
                  f"{a['modes_profiled_max']} (reused across budgets and rates) |"]
    if report.infeasible:
        lines += ["", f"{len(report.infeasible)} scenario(s) no configuration meets (exhaustive optimum on the twin "
                      "found none) are not scored."]
    lines += [f"\n![{p}]({p})" for p in plots]
    return "\n".join(lines) + "\n"


def plot(report: Report, path: str) -> None:
    """Per strategy: share within budgets and mean gap, as two bar charts (PNG at ``path``)."""
    plot_table(report.table(), path)


def plot_table(rows: list[dict[str, Any]], path: str) -> None:
    """``plot`` from a report's table (``Report.table()`` or results.json's ``table``)."""
    from jetfleet.research.plots import pyplot

    plt = pyplot()

    names = [r["strategy"] for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    axes[0].bar(names, [r["within_budgets_pct"] for r in rows], color="#4c72b0")
    axes[0].axhline(97, color="#d62728", ls="--", lw=1, label="published > 97%")
    axes[0].set_ylabel("runs within both budgets (%)")
    axes[0].legend(fontsize=8)
    axes[1].bar(names, [r["gap_mean_pct"] for r in rows], color="#55a868")
    axes[1].axhline(7, color="#d62728", ls="--", lw=1, label="published within 7%")
    axes[1].set_ylabel("mean throughput gap to optimum (%)")
    axes[1].legend(fontsize=8)
    for ax in axes:
        ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run_report(out_dir: Path, *, quick: bool = False, progress: Callable[[int, int, str], None] | None = None) -> Path:
    """Run the evaluation (``SMALL`` with ``quick``), write ``fulcrum.md``, ``fulcrum.png`` and ``results.json`` in
    ``out_dir``; returns the markdown's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    report = evaluate(SMALL if quick else FULL, progress)
    plot(report, str(out_dir / "fulcrum.png"))
    (out_dir / "results.json").write_text(json.dumps(report.to_dict(), indent=1, default=str) + "\n")
    path = out_dir / "fulcrum.md"
    path.write_text("# Fulcrum on the twin\n\n" + markdown(report, ["fulcrum.png"]))
    return path
