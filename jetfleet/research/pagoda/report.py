"""`jetfleet eval pagoda`: rooflines per power mode and inference energy tuning on emulated AGX Orin, Jetson Nano
and Xavier NX boards, with the published figures beside ours (docs/pagoda.md is this report)."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jetfleet.research.pagoda.plots import energy_roofline_figure, save, time_roofline_figure
from jetfleet.research.pagoda.tuning import frequency_sweep, inference_grid, measure_roofs, non_monotonic, tune
from jetfleet.shared import defaults
from jetfleet.shared.roofline import (
    EnergyFit,
    ProfiledCost,
    energy_mape,
    fit_energy_from_profiles,
    profile_energy_j,
    workload_cost,
)
from jetfleet.shared.workloads import characterisation
from jetfleet.shared.workloads.inference import inference_characterisation
from jetfleet.twin.board import EmulatedBoard
from jetfleet.twin.measure import measure_on_twin

BOARDS = ("agx-orin", "nano", "xavier-nx")
WORKLOADS_ORDER = ("resnet18", "mobilenet_v3", "yolo_v8n", "bert_base", "lstm")
BATCHES = (1, 16)
LATENCY_BOUND = 1.05          # Pagoda: "minimal slowdown"; the target: <= 5% more latency than MAXN
TARGET_SAVING = 0.15
SEED = 7
START_S = 1.7e9            # the emulated boards' clock at the start (board time then runs ahead, accelerated)
# Published (PUBLISHED.md): Stony Brook's energy-optimal savings vs DVFS, % (Nano: six models, Xavier NX: three).
# The energy fit from profiles: MAXN and one low preset per board, the five workloads' training profiled in each.
PROFILE_FIT_MODES = {"agx-orin": "MODE_15W", "nano": "5W", "xavier-nx": "MODE_10W_4CORE"}
PROFILE_MINIBATCHES = 30
STONY_BROOK = {"nano": [13, 19, 15, 9, 17, 17], "xavier-nx": [2, 13, 15]}
# Published analytical inference cost per batch of 1 (Pagoda's model): GFLOP / MB.
PAGODA_COST = {"resnet18": ("ResNet-50", 8.206, 336.7), "mobilenet_v3": ("MobileNetV3-L", 0.449, 103.0),
               "yolo_v8n": ("YOLOv8n (640²)", 8.84, 539.0), "bert_base": ("BERT", 79.1, 2600.0),
               "lstm": ("LSTM", 0.129, 35.3)}
# Theoretical peaks from the published hardware facts: FP32 = 2 x CUDA cores x GPU clock, DRAM = EMC x 2 x bus.
PUBLISHED_HW = {"agx-orin": "2048 CUDA cores x 1300.5 MHz = 5.33 TFLOP/s FP32; 256-bit LPDDR5 at 3199 MHz = 204.8 GB/s",
                "nano": "128 CUDA cores x 921.6 MHz = 236 GFLOP/s FP32; 64-bit LPDDR4 at 1600 MHz = 25.6 GB/s",
                "xavier-nx": "384 CUDA cores x 1100 MHz = 845 GFLOP/s FP32; 128-bit LPDDR4x at 1866 MHz = 59.7 GB/s "
                             "(1600 MHz in the 10/15 W modes: 51.2 GB/s)"}


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _roofline_plots(board: EmulatedBoard, roofs: dict[Any, Any], out: Path) -> tuple[str, str, list[dict[str, Any]]]:
    """Time and energy rooflines of the board's presets (MAXN and NVIDIA's modes), the five workloads' inference
    at batch 1 and 16 placed under MAXN's roof by their roofline time and energy."""
    cat = board.catalog
    modes = [cat.maxn] + [m for n, m in sorted(cat.presets.items()) if m != cat.maxn]
    seen, uniq = set(), []
    for m in modes:
        if m not in seen:
            seen.add(m)
            uniq.append(m)
    extra = measure_roofs(board, [m for m in uniq if m not in roofs], 1.0)
    points = [(roofs.get(m) or extra[m]).as_point(cat) for m in uniq]
    if not points[0]["mode_name"]:
        points[0]["mode_name"] = "MAXN (every knob at max)"    # a board whose nvpmodel.conf has no MAXN
    maxn = points[0]
    rows = []
    for w in WORKLOADS_ORDER:
        for bs in BATCHES:
            wf, q = workload_cost(characterisation(w), bs, "inference", inference_characterisation(w))
            t = max(wf / maxn["peak_flops"], q / maxn["peak_bytes_per_s"])
            e = maxn["eps_flop_j"] * wf + maxn["eps_byte_j"] * q + maxn["pi0_w"] * t
            rows.append({"label": f"{w} bs{bs}", "mode": maxn["mode"], "intensity": wf / q,
                         "achieved_flops": wf / t, "energy_per_flop_j": e / wf})
    title = f"{cat.model} (twin), inference; workloads placed at MAXN"
    tp, ep = out / f"pagoda-{cat.model}-roofline.png", out / f"pagoda-{cat.model}-energy-roofline.png"
    save(time_roofline_figure(points, rows, f"time roofline: {title}"), tp)
    save(energy_roofline_figure(points, rows, f"energy roofline: {title}"), ep)
    return tp.name, ep.name, points


