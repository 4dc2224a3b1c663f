"""Board-layer benchmark: telemetry sample cost (real backend on a fixture tree, beside plain reads of
the same files in the same run: the limit is 1.5 x plain open/read), the twin's sample, and the wall
time for the twin to measure every PowerTrain mode. Prints figures; asserts nothing.

    python bench/boards.py [--calls 500] [--every 1]   # --every K: every K-th PowerTrain mode on the twin
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jetfleet.agent.device.jetson import JetsonBoard, JetsonOptions  # noqa: E402
from jetfleet.agent.device.telemetry import SysfsTelemetry  # noqa: E402
from jetfleet.twin.board import EmulatedBoard  # noqa: E402
from jetfleet.twin.measure import measure_on_twin  # noqa: E402
from tests.jetson_trees import build_tree, install_tools  # noqa: E402


def per_call_us(fn, n: int) -> tuple[float, float]:
    samples = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        samples.append((time.perf_counter() - t) / n * 1e6)
    return statistics.median(samples), min(samples)


SAMPLE_LIMIT = 1.5   # a real-backend sample within 1.5 x plain open/read of the files it reads


def plain_reads(paths: list[str]) -> None:
    """The floor in Python: open, read and close every file a sample reads, parsing nothing."""
    for p in paths:
        with open(p, "rb") as f:
            f.read()


def os_reads(paths: list[str]) -> None:
    """The same with os.open/os.read/os.close."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        os.read(fd, 4096)
        os.close(fd)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=500, help="samples timed per repeat (5 repeats)")
    p.add_argument("--every", type=int, default=1, help="the twin measures every K-th PowerTrain mode")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        for layout in ("orin-jp6", "xavier-jp4"):
            root = Path(d) / layout
            build_tree(root, layout)
            board = JetsonBoard(root, JetsonOptions(command_path=install_tools(root)))
            files = board.telemetry.files() if isinstance(board.telemetry, SysfsTelemetry) else []
            med, best = per_call_us(board.sample, a.calls)
            plain, _ = per_call_us(lambda files=files: plain_reads(files), a.calls)
            raw, _ = per_call_us(lambda files=files: os_reads(files), a.calls)
            ratio = med / plain
            print(f"real backend sample ({layout} fixture tree, {len(files)} files): median {med:.0f} us (best "
                  f"{best:.0f}); plain open/read of the same files {plain:.0f} us, os.read {raw:.0f} us; ratio to "
                  f"plain {ratio:.2f} (limit <= {SAMPLE_LIMIT}: {'holds' if ratio <= SAMPLE_LIMIT else 'MISSED'})")
            modes = board.catalog.grid("powertrain")[::97]
            t = time.perf_counter()
            for m in modes:
                board.apply_mode(m)
            per = (time.perf_counter() - t) / len(modes) * 1e3
            t = time.perf_counter()
            board.close()
            print(f"real backend mode change, sysfs route ({layout}, {len(modes)} modes, pre-flight + writes + "
                  f"read-back; the first records the found state): {per:.1f} ms each; restore on close "
                  f"{(time.perf_counter() - t) * 1e3:.0f} ms")
    twin = EmulatedBoard("agx-orin", 0)
    twin.run_minibatches("resnet18", 100)
    med, best = per_call_us(twin.sample, 4 * a.calls)
    print(f"twin sample (agx-orin, during a run): median {med:.1f} us, best {best:.1f} us")
    for model in ("agx-orin", "agx-xavier"):
        board = EmulatedBoard(model, 0)
        modes = board.catalog.grid("powertrain")[::a.every]
        t = time.perf_counter()
        for mode in modes:
            measure_on_twin(board, "resnet18", mode, 40)
        wall = time.perf_counter() - t
        print(f"twin measures {len(modes)} powertrain modes of {model}, resnet18 x 40 minibatches: "
              f"{wall:.2f} s ({wall / len(modes) * 1e3:.2f} ms per mode)")


if __name__ == "__main__":
    main()
