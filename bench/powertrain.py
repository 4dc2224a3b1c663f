"""PowerTrain benchmark on this CPU: reference training on 4,368 modes, transfer on 50, prediction of
the 18,096-mode AGX Orin grid, Pareto front + choice. Prints wall times (targets: 60 s, 10 s, 50 ms, 20 ms; the
training targets scale with --epochs and --transfer-epochs).

    python bench/powertrain.py [--epochs 100] [--transfer-epochs 300] [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jetfleet.controller.powertrain import nn as P  # noqa: E402
from jetfleet.controller.powertrain.optimize import Predictions, choose, pareto_front  # noqa: E402
from jetfleet.research.powertrain.evaluate import twin_truth  # noqa: E402
from jetfleet.shared.catalog import get_catalog  # noqa: E402


def timed(fn, repeats: int = 1) -> tuple[float, object]:
    walls, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        walls.append(time.perf_counter() - t)
    return statistics.median(walls), out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=100, help="reference training epochs (the target is for 100)")
    p.add_argument("--transfer-epochs", type=int, default=300, help="transfer epochs (the target is for 300)")
    p.add_argument("--repeat", type=int, default=20, help="timed repeats of the fast steps (median)")
    a = p.parse_args()
    ref = twin_truth("agx-orin", "resnet18")
    tgt = twin_truth("agx-orin", "mobilenet_v3")
    wall, time_net = timed(lambda: P.train_reference(ref.x, ref.time_ms, epochs=a.epochs))
    wall_p, _ = timed(lambda: P.train_reference(ref.x, ref.power_w, epochs=a.epochs))
    target_s = 60 * a.epochs / 100
    print(f"reference training, 4,368 modes, {a.epochs} epochs: time net {wall:.1f} s, power net {wall_p:.1f} s "
          f"(pair {wall + wall_p:.1f} s; target {target_s:g} s, ratio {(wall + wall_p) / target_s:.2f})")
    idx = np.random.default_rng(0).choice(len(tgt.modes), 50, replace=False)
    wall, _ = timed(lambda: P.transfer(time_net, tgt.x[idx], tgt.time_ms[idx],  # type: ignore[arg-type]
                                       epochs=a.transfer_epochs), 3)
    target_s = 10 * a.transfer_epochs / 300
    print(f"transfer on 50 modes, {a.transfer_epochs} epochs: {wall:.2f} s per network (pair {2 * wall:.2f} s; "
          f"target {target_s:g} s, ratio {2 * wall / target_s:.2f})")
    cat = get_catalog("agx-orin")
    modes = cat.grid("full")
    x = np.array([m.as_tuple() for m in modes], float)
    wall, t = timed(lambda: time_net.predict(x), a.repeat)  # type: ignore[attr-defined]
    print(f"prediction of all {len(modes)} AGX Orin modes: {wall * 1e3:.1f} ms per network "
          f"(pair {2 * wall * 1e3:.1f} ms; target 50 ms, ratio {2 * wall * 1e3 / 50:.2f})")
    power = np.asarray(t) * 0 + np.linspace(10, 60, len(modes))
    preds = Predictions(modes, np.asarray(t), power)
    wall, _ = timed(lambda: (pareto_front(preds.time_ms, preds.power_w), choose(preds, power_budget_w=30)),
                    max(1, a.repeat * 5 // 2))
    print(f"Pareto front + choice over {len(modes)} modes: {wall * 1e3:.2f} ms (target 20 ms, ratio "
          f"{wall * 1e3 / 20:.2f})")


if __name__ == "__main__":
    main()