def _profile_fits(model: str, presets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per mode (MAXN, the board's low preset): the five workloads' training profiled on the twin (the way a
    campaign profiles: median minibatch time, mean power; ``PROFILE_MINIBATCHES`` kept), the energy constants
    fitted from those profiles beside the micro-benchmark ones (``presets``: the measured preset rooflines), and
    each fit's energy per workload (T = the profiled time) and MAPE. A fresh twin of the same board (same seed)
    so the rest of the report replays unchanged."""
    board = EmulatedBoard(model, seed=SEED, clock=lambda: START_S)
    cat = board.catalog
    out = []
    for name in ("MAXN", PROFILE_FIT_MODES[model]):
        mode = cat.maxn if name == "MAXN" else cat.parse_mode(name)
        p = next(x for x in presets if x["mode"] == str(mode))
        bench = EnergyFit(p["eps_flop_j"], p["eps_byte_j"], p["pi0_w"])
        samples = []
        for w in WORKLOADS_ORDER:
            m = measure_on_twin(board, w, mode, PROFILE_MINIBATCHES)
            wf, q = workload_cost(characterisation(w), defaults.MINIBATCH_SIZE)
            t = m.summary.minibatch_time_median_ms / 1e3
            samples.append(ProfiledCost(w, wf, q, t, t * m.summary.power_mean_w))
        fit = fit_energy_from_profiles(samples, f"{model} {name}")
        out.append({
            "board_model": model, "mode_name": name, "mode": str(mode),
            "bench": {"eps_flop_j": bench.eps_flop_j, "eps_byte_j": bench.eps_byte_j, "pi0_w": bench.pi0_w,
                      "mape": energy_mape(samples, bench)},
            "profiles": {"eps_flop_j": fit.eps_flop_j, "eps_byte_j": fit.eps_byte_j, "pi0_w": fit.pi0_w,
                         "mape": energy_mape(samples, fit)},
            "workloads": [{"workload": s.workload, "flops": s.flops, "bytes": s.nbytes, "time_s": s.time_s,
                           "energy_j": s.energy_j, "bench_energy_j": profile_energy_j(s, bench),
                           "profile_energy_j": profile_energy_j(s, fit)} for s in samples]})
    return out


def _profile_fit_plot(rows: list[dict[str, Any]], path: Path) -> None:
    """Predicted against profiled energy per minibatch, both fits, one panel per board (log-log, y = x dotted)."""
    from jetfleet.research.plots import pyplot

    plt = pyplot()

    fig, axes = plt.subplots(1, len(BOARDS), figsize=(11.5, 3.9))
    for ax, model in zip(axes, BOARDS):
        lo, hi = math.inf, 0.0
        for r, marker in zip([r for r in rows if r["board_model"] == model], "os"):
            e = [w["energy_j"] for w in r["workloads"]]
            for key, colour, fit in (("bench_energy_j", "tab:orange", "micro-benchmark fit"),
                                     ("profile_energy_j", "tab:blue", "profile fit")):
                y = [w[key] for w in r["workloads"]]
                mape = r["bench" if key.startswith("bench") else "profiles"]["mape"]
                ax.scatter(e, y, marker=marker, c=colour, edgecolors="k", linewidths=0.5, s=36,
                           label=f"{r['mode_name']}, {fit} (MAPE {100 * mape:.1f}%)")
                lo, hi = min(lo, *e, *y), max(hi, *e, *y)
        ax.plot([lo / 1.3, hi * 1.3], [lo / 1.3, hi * 1.3], "k:", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("profiled energy per minibatch (J, log)")
        ax.set_ylabel("predicted ε_flop·W + ε_byte·Q + π₀·T (J, log)")
        ax.set_title(f"{model} (twin), training, 5 workloads", fontsize=9)
        ax.grid(True, ls=":", lw=0.6)
        ax.legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def _sweep_plot(sweeps: dict[str, dict[str, list[tuple[float, Any]]]], path: Path) -> None:
    """Energy per inference along the GPU and the CPU clock (others at MAXN), normalised to MAXN, per board."""
    from jetfleet.research.plots import pyplot

    plt = pyplot()

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.8), sharey=True)
    for ax, knob, label in ((axes[0], "gpu_mhz", "GPU clock (MHz)"), (axes[1], "cpu_mhz", "CPU clock (MHz)")):
        for key, sw in sweeps.items():
            pts = sw[knob]
            ref = pts[-1][1].energy_j
            ax.plot([f for f, _ in pts], [o.energy_j / ref for _, o in pts], "-o", ms=3, label=key)
        ax.set_xlabel(label)
        ax.grid(True, ls=":", lw=0.6)
    axes[0].set_ylabel("energy per inference / at MAXN")
    axes[0].set_title("GPU clock swept, others at MAXN", fontsize=9)
    axes[1].set_title("CPU clock swept, others at MAXN", fontsize=9)
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def run_report(out: Path, *, say: Callable[[str], None] = print,
               progress: Callable[[int, int, str], None] | None = None) -> Path:
    """Everything in this module's docstring: pagoda.md, results.json and the PNGs in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    steps = len(BOARDS) * (2 + len(WORKLOADS_ORDER) * len(BATCHES) * 2) + 1
    done = [0]

    def step(what: str) -> None:
        done[0] += 1
        if progress:
            progress(done[0], steps, what)

    results: dict[str, Any] = {"boards": {}, "tuned": [], "sweeps": {}, "profile_fits": []}
    plots: dict[str, tuple[str, str]] = {}
    sweeps: dict[str, dict[str, list[tuple[float, Any]]]] = {}
    for model in BOARDS:
        # A fixed start on the board's clock: its noise is keyed on the clock, so the report replays exactly.
        board = EmulatedBoard(model, seed=SEED, clock=lambda: START_S)
        grid = inference_grid(board.catalog)
        roofs = measure_roofs(board, grid, 1.0)
        tp, ep, points = _roofline_plots(board, roofs, out)
        plots[model] = (tp, ep)
        results["boards"][model] = {"grid_modes": len(grid), "presets": points}
        step(f"{model}: rooflines of {len(grid)} modes")
        results["profile_fits"] += _profile_fits(model, points)
        step(f"{model}: energy fits from profiles")
        cache: dict[Any, Any] = {}
        for w in WORKLOADS_ORDER:
            for bs in BATCHES:
                for bound in (LATENCY_BOUND, math.inf):
                    results["tuned"].append(tune(board, w, bs, bound, roofs, cache).to_dict())
                    step(f"{model} {w} bs{bs} bound {bound}")
        if model != "agx-orin":
            sw = {knob: frequency_sweep(board, "resnet18", 1, knob) for knob in ("gpu_mhz", "cpu_mhz")}
            sweeps[f"{model} resnet18 bs1"] = sw
            for w in WORKLOADS_ORDER:
                g = frequency_sweep(board, w, 1, "gpu_mhz")
                c = frequency_sweep(board, w, 1, "cpu_mhz")
                ge, ce = [o.energy_j for _, o in g], [o.energy_j for _, o in c]
                gt, ct = [o.latency_s for _, o in g], [o.latency_s for _, o in c]
                results["sweeps"][f"{model}/{w}"] = {
                    "gpu_energy_non_monotonic": non_monotonic(ge), "cpu_energy_non_monotonic": non_monotonic(ce),
                    "gpu_energy_span": max(ge) / min(ge), "cpu_energy_span": max(ce) / min(ce),
                    "gpu_latency_span": max(gt) / min(gt), "cpu_latency_span": max(ct) / min(ct),
                    "gpu_best_mhz": g[min(range(len(ge)), key=ge.__getitem__)][0],
                    "time_monotonic_gpu": all(a >= b - 1e-12 for a, b in zip(gt, gt[1:])),
                    "time_monotonic_cpu": all(a >= b - 1e-12 for a, b in zip(ct, ct[1:]))}
    _sweep_plot(sweeps, out / "pagoda-frequency-sweeps.png")
    _profile_fit_plot(results["profile_fits"], out / "pagoda-profile-fit.png")
    step("report")
    (out / "pagoda-results.json").write_text(json.dumps(results, indent=1, default=str))
    path = out / "pagoda.md"
    path.write_text(_markdown(results, plots))
    say(f"report written to {path}")
    return path


def _find(results: dict[str, Any], model: str, w: str, bs: int, bounded: bool) -> dict[str, Any]:
    return next(t for t in results["tuned"] if t["board_model"] == model and t["workload"] == w
                and t["batch_size"] == bs and (t["bound"] is not None) == bounded)


def _profile_fit_section(results: dict[str, Any], add: Callable[[str], None]) -> None:
    rows = results["profile_fits"]
    add("## Energy constants fitted from profiles, beside the micro-benchmark fit\n")
    add("The issue fits ε and π₀ per mode *from profiles*: for a (board model, mode), the training profiles of every "
        "workload profiled there (minibatch 16; time per minibatch T = the median minibatch time, E = T × the mean "
        "power) and their analytical W and Q per minibatch give E = ε_flop·W + ε_byte·Q + π₀·T, solved by "
        "non-negative least squares on the relative error (ε, π₀ ≥ 0; ≥ 3 workloads, refused otherwise). "
        "`jetfleet roofline --fit-profiles` computes it on demand from the stored campaign profiles (nothing is "
        "stored) and prints both fits with each one's MAPE of E over the profiled workloads; `--plot` draws both "
        "(micro-benchmark solid, profile dashed, named in the legend and the title). Here: the five workloads "
        f"profiled on the twin ({PROFILE_MINIBATCHES} minibatches kept) at MAXN and one low preset per board; "
        "MAPE with T = the profiled time for both fits.\n")
    add("| board | mode | fit | ε_flop pJ/FLOP | ε_byte pJ/B | π₀ W | E MAPE, 5 workloads | predicted / profiled E "
        "(mean) |")
    add("|---|---|---|---|---|---|---|---|")
    for r in rows:
        for key, fit in (("bench", "micro-benchmark"), ("profiles", "profiles")):
            f = r[key]
            col = "bench_energy_j" if key == "bench" else "profile_energy_j"
            ratio = statistics.mean(w[col] / w["energy_j"] for w in r["workloads"])
            add(f"| {r['board_model']} | {r['mode_name']} ({r['mode']}) | {fit} | {f['eps_flop_j'] * 1e12:.1f} | "
                f"{f['eps_byte_j'] * 1e12:.0f} | {f['pi0_w']:.2f} | {100 * f['mape']:.1f}% | {ratio:.2f} |")
    under = sum(w["bench_energy_j"] < w["energy_j"] for r in rows for w in r["workloads"])
    total = sum(len(r["workloads"]) for r in rows)
    higher = sum(r["profiles"]["pi0_w"] > r["bench"]["pi0_w"] for r in rows)
    bmape = [r["bench"]["mape"] for r in rows]
    pmape = [r["profiles"]["mape"] for r in rows]
    zero = [statistics.correlation([w["flops"] / w["energy_j"] for w in r["workloads"]],
                                   [w["time_s"] / w["energy_j"] for w in r["workloads"]])
            for r in rows if r["profiles"]["eps_flop_j"] == 0]
    add(f"\nThe direction: the micro-benchmark fit under-predicts the profiled energy for {under} of {total} "
        f"(board, mode, workload) rows (MAPE {100 * min(bmape):.0f}–{100 * max(bmape):.0f}%); the profile fit "
        f"gets {100 * min(pmape):.1f}–{100 * max(pmape):.1f}%. Its π₀ is higher in {higher} of {len(rows)} modes: "
        "the ERT windows see the GPU kernels and an idle host, while a training minibatch also pays the data "
        "loader and the host's launches over the whole minibatch, and moves more DRAM bytes than the analytical "
        "Q (inputs and outputs once, no re-reads) — the profile fit folds that into π₀ and ε_byte. "
        f"ε_flop is 0 in {len(zero)} of {len(rows)} modes"
        + (f" (in those, W/E and T/E correlate at r = {min(zero):.2f}–{max(zero):.2f} over the five workloads: the "
           "FLOP-heavy ones are also the long ones, so energy per FLOP and constant power are hard to tell apart)"
           if zero else "") + ", so read the profile fit's constants as a fit of E per "
        "minibatch, not as physical per-FLOP costs. Real boards have not been measured here.\n")
    add("![predicted vs profiled energy](pagoda-profile-fit.png)\n")


def _markdown(results: dict[str, Any], plots: dict[str, tuple[str, str]]) -> str:
    lines: list[str] = []
    add = lines.append
    add("# Pagoda: time and energy rooflines per power mode, inference energy tuning\n")
    add("Generated by `jetfleet eval pagoda --out docs` (issue 16) on emulated boards (the twin, seed "
        f"{SEED}); every figure below comes from that run (`docs/pagoda-results.json`). Published figures "
        "(`../shared/PUBLISHED.md`) are printed beside ours. Where the twin disagrees with a published fact, "
        "this page says so; nothing was tuned to make it agree.\n")
    add("## How it works\n")
    add("- **Rooflines per mode, measured the Empirical Roofline Toolkit way.** The agent runs three windows in the "
        "mode (`jetfleet.agent.roofline`): `idle` (the host thread spins, GPU idle), `compute` (back-to-back FP32 "
        "matmuls) and `memory` (a streaming triad far beyond L2), sampling board power throughout. On a board "
        "that is real torch on CUDA (`jetfleet/agent/workloads/ert.py`); on the twin, its physics of the same "
        "kernels. Peak FLOP/s and DRAM bytes/s are what the kernels achieve; the energy constants come from the "
        "three windows' mean power: π₀ = the idle window, and ε_flop, ε_byte solve P = π₀ + ε_flop·F + ε_byte·B "
        "for the two kernels. Stored per (board model, mode) in both store backends; `jetfleet roofline` measures "
        "missing modes on a board (`--measure`) and places a workload on them.")
    add("- **A workload's W and Q** per minibatch (training) or per served batch (inference) come from the "
        "characterisation's analytical per-operator model (every kernel's FLOPs and input+output bytes; "
        "inference from the forward-pass characterisation of issue 15). T = max(W/peak, Q/BW), "
        "E = ε_flop·W + ε_byte·Q + π₀·T.")
    add("- **Inference energy tuning** (`jetfleet.research.pagoda.tuning`): measure the rooflines of every mode of "
        "the grid; measure MAXN and 12 random modes; fit latency = a·T_roof + b/f_cpu + c (the roofline leaves out "
        "the host's kernel launches, which scale with the CPU clock) and power from the energy roofline "
        "(one scale factor); measure the 6 modes predicted to use the least energy within the latency bound, "
        "refit, twice more; then step down from the best measured mode one knob, one grid step at a time, while "
        "a measured step saves energy within the bound (the additive latency model misses where host and GPU "
        "time overlap); choose the measured mode with the least energy per inference that meets the bound "
        "measured (≤ 45 runs instead of the 441–3,000 modes of the grid). The **oracle** is the twin's noiseless "
        "optimum over the whole grid (exhaustive profiling). **DVFS** is the mode the twin's default governors settle in "
        "(`jetfleet/twin/governor.py`: schedutil, nvhost_podgov with load_target 70%, EMC actmon floored by the "
        "GPU's request). Grids: AGX Orin's 441-mode inference grid (ARCHITECTURE §8); Nano and Xavier NX every "
        "CPU × GPU × EMC frequency with all cores online (the Stony Brook study tuned frequencies).")
    add("- Energy per inference = board power × batch latency / batch size.\n")

    add("## Rooflines of the boards' presets (measured on the twin)\n")
    for model in BOARDS:
        b = results["boards"][model]
        add(f"### {model}\n")
        add(f"Theoretical (published hardware): {PUBLISHED_HW[model]}.\n")
        add("| mode | GFLOP/s | GB/s | ridge FLOP/B | ε_flop pJ/FLOP | ε_byte pJ/B | π₀ W |")
        add("|---|---|---|---|---|---|---|")
        for p in b["presets"]:
            add(f"| {p['mode_name'] or 'MAXN'} ({p['mode']}) | {p['peak_flops'] / 1e9:.0f} | "
                f"{p['peak_bytes_per_s'] / 1e9:.1f} | {p['peak_flops'] / p['peak_bytes_per_s']:.1f} | "
                f"{p['eps_flop_j'] * 1e12:.1f} | {p['eps_byte_j'] * 1e12:.0f} | {p['pi0_w']:.2f} |")
        tp, ep = plots[model]
        add(f"\n![time roofline {model}]({tp})\n![energy roofline {model}]({ep})\n")
    add("The twin's kernels reach 62% of the FP32 peak and 70% of the DRAM peak (its `DENSE_EFFICIENCY` and "
        "`BANDWIDTH_EFFICIENCY`), about what ERT reports on GPUs; a board's own figures replace these once "
        "measured with `jetfleet roofline --measure` on it.\n")

    _profile_fit_section(results, add)

    add("## Workloads' analytical cost, inference at batch 1 (ours beside Pagoda's)\n")
    add("| workload | ours GFLOP | ours MB | Pagoda's model | GFLOP | MB |")
    add("|---|---|---|---|---|---|")
    for w in WORKLOADS_ORDER:
        wf, q = workload_cost(characterisation(w), 1, "inference", inference_characterisation(w))
        name, g, mb = PAGODA_COST[w]
        add(f"| {w} | {wf / 1e9:.3f} | {q / 1e6:.1f} | {name} | {g} | {mb} |")
    agree = []
    for w in ("mobilenet_v3", "yolo_v8n"):
        wf, q = workload_cost(characterisation(w), 1, "inference", inference_characterisation(w))
        _name, g, mb = PAGODA_COST[w]
        agree.append(f"{w} {100 * (wf / 1e9 / g - 1):+.0f}% FLOPs, {100 * (q / 1e6 / mb - 1):+.0f}% bytes")
    add("\nOurs are ResNet-18 (Pagoda used ResNet-50), BERT-base at 384 tokens, our 2-layer LSTM: those rows "
        "compare the method, not the same models. The two shared models against Pagoda's: " + "; ".join(agree)
        + ".\n")

    add(f"## AGX Orin: least energy per inference within {_pct(LATENCY_BOUND - 1)} more latency than MAXN\n")
    add("Published (Pagoda): MAXN is not the most energy-efficient mode; up to 15% less energy for DNN inference "
        f"with minimal slowdown. Target: ≥ {_pct(TARGET_SAVING)} less energy than MAXN at ≤ 5% more latency for at "
        "least 3 of the 5 workloads.\n")
    met: dict[int, int] = {}
    for bs in BATCHES:
        add(f"**Batch {bs}**\n")
        add("| workload | MAXN ms / W / mJ per inf. | DVFS mode: vs MAXN energy | chosen mode | saving vs MAXN | "
            "latency vs MAXN | oracle mode | oracle saving | runs |")
        add("|---|---|---|---|---|---|---|---|---|")
        met[bs] = 0
        for w in WORKLOADS_ORDER:
            t = _find(results, "agx-orin", w, bs, True)
            m, d = t["maxn"], t["dvfs"]
            ok = t["chosen_saving_vs_maxn"] >= TARGET_SAVING and t["chosen_latency_vs_maxn"] <= LATENCY_BOUND
            met[bs] += ok
            add(f"| {w} | {m['latency_s'] * 1e3:.1f} / {m['power_w']:.1f} / {m['energy_j'] * 1e3:.1f} | "
                f"{d['mode']}: {d['energy_j'] / m['energy_j']:.2f}× | {t['chosen']['mode']} | "
                f"{_pct(t['chosen_saving_vs_maxn'])}{' ✓' if ok else ''} | {t['chosen_latency_vs_maxn']:.3f}× | "
                f"{t['oracle']['mode']} | {_pct(t['oracle_saving_vs_maxn'])} | {t['measured_modes']} |")
        add(f"\nTarget met for **{met[bs]} of 5** workloads at batch {bs}.\n")
    add("The chosen mode is judged on measured runs (40 batches, the twin's jitter and sensor noise), the oracle "
        "on the noiseless steady state: a mode at the edge of the bound can measure just inside it, so the chosen "
        "saving can exceed the oracle's (a board would show the same; re-measure such a choice before relying on "
        "it).\n")
    add("MAXN latency beside Pagoda's measured notebook (AGX Orin MAXN, ms per batch; published ResNet-50, "
        "ours ResNet-18): " + "; ".join(
            f"{w} bs{bs} {_find(results, 'agx-orin', w, bs, True)['maxn']['latency_s'] * 1e3:.1f}"
            for w in WORKLOADS_ORDER for bs in BATCHES)
        + " — published: LSTM 1.23 (bs1) / 1.88 (bs16), YOLOv8n 17.9 / 107.5, MobileNetV3 18.0 / 28.1, "
          "ResNet-50 15.4 / 51.6, BERT 61.9 (bs1).\n")

    add("## Jetson Nano and Xavier NX: energy-optimal frequencies vs the default DVFS governors\n")
    add("Published (Stony Brook, 2023): the energy-optimal frequencies use 13, 19, 15, 9, 17, 17% less energy "
        "than DVFS on Nano (six models) and 2, 13, 15% on Xavier NX; time is monotonic in frequency; GPU frequency "
        "matters more than CPU frequency; energy is non-monotonic in GPU frequency; Xavier NX uses 2–4× less "
        "energy than Nano. Target: our savings vs DVFS inside or above the published ranges.\n")
    for model in ("nano", "xavier-nx"):
        pub = STONY_BROOK[model]
        add(f"### {model} (published {min(pub)}–{max(pub)}%)\n")
        add("| workload | batch | DVFS mode | DVFS ms / mJ per inf. | energy-optimal mode (oracle) | saving vs DVFS | "
            "its latency vs DVFS | within +5% latency: chosen saving vs DVFS | oracle |")
        add("|---|---|---|---|---|---|---|---|---|")
        savings = []
        for w in WORKLOADS_ORDER:
            for bs in BATCHES:
                u = _find(results, model, w, bs, False)
                b = _find(results, model, w, bs, True)
                d = u["dvfs"]
                savings.append(u["oracle_saving_vs_dvfs"])
                add(f"| {w} | {bs} | {d['mode']} | {d['latency_s'] * 1e3:.1f} / {d['energy_j'] * 1e3:.1f} | "
                    f"{u['oracle']['mode']} | {_pct(u['oracle_saving_vs_dvfs'])} | "
                    f"{u['oracle']['latency_s'] / d['latency_s']:.2f}× | {_pct(b['chosen_saving_vs_dvfs'])} | "
                    f"{_pct(b['oracle_saving_vs_dvfs'])} |")
        lo, hi = min(savings), max(savings)
        verdict = ("inside" if lo >= min(pub) / 100 and hi <= max(pub) / 100 else
                   "at or above" if lo >= min(pub) / 100 else "partly below")
        add(f"\nEnergy-optimal saving vs DVFS: {_pct(lo)}–{_pct(hi)} (median {_pct(statistics.median(savings))}), "
            f"{verdict} the published {min(pub)}–{max(pub)}%.\n")
    add("![frequency sweeps](pagoda-frequency-sweeps.png)\n")
    add("| board / workload (bs 1) | energy non-monotonic in GPU clock | best GPU MHz | energy span GPU / CPU sweep | "
        "latency span GPU / CPU sweep | time monotonic GPU / CPU |")
    add("|---|---|---|---|---|---|")
    for key, s in results["sweeps"].items():
        add(f"| {key} | {'yes' if s['gpu_energy_non_monotonic'] else 'no'} | {s['gpu_best_mhz']:g} | "
            f"{s['gpu_energy_span']:.2f}× / {s['cpu_energy_span']:.2f}× | {s['gpu_latency_span']:.2f}× / "
            f"{s['cpu_latency_span']:.2f}× | {'yes' if s['time_monotonic_gpu'] else 'no'} / "
            f"{'yes' if s['time_monotonic_cpu'] else 'no'} |")
    ratios = []
    for w in WORKLOADS_ORDER:
        n = _find(results, "nano", w, 1, False)["dvfs"]["energy_j"]
        x = _find(results, "xavier-nx", w, 1, False)["dvfs"]["energy_j"]
        ratios.append(n / x)
    add("\nNano / Xavier NX energy per inference under DVFS, batch 1: "
        + ", ".join(f"{w} {r:.1f}×" for w, r in zip(WORKLOADS_ORDER, ratios))
        + " (published: Xavier NX uses 2–4× less energy than Nano).\n")
    add("## Where the twin disagrees with the published facts\n")
    add("- **Savings vs MAXN on AGX Orin are larger than Pagoda's \"up to 15%\"** for launch-bound batch-1 "
        "inference: the twin's MAXN keeps 12 cores online at 2.2 GHz and the GPU at 1.3 GHz while the serving "
        "thread is the bottleneck, and its leakage and voltage curves make that expensive; a mode with 4 cores "
        "and a lower GPU clock loses little latency. Pagoda measured on a board whose idle/static power and "
        "voltage curves we have not calibrated against; the direction agrees, the magnitude does not.")
    add("- **The twin's DVFS baseline is MAXN-like** for GPU-bound work: podgov sees a busy GPU and the serving "
        "thread spins its core at 100%, so governors pick the top clocks. Savings vs DVFS then equal savings vs "
        "MAXN. The study's DVFS numbers on real boards include governor lag and boosts the twin does not model.")
    slow = [_find(results, m, w, bs, False) for m in ("nano", "xavier-nx") for w in WORKLOADS_ORDER for bs in BATCHES]
    lat = [t["oracle"]["latency_s"] / t["dvfs"]["latency_s"] for t in slow]
    add(f"- **Energy-optimal modes on Nano/Xavier NX come at {min(lat):.1f}–{max(lat):.1f}× DVFS's latency** and save "
        "more than the study's ranges: the study reported energy, not the latency it cost; with a 5% latency "
        "bound the savings shrink to the chosen/oracle columns above.")
    within = "within" if 2.0 <= min(ratios) and max(ratios) <= 4.0 else "against"
    add(f"- **Xavier NX vs Nano**: the twin's NX uses {min(ratios):.1f}–{max(ratios):.1f}× less energy per "
        f"inference than its Nano under DVFS ({within} the published 2–4×). Since issue 26 both boards' power "
        "constants and the Nano's GPU efficiency are calibrated against real Triton Inception v3 sweeps of the two "
        "boards (docs/twin.md §5d); before that the twin's NX drew ~17 W at its top clocks and its Maxwell kernels "
        "reached the later GPUs' share of FP32 peak, and this ratio was 1.0–1.3×.")
    exceptions = [k for k, s in results["sweeps"].items() if s["gpu_energy_span"] <= s["cpu_energy_span"]]
    gpu_more = sum(s["gpu_energy_span"] > s["cpu_energy_span"] for s in results["sweeps"].values())
    nonmono = sum(s["gpu_energy_non_monotonic"] for s in results["sweeps"].values())
    add(f"- Agreements: energy is non-monotonic in the GPU clock in {nonmono} of {len(results['sweeps'])} "
        f"board/workload sweeps; the GPU clock moves energy more than the CPU clock in {gpu_more} of "
        f"{len(results['sweeps'])}" + (f" (the exceptions, launch-bound at batch 1: {', '.join(exceptions)})"
                                        if exceptions else "")
        + "; time falls monotonically with both clocks in "
        f"{sum(s['time_monotonic_gpu'] and s['time_monotonic_cpu'] for s in results['sweeps'].values())} of "
        f"{len(results['sweeps'])}.")
    add("- ResNet-18 / our LSTM / BERT at 384 tokens are not the published models; compare trends, not rows.\n")
    add("## Reproduce\n")
    add("```\njetfleet eval pagoda --out docs          # this page, its PNGs and pagoda-results.json (~1 min)\n"
        "jetfleet lab up --boards nano,xavier-nx,agx-orin &\n"
        "jetfleet roofline --board-model nano --workload resnet18 --phase inference --minibatch-size 1 \\\n"
        "    --mode MAXN --mode 5W --measure --plot nano.png    # nano.png and nano-energy.png\n```\n")
    return "\n".join(lines)
