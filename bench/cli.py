"""CLI start-up: `jetfleet --help` against `python -c pass` of the same interpreter (the limit is 2x), and a few
commands that load one module each, for comparison. Runs interleaved so drift on a busy machine hits both
alike; prints medians of N runs (default 21) of the wall time (the figure judged) and of the CPU time the
process used (user + system: less sensitive to other processes on a shared machine), with the limit and ratio.

    python bench/cli.py [N]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

LIMIT = 2.0
ENTRY = Path(sys.executable).with_name("jetfleet")   # the console script pip installed beside this Python


def wall_ms(cmd: list[str]) -> tuple[float, float]:
    """(wall ms, CPU ms) of one run of ``cmd``."""
    before = os.times()
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = (time.perf_counter() - t) * 1e3
    after = os.times()
    cpu = (after.children_user - before.children_user + after.children_system - before.children_system) * 1e3
    return wall, cpu


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    jetfleet = [str(ENTRY)] if ENTRY.exists() else [sys.executable, "-c", "from jetfleet.cli.main import cli; cli()"]
    cases = {"python -c pass": [sys.executable, "-c", "pass"],
             "jetfleet --help": [*jetfleet, "--help"],
             "jetfleet devices ls --help": [*jetfleet, "devices", "ls", "--help"],
             "jetfleet modes agx-orin --grid presets": [*jetfleet, "modes", "agx-orin", "--grid", "presets"],
             "jetfleet config show": [*jetfleet, "config", "show"]}
    for cmd in cases.values():   # warm the file cache and any .pyc writes
        wall_ms(cmd)
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
    for _ in range(n):
        for name, cmd in cases.items():
            times[name].append(wall_ms(cmd))
    base = statistics.median(w for w, _ in times["python -c pass"])
    base_cpu = statistics.median(c for _, c in times["python -c pass"])
    print(f"CLI start-up, median of {n} runs ({'console script ' + str(ENTRY) if ENTRY.exists() else 'python -c'}); "
          f"load average {os.getloadavg()[0]:.1f}")
    for name, ts in times.items():
        wall = statistics.median(w for w, _ in ts)
        cpu = statistics.median(c for _, c in ts)
        note = ""
        if name == "jetfleet --help":
            note = f"  limit {LIMIT:.1f}x = {LIMIT * base:.0f} ms: {'holds' if wall <= LIMIT * base else 'MISSED'}"
        print(f"  {name:<40} wall {wall:7.1f} ms {wall / base:4.2f}x   cpu {cpu:6.1f} ms {cpu / base_cpu:4.2f}x{note}")


if __name__ == "__main__":
    main()
