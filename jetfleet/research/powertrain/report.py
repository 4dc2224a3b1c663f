"""`jetfleet eval powertrain`: PowerTrain's evaluation on emulated boards, as a markdown report with
PNG plots, the published figures (../shared/PUBLISHED.md: PowerTrain, FGCS 2024) printed beside ours."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from jetfleet.research.powertrain.evaluate import (
    References,
    TransferScore,
    Trial,
    score_choices,
    score_transfer,
    train_references,
    twin_truth,
)
from jetfleet.research.steps import ProgressFn, Steps
from jetfleet.shared.catalog import get_catalog

# Published figures (time / power MAPE %, k = 50) — PowerTrain Fig. 6 and §§ on generalisation.
PUBLISHED_FIG6 = {("mobilenet_v3", "resnet18"): (15.03, 7.98), ("mobilenet_v3", "yolo_v8n"): (11.77, 4.98),
                  ("resnet18", "mobilenet_v3"): (14.53, 5.62), ("resnet18", "yolo_v8n"): (11.50, 4.95),
                  ("yolo_v8n", "mobilenet_v3"): (17.03, 9.71), ("yolo_v8n", "resnet18"): (19.76, 12.88)}
PUBLISHED_DIAG = {"mobilenet_v3": (8.12, 3.62), "resnet18": (9.34, 4.06), "yolo_v8n": (9.72, 4.81)}
PUBLISHED_K: dict[int, Any] = {  # k: (MobileNet time scratch/PT, YOLO time scratch/PT, MobileNet power, YOLO power)
    10: ((52.6, 26.7), (36.5, 24.7), (24, 16.7), (20, 6.7)), 20: ((42, 21), (29.5, 18), (12, 8.5), (8.4, 5.1)),
    50: ((23, 16), (17, 11.5), (10.5, 5.1), (5.2, 5.0)), 100: ((11, 11.9), (10, 10.2), (10, 4.3), (5.0, 4.9))}
PUBLISHED_UNSEEN = {"lstm": "12.5 / 6.3 (scratch 12.3 / 9.1)", "bert_base": "15.6 / ≈5.8 (scratch 15.1 / ≈9.3)"}
PUBLISHED_BOARDS = {("agx-xavier", "resnet18"): "12 / 11 (scratch 21 / 18)",
                    ("agx-xavier", "mobilenet_v3"): "14 / 9 (scratch ≈20.5 / ≈15)",
                    ("orin-nano", "resnet18"): "7.85 / 5.96", ("orin-nano", "mobilenet_v3"): "8.98 / 4.72"}
PUBLISHED_CHOICE = {"resnet18": (28, -6, 47, 2), "mobilenet_v3": (14, -16, 5, 1), "yolo_v8n": (12, 2, 4, 0),
                    "lstm": (None, -7, 0, 0), "bert_base": (None, -38, -4, 1)}  # RND, MAX, NN, PT penalty %
PUBLISHED_OVER = {"resnet18": "100/39/36 · 100/36/21", "mobilenet_v3": "80/44/41 · 77/38/27",
                  "yolo_v8n": "24/10/21 · 21/0/15", "lstm": "75/33/10 · 71/18/3", "bert_base": "100/71/30 · 100/65/12"}


def _fmt(s: TransferScore) -> tuple[str, str]:
    m = s.summary()

    def cell(a: str, b: str) -> str:
        return (f"{m[a][0]:.1f} [{m[a][1]:.1f}–{m[a][2]:.1f}] / {m[b][0]:.1f} [{m[b][1]:.1f}–{m[b][2]:.1f}]")

    return cell("time_transfer", "power_transfer"), cell("time_scratch", "power_scratch")


def _plot_k(path: Path, ks: list[int], results: dict[str, dict[int, TransferScore]]) -> None:
    from jetfleet.research.plots import pyplot

    plt = pyplot()

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for ax, q in zip(axes, ("time", "power"), strict=True):
        for w, by_k in results.items():
            ax.plot(ks, [np.median(getattr(by_k[k], f"{q}_transfer")) for k in ks], "-o", label=f"{w} PowerTrain")
            ax.plot(ks, [np.median(getattr(by_k[k], f"{q}_scratch")) for k in ks], "--x", label=f"{w} scratch")
        ax.set_xlabel("profiled modes k")
        ax.set_ylabel(f"{q} MAPE %")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


QUICK_REPEATS = 5


def run_report(out: Path, *, repeats: int | None = None, quick: bool = False,
               say: Callable[[str], None] = lambda s: None, progress: ProgressFn | None = None) -> Path:
    """Run PowerTrain's evaluation on emulated boards, write report.md and its plots in ``out``; returns its path.
    ``repeats`` defaults to 10 (5 with ``quick``); ``progress`` hears (step, of steps, what) as the run goes."""
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.time()
    repeats = repeats or (QUICK_REPEATS if quick else 10)
    refs_names = ["resnet18"] if quick else ["resnet18", "mobilenet_v3", "yolo_v8n"]
    targets = ["mobilenet_v3", "yolo_v8n", "resnet18"]
    ks = [10, 50] if quick else [10, 20, 50, 100]
    boards_workloads = ("resnet18",) if quick else ("resnet18", "mobilenet_v3")
    strategies = ("random", "spread") if quick else ("random", "spread", "uncertain")
    say = Steps(len(refs_names) + sum(t != r for r in refs_names for t in targets) + 2 * len(ks) + 2
                + 2 * len(boards_workloads) + 2 * len(strategies) + (len(targets) - 1 + 2), say, progress)
    truth = {w: twin_truth("agx-orin", w, seed=1) for w in targets + ["lstm", "bert_base"]}
    md = [f"# PowerTrain on emulated boards\n\nRepeats: {repeats} (median [IQR]); twin truth over PowerTrain's "
          "4,368-mode AGX Orin grid (and each target board's powertrain grid); published figures beside ours. "
          "Cells are time / power MAPE %.\n"]
    refs: dict[str, References] = {}
    for r in refs_names:
        say(f"training reference {r} on agx-orin ({len(truth[r].modes)} modes)")
        refs[r] = train_references(truth[r])
    md.append("## Which reference to transfer from (AGX Orin, k = 50)\n")
    md.append("| reference ↓ \\ target → | " + " | ".join(targets) + " |\n|---|" + "---|" * len(targets))
    trials_pt: dict[str, list[Trial]] = {}
    for r in refs_names:
        cells = []
        for t in targets:
            if t == r:
                from jetfleet.controller.powertrain.nn import mape

                g = truth[t]
                ours = f"{mape(refs[r].time.predict(g.x), g.time_ms):.1f} / {mape(refs[r].power.predict(g.x), g.power_w):.1f}"
                pub = PUBLISHED_DIAG.get(t)
                cells.append(f"**full grid** {ours} (paper {pub[0]} / {pub[1]})" if pub else ours)
                continue
            say(f"transfer {r} -> {t}, k=50")
            trials: list[Trial] = []
            s = score_transfer(refs[r], truth[t], 50, repeats, trials=trials)
            if r == "resnet18":
                trials_pt[t] = trials
            pt, nn = _fmt(s)
            pub = PUBLISHED_FIG6.get((r, t))
            cells.append(f"PT {pt}; scratch {nn}" + (f" (paper PT {pub[0]} / {pub[1]})" if pub else ""))
        md.append(f"| {r} | " + " | ".join(cells) + " |")
    md.append("\n## MAPE vs number of profiled modes k (reference resnet18)\n")
    md.append("| target | k | PowerTrain time / power | from scratch time / power | paper time (scratch/PT) | "
              "paper power (scratch/PT) |\n|---|---|---|---|---|---|")
    by_k: dict[str, dict[int, TransferScore]] = {}
    for i, t in enumerate(["mobilenet_v3", "yolo_v8n"]):
        by_k[t] = {}
        for k in ks:
            say(f"k={k} {t}")
            by_k[t][k] = score_transfer(refs["resnet18"], truth[t], k, repeats)
            pt, nn = _fmt(by_k[t][k])
            pub = PUBLISHED_K.get(k)
            pub_t = f"{pub[i][0]} / {pub[i][1]}" if pub else "—"
            pub_p = f"{pub[2 + i][0]} / {pub[2 + i][1]}" if pub else "—"
            md.append(f"| {t} | {k} | {pt} | {nn} | {pub_t} | {pub_p} |")
    _plot_k(out / "mape_vs_k.png", ks, by_k)
    md.append("\n![MAPE vs k](mape_vs_k.png)\n")
    md.append("## Unseen architectures and other boards (reference resnet18 on AGX Orin, k = 50)\n")
    md.append("| target | PowerTrain time / power | from scratch | paper |\n|---|---|---|---|")
    for w in ("lstm", "bert_base"):
        say(f"transfer resnet18 -> {w}")
        trials = []
        pt, nn = _fmt(score_transfer(refs["resnet18"], truth[w], 50, repeats, trials=trials))
        trials_pt[w] = trials
        md.append(f"| {w} on agx-orin | {pt} | {nn} | {PUBLISHED_UNSEEN[w]} |")
    for board in ("agx-xavier", "orin-nano"):
        for w in boards_workloads:
            say(f"transfer resnet18@agx-orin -> {w}@{board}")
            pt, nn = _fmt(score_transfer(refs["resnet18"], twin_truth(board, w, seed=2), 50, repeats))
            md.append(f"| {w} on {board} | {pt} | {nn} | {PUBLISHED_BOARDS[(board, w)]} |")
    md.append("\n## Which modes to profile: random vs spread vs uncertainty (resnet18 -> mobilenet_v3, AGX Orin)\n")
    md.append("| strategy | k = 25 | k = 50 |\n|---|---|---|")
    for strategy in strategies:
        cells = []
        for k in (25, 50):
            say(f"selection {strategy} k={k}")
            cells.append(_fmt(score_transfer(refs["resnet18"], truth["mobilenet_v3"], k, repeats, strategy))[0])
        md.append(f"| {strategy} | " + " | ".join(cells) + " |")
    md.append("\n## Choosing a mode: fastest under a power budget, 17–50 W in 1 W steps (AGX Orin, k = 50)\n")
    md.append("Median time penalty % vs the true optimum; share of choices whose observed power is over the budget "
              "(A/L) and over by more than 1 W (A/L+1). PT = PowerTrain, NN = from scratch on the same 50 modes, "
              "RND = best of the 50 profiled modes, MAX = MAXN.\n")
    md.append("| workload | PT | NN | RND | MAX | PT A/L, A/L+1 | NN A/L, A/L+1 | MAX A/L, A/L+1 | presets | "
              "paper penalty RND/MAX/NN/PT | paper A/L · A/L+1 (MAX/NN/PT) |\n|---|---|---|---|---|---|---|---|---|---|---|")
    cat = get_catalog("agx-orin")
    budgets = [float(b) for b in range(17, 51)]
    for w, trials in trials_pt.items():
        say(f"choices for {w}")
        sc = score_choices(truth[w], trials, budgets, {k: v for k, v in cat.presets.items() if k != "MAXN"}, cat.maxn)

        def pen(m: str, sc: dict[str, dict[str, float]] = sc) -> str:
            return f"{sc[m]['median_penalty_pct']:.1f}" if m in sc else "—"

        def over(m: str, sc: dict[str, dict[str, float]] = sc) -> str:
            return f"{sc[m]['over_budget_pct']:.0f}, {sc[m]['over_by_1w_pct']:.0f}" if m in sc else "—"

        presets = "; ".join(f"{k.split()[1]} {v['median_penalty_pct']:.0f}%" for k, v in sc.items()
                            if k.startswith("preset"))
        published = PUBLISHED_CHOICE.get(w)
        pub_s = "/".join("—" if x is None else str(x) for x in published) if published else "—"
        md.append(f"| {w} | {pen('PT')} | {pen('NN')} | {pen('RND')} | {pen('MAX')} | {over('PT')} | {over('NN')} | "
                  f"{over('MAX')} | {presets} | {pub_s} | {PUBLISHED_OVER.get(w, '—')} |")
    md.append(f"\nWall time {time.time() - t_start:.0f} s on this machine.\n")
    path = out / "report.md"
    path.write_text("\n".join(md) + "\n")
    say.finish()
    return path
