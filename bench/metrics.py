"""Cost of the metrics endpoints: the agent's /metrics while telemetry updates it at 10 Hz, and the
controller's /metrics with N boards' power relayed (default 1000). Prints scrape time and bytes."""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jetfleet.agent.metrics import AgentMetrics  # noqa: E402
from jetfleet.controller.metrics import ControllerMetrics  # noqa: E402
from jetfleet.shared.metrics_http import MetricsHttpConfig, MetricsServer  # noqa: E402
from jetfleet.twin.board import EmulatedBoard  # noqa: E402


def scrape_stats(port: int, n: int = 200) -> tuple[float, float, int]:
    times, size = [], 0
    for _ in range(n):
        t = time.perf_counter()
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
        times.append((time.perf_counter() - t) * 1e3)
        size = len(body)
    times.sort()
    return statistics.median(times), times[int(0.99 * (len(times) - 1))], size


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("boards", type=int, nargs="?", default=1000, help="boards relayed by the controller's /metrics")
    p.add_argument("--scrapes", type=int, default=200, help="scrapes of the agent's /metrics (half as many of the "
                   "controller's)")
    a = p.parse_args()
    board = EmulatedBoard("agx-orin", 0)
    metrics = AgentMetrics(board.catalog, "agx-orin-0")
    metrics.set_mode(board.read_mode())
    stop = threading.Event()
    observe = metrics.minibatch_observer("resnet18")

    fed: list[BaseException] = []

    def feed() -> None:  # 10 Hz telemetry, and a workload's minibatches
        try:
            while not stop.is_set():
                metrics.observe(board.sample())
                observe(0.055)
                stop.wait(0.1)
        except BaseException as e:   # the figures would be of an endpoint no longer fed: the benchmark fails
            fed.append(e)

    threading.Thread(target=feed, daemon=True).start()
    server = MetricsServer(metrics.registry, MetricsHttpConfig(address="127.0.0.1")).start()
    time.sleep(0.5)
    p50, p99, size = scrape_stats(server.port, a.scrapes)
    print(f"agent /metrics at 10 Hz telemetry: {size} bytes, scrape p50 {p50:.2f} ms, p99 {p99:.2f} ms")
    stop.set()
    server.stop()
    if fed:
        raise RuntimeError(f"the agent's metrics stopped being fed: {fed[0]!r}") from fed[0]
    n = a.boards
    cm = ControllerMetrics()
    models = ("agx-orin", "agx-xavier", "orin-nano")
    for i in range(n):   # each board as a batch leaves it: power, samples, online
        series = cm.telemetry.board(f"bench-{i:04d}", models[i % 3])
        series.power_w, series.samples = 20.0 + i % 30, 10
        cm.board_online.labels(f"bench-{i:04d}", models[i % 3]).set(1)
    for model in models:
        cm.agents.labels(model, "online").set(n // 3)
    server = MetricsServer(cm.registry, MetricsHttpConfig(address="127.0.0.1")).start()
    p50, p99, size = scrape_stats(server.port, max(1, a.scrapes // 2))
    print(f"controller /metrics with {n} boards: {size} bytes ({size / n:.0f} per board), scrape p50 {p50:.1f} ms, "
          f"p99 {p99:.1f} ms")
    server.stop()


if __name__ == "__main__":
    main()
