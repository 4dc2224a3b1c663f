"""PowerTrain benchmark on this CPU: reference training on 4,368 modes, transfer on 50, prediction of
the 18,096-mode AGX Orin grid, Pareto front + choice. Prints wall times (targets: 60 s, 10 s, 50 ms, 20 ms)."""

from __future__ import annotations

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
    ref = twin_truth("agx-orin", "resnet18")
    tgt = twin_truth("agx-orin", "mobilenet_v3")
    wall, time_net = timed(lambda: P.train_reference(ref.x, ref.time_ms))
    wall_p, _ = timed(lambda: P.train_reference(ref.x, ref.power_w))
    print(f"reference training, 4,368 modes, 100 epochs: time net {wall:.1f} s, power net {wall_p:.1f} s "
          f"(pair {wall + wall_p:.1f} s; target 60 s)")
    idx = np.random.default_rng(0).choice(len(tgt.modes), 50, replace=False)
    wall, _ = timed(lambda: P.transfer(time_net, tgt.x[idx], tgt.time_ms[idx]), 3)  # type: ignore[arg-type]
    print(f"transfer on 50 modes, 300 epochs: {wall:.2f} s per network (pair {2 * wall:.2f} s; target 10 s)")
    cat = get_catalog("agx-orin")
    modes = cat.grid("full")
    x = np.array([m.as_tuple() for m in modes], float)
    wall, t = timed(lambda: time_net.predict(x), 20)  # type: ignore[attr-defined]
    print(f"prediction of all {len(modes)} AGX Orin modes: {wall * 1e3:.1f} ms per network "
          f"(pair {2 * wall * 1e3:.1f} ms; target 50 ms)")
    p = np.asarray(t) * 0 + np.linspace(10, 60, len(modes))
    preds = Predictions(modes, np.asarray(t), p)
    wall, _ = timed(lambda: (pareto_front(preds.time_ms, preds.power_w), choose(preds, power_budget_w=30)), 50)
    print(f"Pareto front + choice over {len(modes)} modes: {wall * 1e3:.2f} ms (target 20 ms)")


if __name__ == "__main__":
    main()
