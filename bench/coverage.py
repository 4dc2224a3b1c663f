"""How wrong a model is outside the modes it was fitted on, measured on the twin (AGX Orin, the full
18,096-mode catalog as truth): references fitted on partial grids (the first 210 modes of the
PowerTrain grid in its order, as a cancelled campaign leaves them; 2 cores only; the lower half of
one knob) and on the complete grid, then every catalog mode predicted and scored inside and outside
the model's coverage (``powertrain/coverage.py``).

Prints, per fit: held-out validation MAPE (what `model show` reports), MAPE inside and outside the
coverage (modes not fitted on), the share of modes outside the coverage whose truth lies within the
calibrated 90% bounds and within those bounds widened as predictions widen them, and the factor by
which the bounds must be widened (upper x F, lower / F) for 90% of those modes to hold: beyond a knob
the fit saw move, and beyond a knob it saw at one level only. ``optimize.OUTSIDE_COVERAGE_FACTOR``
and ``NEVER_MOVED_FACTOR`` are chosen from these figures (docs/models.md).

    .venv/bin/python bench/coverage.py [--workloads resnet18,mobilenet_v3] [--epochs 100] [--raw]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jetfleet.controller.powertrain import nn as P  # noqa: E402
from jetfleet.controller.powertrain.calibrate import DEFAULT_CONFIDENCE, Calibration  # noqa: E402
from jetfleet.controller.powertrain.coverage import Coverage  # noqa: E402
from jetfleet.controller.powertrain.optimize import NEVER_MOVED_FACTOR, OUTSIDE_COVERAGE_FACTOR  # noqa: E402
from jetfleet.research.powertrain.evaluate import twin_truth  # noqa: E402
from jetfleet.shared.catalog import get_catalog  # noqa: E402

BOARD = "agx-orin"


def cuts(grid: list, x: np.ndarray) -> dict[str, np.ndarray]:
    """Indices into the PowerTrain grid of each partial fit (and of the complete one)."""
    return {"first 210 in grid order": np.arange(210),
            "2 cores only": np.flatnonzero(x[:, 0] == 2),
            "cores <= 6": np.flatnonzero(x[:, 0] <= 6),
            "CPU <= 1036.8 MHz": np.flatnonzero(x[:, 1] <= 1036.8 + 1e-6),
            "GPU <= 624.75 MHz": np.flatnonzero(x[:, 2] <= 624.75 + 1e-6),
            "EMC <= 665.6 MHz": np.flatnonzero(x[:, 3] <= 665.6 + 1e-6),
            "complete grid": np.arange(len(grid))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", default="resnet18,mobilenet_v3,lstm")
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--raw", action="store_true", help="predict outside the coverage by the network's own "
                    "extrapolation instead of at the nearest covered point")
    args = ap.parse_args()
    cat = get_catalog(BOARD)
    catalog_levels = {k: cat.knob_values(k) for k in ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz")}
    needed: dict[str, list[float]] = {"moved": [], "one level": []}
    print(f"{'workload':<13} {'fit':<24} {'modes':>5} {'val MAPE t/p':>13} {'in MAPE t/p':>13} {'out MAPE t/p':>13} "
          f"{'out n':>6} {'in bounds t/p':>14} {'in widened t/p':>14} {'F moved t/p':>13} {'F one-level t/p':>15}")
    for w in args.workloads.split(","):
        full = twin_truth(BOARD, w, grid="full")
        where = {m: i for i, m in enumerate(full.modes)}
        grid = cat.grid("powertrain")
        gi = np.array([where[m] for m in grid])
        gx = full.x[gi]
        for name, idx in cuts(grid, gx).items():
            fit = gi[idx]
            tn, pn = P.train_references(full.x[fit], [full.time_ms[fit], full.power_w[fit]], epochs=args.epochs)
            cov = Coverage.of([full.modes[i] for i in fit], grid, "the powertrain grid", catalog_levels)
            covered = cov.covered(full.x)
            unfitted = np.ones(len(full.modes), bool)
            unfitted[fit] = False
            row = [f"{w:<13} {name:<24} {len(fit):>5}", f"{tn.val_mape:5.1f} /{pn.val_mape:5.1f}"]
            ins, out, inb, wid, fac = [], [], [], [], []
            o_m = ~covered
            never = cov.never_moved(full.x)[o_m]
            for net, truth in ((tn, full.time_ms), (pn, full.power_w)):
                pred = net.predict(full.x if args.raw else cov.clamp(full.x))
                cal = Calibration(net.val_log_residuals)
                lo, hi = cal.lower_log(DEFAULT_CONFIDENCE), cal.upper_log(DEFAULT_CONFIDENCE)
                r = np.log(truth / pred)
                i_m = covered & unfitted
                ins.append(P.mape(pred[i_m], truth[i_m]) if i_m.any() else float("nan"))
                out.append(P.mape(pred[o_m], truth[o_m]) if o_m.any() else float("nan"))
                need = np.maximum(np.maximum(r[o_m] - hi, lo - r[o_m]), 0.0)   # log factor to reach its bound
                inb.append(float(np.mean(need == 0)) * 100 if o_m.any() else float("nan"))
                chosen = np.log(np.where(never, NEVER_MOVED_FACTOR, OUTSIDE_COVERAGE_FACTOR))
                wid.append(float(np.mean(need <= chosen + 1e-12)) * 100 if o_m.any() else float("nan"))
                for group, mask in (("moved", ~never), ("one level", never)):
                    f = float(np.exp(np.quantile(need[mask], DEFAULT_CONFIDENCE))) if mask.any() else float("nan")
                    fac.append(f)
                    if mask.any():
                        needed[group].append(f)
            cells = [f"{v:5.2f}" if np.isfinite(v) else "    -" for v in fac]   # '-': no such mode outside
            row += [f"{ins[0]:5.1f} /{ins[1]:5.1f}", f"{out[0]:5.1f} /{out[1]:5.1f}", f"{int((~covered).sum()):>6}",
                    f"{inb[0]:5.0f}% /{inb[1]:4.0f}%", f"{wid[0]:5.0f}% /{wid[1]:4.0f}%", f"{cells[0]} /{cells[2]}",
                    f"{cells[1]} /{cells[3]}"]
            print(" ".join(row), flush=True)
    for group, fs in needed.items():
        print(f"\nfactor needed beyond a knob the fit saw {'move' if group == 'moved' else 'at one level only'}, for "
              f"{DEFAULT_CONFIDENCE:.0%} of those modes to fall within their widened bounds: median {np.median(fs):.2f}, "
              f"max {max(fs):.2f} (over {len(fs)} time and power fits)")


if __name__ == "__main__":
    main()
