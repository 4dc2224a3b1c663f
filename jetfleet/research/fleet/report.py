"""`jetfleet eval fleet`: the emulated lab's table (``lab.py``) and the check against the exhaustive optimum,
written to a markdown report and results.json."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from jetfleet.controller.fleet.scheduler import FleetJob, FleetScheduler
from jetfleet.controller.powertrain.optimize import pareto_front
from jetfleet.research.fleet.lab import (
    LAB,
    WINDOW_NOISE,
    WORKLOADS,
    Models,
    TwinLab,
    build_models,
    make_jobs,
    simulate,
)

CAPS = (0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def _true_front(lab: TwinLab, i: int, workload: str) -> tuple[np.ndarray, np.ndarray]:
    """Board ``i``'s true Pareto front for a workload over its powertrain grid: (seconds per minibatch, W)."""
    t = lab.twins[i]
    modes = t.catalog.grid("powertrain")
    e = np.array([lab.truth(i, workload, str(m)) for m in modes])
    f = pareto_front(e[:, 0], e[:, 1])
    return e[f, 0], e[f, 1]


def optimum_instance(lab: TwinLab, models: Models, boards: list[int], workloads: list[str], cap_w: float,
                     *, seed: int, windows: int = 6) -> dict[str, float]:
    """One job per board, all present: the scheduler's choice after ``windows`` loop windows on the truth,
    against the exhaustive optimum over every placement and every true Pareto mode, or waiting (the board idles)
    (value: summed throughput, each job's relative to its fastest true time on these boards). Both in true watts
    under the cap."""
    sub = [lab.boards()[i] for i in boards]
    fronts = {(i, w): _true_front(lab, i, w) for i in boards for w in workloads}
    ref = {w: min(float(fronts[(i, w)][0].min()) for i in boards) for w in workloads}
    idle = {i: lab.idle_w(i) for i in boards}
    best = -math.inf
    for perm in itertools.permutations(range(len(boards))):   # each job may also wait (its board idles)
        vals = [np.append(ref[workloads[j]] / fronts[(boards[b], workloads[j])][0], 0.0) for j, b in enumerate(perm)]
        pows = [np.append(fronts[(boards[b], workloads[j])][1], idle[boards[b]]) for j, b in enumerate(perm)]
        v = vals[0]
        p = pows[0]
        for vv, pp in zip(vals[1:], pows[1:], strict=True):
            v = v[..., None] + vv.reshape((1,) * v.ndim + (-1,))
            p = p[..., None] + pp.reshape((1,) * p.ndim + (-1,))
        ok = p <= cap_w
        if ok.any():
            best = max(best, float(v[ok].max()))
    sched = FleetScheduler(sub, cap_w)
    for j, w in enumerate(workloads):
        sched.submit(FleetJob(f"o{j}", w, 1, {b.model: models.candidates[(w, b.model)] for b in sub}))
    sched.schedule()
    rng = np.random.default_rng([seed, 9])
    index = {lab.board_id(i): i for i in boards}

    def true_state() -> tuple[float, float]:
        value, power = 0.0, sum(b.idle_w for b in sub if b.board_id not in sched.running)
        for bid, j in sched.running.items():
            t, p = lab.truth(index[bid], j.workload, j.candidates[lab.twins[index[bid]].model].modes[j.option])
            value += ref[j.workload] / t
            power += p
        return value, power

    for _ in range(windows):
        measured: dict[str, float] = {}
        for b in sub:
            fj = sched.running.get(b.board_id)
            drawn = b.idle_w if fj is None else lab.truth(index[b.board_id], fj.workload,
                                                          fj.candidates[b.model].modes[fj.option])[1]
            measured[b.board_id] = drawn * float(rng.lognormal(0, WINDOW_NOISE))
        sched.observe(measured)
    value, power = true_state()
    return {"cap_w": cap_w, "optimum": best, "ours": value, "ratio": value / best if best > 0 else math.nan,
            "power_w": power, "over_pct": 100 * max(0.0, power / cap_w - 1), "started": len(sched.running)}


