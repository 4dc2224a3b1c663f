"""Fleet scheduler benchmark: the joint mode choice (``knapsack.solve``) and a whole scheduling pass
(``FleetScheduler.schedule``: placement, joint modes, swaps) at issue 28's size, 2,000 queued jobs and 500
boards, each figure beside its limit and the ratio: <= 1 s, <= 100 MiB, within 0.1 % of the optimum.

- The joint choice, 10 options per job (a Pareto front: time per minibatch falling with power, diminishing), a
  quarter of the jobs at priority 2, the lab's budget at half the jobs' summed fastest power; with rack caps too
  (10 racks, each capped at 45 % or 60 % of its jobs' summed fastest power: some racks bind, and the lab). How
  far from the optimum: against the bound the solver proves (value <= optimum <= bound: value / bound is a floor
  on value / optimum), against the exhaustive optimum where it can be enumerated, and against HiGHS
  (``scipy.optimize.milp``, exact: mip_rel_gap 0, where scipy is installed; it is not a jetfleet dependency).
  ``--baseline-repo`` adds another checkout's solver (a before figure: main's dynamic programme took no racks).
- The scheduling pass: 500 boards of three models in 10 racks, the lab capped at half their summed peak and each
  rack at 60 % of its share, 2,000 queued jobs of five workloads: one ``schedule()`` from an idle lab.

Each measurement runs in a child process of its own: memory is the peak resident set it added (the kernel's
high-water mark, reset before the call), time is wall and CPU seconds (the machine is shared: CPU is the steadier
figure).

    python bench/scheduler.py [--jobs 3,30,500,2000] [--boards 500] [--queue 2000] [--racks 10] [--highs-max 2000]
                              [--baseline-repo PATH] [--seed 0]
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

TIME_LIMIT_S, MEMORY_LIMIT_MIB, GAP_LIMIT = 1.0, 100.0, 1e-3
OPTIONS = 10


# --- instances ------------------------------------------------------------------------------------------------
def joint_instance(n: int, racks: int, seed: int) -> tuple[np.ndarray, np.ndarray, float, np.ndarray | None,
                                                            np.ndarray | None]:
    """n jobs x OPTIONS options (power W rising, value rising with diminishing returns), the lab's budget, and
    with ``racks``: each job's rack and the racks' budgets."""
    rng = np.random.default_rng(seed)
    power = np.sort(rng.uniform(5, 60, (n, OPTIONS)), axis=1)
    time_ms = 100 / (1 - np.exp(-power / rng.uniform(10, 30, (n, 1))))
    value = rng.choice([1.0, 2.0], (n, 1), p=[0.75, 0.25]) * time_ms.min(axis=1, keepdims=True) / time_ms
    budget = 0.5 * float(power.max(axis=1).sum())
    if not racks:
        return power, value, budget, None, None
    rack = rng.integers(0, racks, n)
    return power, value, budget, rack, np.array([(0.45 if r % 2 else 0.6) * power[rack == r].max(axis=1).sum()
                                                 for r in range(racks)])


def lab_instance(boards: int, queue: int, racks: int, seed: int) -> Any:
    """A FleetScheduler over ``boards`` boards (AGX Orin, AGX Xavier, Orin Nano in turn, ``racks`` racks) with
    ``queue`` jobs queued."""
    from jetfleet.controller.fleet.scheduler import Board, Candidates, FleetJob, FleetScheduler

    rng = np.random.default_rng(seed)
    scale = {"agx-orin": 1.0, "agx-xavier": 0.8, "orin-nano": 0.25}
    idle = {"agx-orin": 8.0, "agx-xavier": 7.0, "orin-nano": 3.0}
    fronts = []
    for _ in range(5):
        per = {}
        for model, k in scale.items():
            hi = np.sort(rng.uniform(5, 60, OPTIONS)) * k
            t = 100 / (1 - np.exp(-hi / rng.uniform(10, 30)))
            per[model] = Candidates(tuple(f"m{i}" for i in range(OPTIONS)), t, hi / 1.05, hi)
        fronts.append(per)
    models = list(scale)
    bs = [Board(f"b{i:03d}", models[i % 3], idle[models[i % 3]], group=f"rack-{i % racks}" if racks else "")
          for i in range(boards)]
    peak = sum(60 * scale[b.model] for b in bs)
    s = FleetScheduler(bs, 0.5 * peak, group_caps_w={f"rack-{g}": 0.6 * peak / racks for g in range(racks)})
    for j in range(queue):
        s.queue.append(FleetJob(f"j{j:04d}", f"w{j % 5}", 1000 + j, fronts[j % 5], 2.0 if j % 4 == 0 else 1.0,
                                arrival_s=float(j)))
    return s


# --- one measurement (in a child process) ---------------------------------------------------------------------
def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def measured(fn: Any) -> tuple[Any, dict[str, float]]:
    """Run ``fn``: its result, wall and CPU seconds, and the peak resident memory it added (MiB)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")   # the high-water mark starts again from here
    except OSError:
        pass
    before = _rss_kib("VmRSS")
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    figures = {"wall_s": time.perf_counter() - w, "cpu_s": time.process_time() - c,
               "mib": max(0, _rss_kib("VmHWM") - before) / 1024}
    return out, figures


