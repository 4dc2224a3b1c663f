"""Board-layer benchmark: telemetry sample cost (real backend on a fixture tree, twin) and the
wall time for the twin to measure every PowerTrain mode. Prints figures; asserts nothing."""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jetfleet.agent.device.emulated import EmulatedBoard  # noqa: E402
from jetfleet.agent.device.jetson import JetsonBoard  # noqa: E402
from jetfleet.agent.measure import measure_on_twin  # noqa: E402
from tests.jetson_trees import build_tree  # noqa: E402


def per_call_us(fn, n: int) -> tuple[float, float]:
    samples = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t) / n * 1e6)
    return statistics.median(samples), min(samples)


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        for layout in ("orin-jp6", "xavier-jp4"):
            root = Path(d) / layout
            build_tree(root, layout)
            board = JetsonBoard(root)
            med, best = per_call_us(board.sample, 500)
            print(f"real backend sample ({layout} fixture tree): median {med:.0f} us, best {best:.0f} us")
    twin = EmulatedBoard("agx-orin", 0)
    twin.run_minibatches("resnet18", 100)
    med, best = per_call_us(twin.sample, 2000)
    print(f"twin sample (agx-orin, during a run): median {med:.1f} us, best {best:.1f} us")
    for model in ("agx-orin", "agx-xavier"):
        board = EmulatedBoard(model, 0)
        modes = board.catalog.grid("powertrain")
        t = time.perf_counter()
        for mode in modes:
            measure_on_twin(board, "resnet18", mode, 40)
        wall = time.perf_counter() - t
        print(f"twin measures {len(modes)} powertrain modes of {model}, resnet18 x 40 minibatches: "
              f"{wall:.2f} s ({wall / len(modes) * 1e3:.2f} ms per mode)")


if __name__ == "__main__":
    main()