def run_fleet(out: Path, *, jobs: int = 30, seed: int = 0, quick: bool = False,
              progress: Callable[[str], None] = lambda s: None) -> Path:
    """Build the models, run every policy at every cap, check the optimum; write report.md and results.json."""
    out.mkdir(parents=True, exist_ok=True)
    workloads = WORKLOADS[:2] if quick else WORKLOADS
    boards = LAB[::2] if quick else LAB
    models = build_models(workloads, boards, progress=progress)
    lab = TwinLab(boards)
    specs = make_jobs(8 if quick else jobs, seed, workloads=workloads)
    peak = lab.peak_w(workloads)
    idle = sum(b.idle_w for b in lab.boards())
    rows: list[dict[str, Any]] = []
    for frac in CAPS[::3] if quick else CAPS:
        progress(f"cap {frac:.0%} of {peak:.0f} W")
        runs = {p: simulate(p, lab, models, specs, frac * peak, seed=seed) for p in ("joint", "maxn", "split")}
        rows.append({"cap_frac": frac, "cap_w": frac * peak, **{p: asdict(r) for p, r in runs.items()}})
    progress("exhaustive optimum")
    trio = [0, 3, 6] if not quick else [0, 1, 2]
    trio = [i for i in trio if i < len(boards)]
    rng = np.random.default_rng([seed, 3])
    opt: list[dict[str, Any]] = []
    sub_peak = sum(max(lab.truth(i, w, str(lab.twins[i].catalog.maxn))[1] for w in workloads) for i in trio)
    for r in range(2 if quick else 6):
        ws = [str(w) for w in rng.choice(workloads, len(trio))]
        for frac in (0.4, 0.6, 0.8):
            opt.append({"workloads": ws, "cap_frac": frac,
                        **optimum_instance(lab, models, trio, ws, frac * sub_peak, seed=seed + r)})
    results = {"boards": list(boards), "workloads": list(workloads), "jobs": len(specs), "peak_w": peak, "idle_w": idle,
               "rows": rows, "optimum": opt,
               "over_s_max": max(r["joint"]["over_s"] for r in rows),
               "vs_maxn_min": min(r["joint"]["throughput"] / r["maxn"]["throughput"] for r in rows),
               "optimum_ratio_min": min((o["ratio"] for o in opt), default=math.nan)}
    (out / "results.json").write_text(json.dumps(results, indent=1))
    path = out / "report.md"
    path.write_text(render(results))
    return path


def render(r: dict) -> str:  # type: ignore[type-arg]
    """The markdown tables of a results dict."""
    lines = [f"{len(r['boards'])} emulated boards ({', '.join(r['boards'])}), {r['jobs']} jobs of "
             f"{', '.join(r['workloads'])}; summed peak {r['peak_w']:.0f} W, idle {r['idle_w']:.0f} W. "
             "Throughput: AGX Orin MAXN seconds of work per second. Over: seconds the true lab power was > 1% over "
             "the cap (peak excess %). Generated by `jetfleet eval fleet`.", "",
             "| cap | W | joint makespan h | thr | over s (peak %) | mode changes | (a) MAXN held back: makespan h | "
             "thr | joint / (a) | (b) equal split: makespan h | thr | joint / (b) |", "|" + "---|" * 12]
    for row in r["rows"]:
        j, a, b = row["joint"], row["maxn"], row["split"]

        def h(x: dict) -> str:  # type: ignore[type-arg]
            return f"{x['makespan_s'] / 3600:.2f}" if math.isfinite(x["makespan_s"]) else f"∞ ({x['unstarted']} never ran)"

        lines.append(f"| {row['cap_frac']:.0%} | {row['cap_w']:.0f} | {h(j)} | {j['throughput']:.2f} | "
                     f"{j['over_s']:.0f} ({j['peak_over_pct']:.1f}) | {j['changes']} | {h(a)} | {a['throughput']:.2f} | "
                     f"{j['throughput'] / a['throughput'] if a['throughput'] else math.inf:.2f}× | {h(b)} | "
                     f"{b['throughput']:.2f} | {j['throughput'] / b['throughput'] if b['throughput'] else math.inf:.2f}× |")
    lines += ["", "Against the exhaustive optimum (3 jobs, 3 boards: every placement, every true Pareto mode or "
              "waiting, enumerated; ours after 6 loop windows; both in true watts; started: our jobs running):", "",
              "| workloads | cap | optimum | ours | ours / optimum | our true power W | over % | started |",
              "|---|---|---|---|---|---|---|---|"]
    for o in r["optimum"]:
        lines.append(f"| {', '.join(o['workloads'])} | {o['cap_frac']:.0%} ({o['cap_w']:.0f} W) | {o['optimum']:.3f} | "
                     f"{o['ours']:.3f} | {o['ratio']:.3f} | {o['power_w']:.1f} | {o['over_pct']:.2f} | {o['started']} |")
    lines += ["", f"Worst: cap exceeded > 1% for {r['over_s_max']:.0f} s in a run; joint / (a) at least "
              f"{r['vs_maxn_min']:.2f}×; ours / optimum at least {r['optimum_ratio_min']:.3f}.", ""]
    return "\n".join(lines)