def one(spec: dict[str, Any]) -> dict[str, Any]:
    """A measurement named by ``spec`` (solver, size, ...), in this process."""
    if spec["what"] == "schedule":
        lab_instance(6, 4, 1, spec["seed"] + 1).schedule()   # warm, as the joint choice
        s = lab_instance(spec["boards"], spec["queue"], spec["racks"], spec["seed"])
        changes, fig = measured(s.schedule)
        over = [g for g, cap in s.group_caps_w.items() if s.predicted_sum_w(g) > cap + 1e-6]
        value = sum(float(s.value_of(j, j.model)[j.option]) for j in s.running.values())
        from jetfleet.controller.fleet.joint import JointRows
        rows = JointRows(s.domain(), len(s.running), OPTIONS)
        for bid, j in s.running.items():
            b = s.board(bid)
            p, v = s.row(j, b)
            rows.add(p, v, rows.domain.rack(b.group), b.idle_w)
        proof = rows.solve()
        return {**fig, "started": len(s.running), "changes": len(changes), "value": value,
                "bound": proof.bound if proof else float("nan"),
                "lab_ok": s.predicted_sum_w() <= s.cap_w + 1e-6, "racks_over": over}
    power, value, budget, rack, rack_w = joint_instance(spec["n"], spec["racks"], spec["seed"])
    if spec["what"] == "ours":
        from jetfleet.controller.fleet.knapsack import solve_arrays
        wp, wv, wb, wr, wrb = joint_instance(5, 2, spec["seed"] + 1)   # warm: numpy's first calls cost a solve
        solve_arrays(wp, wv, wb, racks=wr, rack_budgets_w=wrb)
        sol, fig = measured(lambda: solve_arrays(power, value, budget, racks=rack, rack_budgets_w=rack_w))
        if sol is None:
            return {**fig, "value": float("nan"), "bound": float("nan"), "method": "none fits", "nodes": 0}
        return {**fig, "value": sol.value, "bound": sol.bound, "method": sol.method, "nodes": sol.nodes}
    if spec["what"] == "exhaustive":
        from jetfleet.controller.fleet.knapsack import Option, exhaustive
        groups = [[Option(float(p), float(v)) for p, v in zip(pr, vr, strict=True)] for pr, vr in zip(power, value)]
        best, fig = measured(lambda: exhaustive(groups, budget, racks=None if rack is None else list(rack),
                                                rack_budgets_w=() if rack_w is None else list(rack_w)))
        return {**fig, "value": best[1] if best else float("nan")}
    if spec["what"] == "highs":
        v, fig = measured(lambda: highs(power, value, budget, rack, rack_w, spec["time_limit_s"]))
        return {**fig, "value": v[0], "exact": v[1]}
    if spec["what"] == "baseline":
        path = Path(spec["repo"]) / "jetfleet" / "controller" / "fleet" / "knapsack.py"
        mod_spec = importlib.util.spec_from_file_location("baseline_knapsack", path)
        assert mod_spec is not None and mod_spec.loader is not None
        mod = importlib.util.module_from_spec(mod_spec)
        sys.modules[mod_spec.name] = mod     # its dataclasses look their module up
        mod_spec.loader.exec_module(mod)
        groups = [[mod.Option(float(p), float(v)) for p, v in zip(pr, vr, strict=True)] for pr, vr in zip(power, value)]
        wp, wv, wb, _, _ = joint_instance(5, 0, spec["seed"] + 1)     # warm, as ours
        mod.solve([[mod.Option(float(p), float(v)) for p, v in zip(pr, vr, strict=True)] for pr, vr in zip(wp, wv)], wb)
        r, fig = measured(lambda: mod.solve(groups, budget))
        got = r if isinstance(r, tuple) or r is None else (r.picks, r.value)
        return {**fig, "value": got[1] if got else float("nan")}
    raise ValueError(spec["what"])


