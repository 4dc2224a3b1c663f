"""Fleet benchmark: N emulated agents (the real agent code, in a separate process) against a
controller process; each agent samples at 10 Hz and sends 1 s batches. Prints telemetry samples/s
ingested, p50/p99 round trip of `mode set` under that load, controller CPU % and RSS.

    python bench/fleet.py [--agents 100,500,1000] [--window 10] [--mode-sets 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jetfleet.controller.client import OperatorClient  # noqa: E402
from tests.harness import free_port  # noqa: E402

MODELS = ["agx-orin", "agx-xavier", "orin-nano"]
LOW_PRESET = {"agx-orin": "15W", "agx-xavier": "MODE_15W", "orin-nano": "7W"}


def run_agents(controller: str, n: int) -> None:
    """The agents' process: n AgentLinks on one event loop, until stdin closes."""
    from jetfleet.agent.config import AgentConfig
    from jetfleet.agent.device.emulated import EmulatedBoard
    from jetfleet.agent.link import AgentLink

    async def main() -> None:
        stop = asyncio.Event()
        links = [AgentLink(EmulatedBoard(MODELS[i % 3], i),
                           AgentConfig(controller=controller, device_id=f"bench-{i:04d}", sample_interval_s=0.1))
                 for i in range(n)]
        tasks = [asyncio.create_task(link.run(stop)) for link in links]
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)  # parent closes stdin to stop us
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(main())


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    m = re.search(r"VmRSS:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return int(m.group(1)) / 1024 if m else float("nan")


LAST_SCRAPE: dict[str, float] = {}


def scrape_samples(metrics_port: int) -> float:
    t = time.perf_counter()
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    LAST_SCRAPE.update(ms=(time.perf_counter() - t) * 1e3, bytes=len(text))
    m = re.search(r"^jetfleet_telemetry_samples_total ([0-9.e+]+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def bench(n: int, window_s: float, mode_sets: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        mport = free_port()
        ctl = subprocess.Popen([sys.executable, "-m", "jetfleet.cli", "controller", "serve", "--listen", "127.0.0.1:0",
                                "--store", d, "--metrics-port", str(mport)], stdout=subprocess.PIPE, text=True)
        assert ctl.stdout is not None
        m = re.search(r":(\d+),", ctl.stdout.readline())
        assert m
        address = f"127.0.0.1:{m.group(1)}"
        agents = subprocess.Popen([sys.executable, __file__, "--run-agents", str(n), "--controller", address],
                                  stdin=subprocess.PIPE, text=True)
        try:
            with OperatorClient(address, timeout_s=60) as c:
                t0 = time.monotonic()
                online = 0
                while time.monotonic() - t0 < 180:
                    online = sum(dev.online for dev in c.list_devices())
                    if online >= n:
                        break
                    time.sleep(0.5)
                connect_s = time.monotonic() - t0
                time.sleep(2.0)  # let the first batches settle
                s0, c0, w0 = scrape_samples(mport), cpu_seconds(ctl.pid), time.monotonic()
                time.sleep(window_s)
                s1, c1, w1 = scrape_samples(mport), cpu_seconds(ctl.pid), time.monotonic()
                lat = []
                for i in range(mode_sets):
                    dev = f"bench-{(i * 7) % n:04d}"
                    t = time.perf_counter()
                    c.set_mode(dev, "MAXN" if i % 2 else LOW_PRESET[MODELS[(i * 7) % n % 3]])
                    lat.append((time.perf_counter() - t) * 1e3)
            lat.sort()
            rate = (s1 - s0) / (w1 - w0)
            print(f"N={n:5d}  online {online}/{n} after {connect_s:5.1f} s  ingest {rate:8.0f} samples/s"
                  f" (expected {n * 10})  mode set p50 {statistics.median(lat):6.1f} ms  "
                  f"p99 {lat[int(0.99 * (len(lat) - 1))]:6.1f} ms  controller CPU {(c1 - c0) / (w1 - w0) * 100:5.1f} %"
                  f"  RSS {rss_mib(ctl.pid):6.1f} MiB  /metrics {LAST_SCRAPE['bytes'] / 1024:.0f} KiB in "
                  f"{LAST_SCRAPE['ms']:.0f} ms", flush=True)
        finally:
            assert agents.stdin is not None
            agents.stdin.close()
            agents.wait(60)
            ctl.terminate()
            ctl.wait(30)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--agents", default="100,500,1000")
    p.add_argument("--window", type=float, default=10.0)
    p.add_argument("--mode-sets", type=int, default=200)
    p.add_argument("--run-agents", type=int, default=0)
    p.add_argument("--controller", default="")
    a = p.parse_args()
    if a.run_agents:
        run_agents(a.controller, a.run_agents)
        return
    print(f"fleet benchmark on {os.cpu_count()} cores: agents sample at 10 Hz, batch every 1 s")
    for n in (int(x) for x in a.agents.split(",")):
        bench(n, a.window, a.mode_sets)


if __name__ == "__main__":
    main()