def highs(power: np.ndarray, value: np.ndarray, budget: float, rack: np.ndarray | None, rack_w: np.ndarray | None,
          time_limit_s: float) -> tuple[float, bool]:
    """The optimum by HiGHS (one binary per option, one equality per job, a row per budget); whether it is proven."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import csr_matrix, vstack

    n, k = power.shape
    rows = [csr_matrix((np.ones(n * k), (np.repeat(np.arange(n), k), np.arange(n * k))), shape=(n, n * k)),
            csr_matrix(power.ravel()[None, :])]
    lo, hi = [np.ones(n), [-np.inf]], [np.ones(n), [budget]]
    for r in range(0 if rack_w is None or rack is None else len(rack_w)):
        assert rack is not None and rack_w is not None
        rows.append(csr_matrix(np.where(rack[:, None] == r, power, 0.0).ravel()[None, :]))
        lo.append([-np.inf])
        hi.append([rack_w[r]])
    res = milp(-value.ravel(), constraints=[LinearConstraint(vstack(rows), np.concatenate(lo), np.concatenate(hi))],
               integrality=np.ones(n * k), bounds=Bounds(0, 1),
               options={"mip_rel_gap": 0.0, "time_limit": time_limit_s})
    return (-float(res.fun) if res.x is not None else float("nan")), res.status == 0


def child(spec: dict[str, Any], timeout_s: float = 900) -> dict[str, Any] | None:
    """``one(spec)`` in a child process (its own memory, nothing left behind); None if it failed (said on stderr)."""
    try:
        out = subprocess.run([sys.executable, __file__, "--one", json.dumps(spec)], capture_output=True, text=True,
                             timeout=timeout_s, env={**os.environ, "OMP_NUM_THREADS": "1"})
    except subprocess.TimeoutExpired:
        print(f"  {spec['what']}: no answer within {timeout_s:.0f} s", file=sys.stderr)
        return None
    if out.returncode != 0:
        print(f"  {spec['what']} failed: {out.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return None
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# --- the report ---------------------------------------------------------------------------------------------------
def verdict(ok: bool) -> str:
    return "holds" if ok else "MISSED"


def limits(fig: dict[str, Any], gap: float) -> str:
    """The figures beside the limits, with their ratios."""
    return (f"{fig['wall_s'] * 1e3:8.1f} ms wall, {fig['cpu_s'] * 1e3:8.1f} ms CPU (limit {TIME_LIMIT_S:g} s: "
            f"ratio {fig['cpu_s'] / TIME_LIMIT_S:5.3f}, {verdict(fig['cpu_s'] <= TIME_LIMIT_S)}); "
            f"{fig['mib']:6.1f} MiB (limit {MEMORY_LIMIT_MIB:g}: ratio {fig['mib'] / MEMORY_LIMIT_MIB:5.3f}, "
            f"{verdict(fig['mib'] <= MEMORY_LIMIT_MIB)}); {gap * 100:7.4f} % under the optimum at most "
            f"(limit {GAP_LIMIT * 100:g} %: ratio {gap / GAP_LIMIT:5.3f}, {verdict(gap <= GAP_LIMIT)})")


def joint(a: argparse.Namespace) -> None:
    print(f"joint mode choice, {OPTIONS} options per job, the lab's budget at half the summed fastest power")
    for n, racks in itertools.product(a.jobs, (0, a.racks)):
        if racks > n // 2:
            continue     # a rack of one job: its cap is its job's
        label = f"{n:5d} jobs{f', {racks} racks' if racks else ''}"
        base = {"n": n, "racks": racks, "seed": a.seed}
        ours = child({"what": "ours", **base})
        if ours is None:
            continue
        if ours["method"] == "none fits":
            print(f"  {label:20s} no joint choice fits (a cap is under its jobs' lowest modes)")
            continue
        proven = 1 - ours["value"] / ours["bound"] if ours["bound"] > 0 else 0.0
        print(f"  {label:20s} jetfleet ({ours['method']}, {ours['nodes']} nodes): {limits(ours, proven)} [proven "
              f"by its bound]", flush=True)
        refs = []
        if n <= a.exhaustive_max:
            ex = child({"what": "exhaustive", **base})
            if ex:
                refs.append(("exhaustive optimum", ex, True))
        if n <= a.highs_max and importlib.util.find_spec("scipy") is not None:
            hs = child({"what": "highs", **base, "time_limit_s": a.highs_limit_s})
            if hs:
                refs.append(("HiGHS (scipy milp, exact)", hs, hs["exact"]))
        if a.baseline_repo and not racks:
            bl = child({"what": "baseline", **base, "repo": a.baseline_repo})
            if bl:
                refs.append((f"baseline {Path(a.baseline_repo).name}", bl, False))
        for name, ref, exact in refs:
            gap = 1 - ours["value"] / ref["value"] if exact and ref["value"] > 0 else float("nan")
            print(f"  {'':20s} {name}: {ref['wall_s'] * 1e3:9.1f} ms wall, {ref['cpu_s'] * 1e3:9.1f} ms CPU, "
                  f"{ref['mib']:6.1f} MiB, value {ref['value']:.6f} (jetfleet {ours['value']:.6f}"
                  + (f", {gap * 100:.4f} % under this optimum" if exact else "") + f"); jetfleet / this: time "
                  f"{ours['cpu_s'] / max(ref['cpu_s'], 1e-9):.3f}, memory "
                  + (f"{ours['mib'] / ref['mib']:.3f}" if ref["mib"] >= 0.5 else "(this added < 0.5 MiB)"), flush=True)


def schedule(a: argparse.Namespace) -> None:
    got = child({"what": "schedule", "boards": a.boards, "queue": a.queue, "racks": a.racks, "seed": a.seed})
    if got is None:
        return
    gap = 1 - got["value"] / got["bound"] if got["bound"] > 0 else 0.0
    print(f"scheduling pass: {a.queue} queued jobs, {a.boards} boards in {a.racks} racks, lab and rack caps: "
          f"{got['started']} started; {limits(got, gap)} [the joint choice of those started, against its bound]; "
          f"lab cap kept: {got['lab_ok']}, racks over their caps: {got['racks_over'] or 'none'}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--jobs", type=lambda s: [int(x) for x in s.split(",")], default=[3, 30, 500, 2000])
    p.add_argument("--boards", type=int, default=500)
    p.add_argument("--queue", type=int, default=2000)
    p.add_argument("--racks", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--exhaustive-max", type=int, default=5, help="jobs up to which the optimum is enumerated")
    p.add_argument("--highs-max", type=int, default=2000, help="jobs up to which HiGHS runs (if scipy is there)")
    p.add_argument("--highs-limit-s", type=float, default=300.0)
    p.add_argument("--baseline-repo", default="", help="another checkout whose knapsack.solve to time beside")
    p.add_argument("--one", default="", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.one:
        print(json.dumps(one(json.loads(a.one))))
        return
    print(f"fleet scheduler benchmark on {os.cpu_count()} cores (shared; load average {os.getloadavg()[0]:.1f})")
    joint(a)
    schedule(a)


if __name__ == "__main__":
    main()
