"""Jobs benchmark: the controller's own cost per training job with many jobs at once. A controller process
and N emulated boards (the real agent code, in a separate process, the boards' clocks accelerated) run N
concurrent power-budget jobs with a calibrated model already in the store (so what is measured is the job
itself: choice, training progress, durable progress, the closed loop's windows and steps). Prints the
controller's CPU seconds per job beside the board time each job covered, and the one-off cost of a
calibrated transfer (5 folds + the final model, time and power), which a job without a model adds once per
(board model, workload).

    python bench/jobs.py [--jobs 100] [--speed 50] [--minibatches 2000] [--epochs 30] [--idle-s 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.fleet import LISTENING, cpu_s, rss_mib  # noqa: E402
from jetfleet.client import OperatorClient  # noqa: E402

BOARD = "orin-nano"
WORKLOAD = "mobilenet_v3"


def run_agents(controller: str, n: int, speed: float) -> None:
    """The agents' process: n AgentLinks on one event loop, until stdin closes."""
    from jetfleet.agent.config import AgentConfig
    from jetfleet.agent.link import AgentLink
    from jetfleet.twin.board import EmulatedBoard

    async def main() -> None:
        stop = asyncio.Event()
        links = [AgentLink(EmulatedBoard(BOARD, i, speed=speed),
                           AgentConfig(controller=controller, device_id=f"bench-{i:04d}", sample_interval_s=0.1))
                 for i in range(n)]
        tasks = [asyncio.create_task(link.run(stop)) for link in links]
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(main())


def start_controller(store_dir: str, *, env: dict[str, str] | None = None,
                     cwd: str | Path | None = None) -> tuple[subprocess.Popen[str], str]:
    """A `jetfleet controller serve` on a free port over ``store_dir`` (another checkout's with ``env``/``cwd``):
    the process and the address it printed. RuntimeError if it did not say it listens."""
    ctl = subprocess.Popen([sys.executable, "-m", "jetfleet.cli", "controller", "serve", "--listen", "127.0.0.1:0",
                            "--store", store_dir], stdout=subprocess.PIPE, text=True, env=env, cwd=cwd)
    assert ctl.stdout is not None
    line = ctl.stdout.readline()
    m = LISTENING.search(line)
    if not m:
        ctl.kill()
        ctl.wait()
        raise RuntimeError(f"controller did not start: {line!r}")
    return ctl, f"127.0.0.1:{m.group(1)}"


def seed_models(store_dir: str, epochs: int) -> float:
    """A reference (``epochs`` of training) and a calibrated model of the target in the store; returns the calibrated
    transfer's CPU seconds."""
    import numpy as np

    from jetfleet.controller.powertrain import nn as P
    from jetfleet.controller.powertrain.artifacts import ModelRepo
    from jetfleet.controller.powertrain.calibrate import fit_calibrated
    from jetfleet.controller.store import open_store
    from jetfleet.research.powertrain.evaluate import twin_truth

    ref = twin_truth(BOARD, "resnet18", seed=5)
    tn, pn = P.train_references(ref.x, [ref.time_ms, ref.power_w], epochs=epochs)
    g = twin_truth(BOARD, WORKLOAD, seed=0)
    idx = np.random.default_rng(0).choice(len(g.modes), 50, replace=False)
    t0 = time.process_time()
    ct = fit_calibrated(tn, g.x[idx], g.time_ms[idx], epochs=10 * epochs)
    cp = fit_calibrated(pn, g.x[idx], g.power_w[idx], epochs=10 * epochs)
    transfer_cpu_s = time.process_time() - t0
    store = open_store(store_dir)
    repo = ModelRepo(store)
    repo.save("reference", BOARD, "resnet18", "", ref.modes, tn, pn, {}, P.NO_DROPOUT, None)
    repo.save("transfer", BOARD, WORKLOAD, "bench", [g.modes[i] for i in idx], ct.net, cp.net, {}, P.NO_DROPOUT,
              (ct.calibration, cp.calibration))
    store.close()
    return transfer_cpu_s


def bench(n: int, speed: float, minibatches: int, epochs: int, idle_s: float) -> None:
    with tempfile.TemporaryDirectory() as d:
        transfer_cpu_s = seed_models(d, epochs)
        ctl, address = start_controller(d)
        agents = subprocess.Popen([sys.executable, __file__, "--run-agents", str(n), "--controller", address,
                                   "--speed", str(speed)], stdin=subprocess.PIPE, text=True)
        try:
            with OperatorClient(address, timeout_s=120) as c:
                t0 = time.monotonic()
                while time.monotonic() - t0 < 300 and sum(dev.online for dev in c.list_devices()) < n:
                    time.sleep(0.5)
                time.sleep(min(2.0, idle_s))
                idle0, w0 = cpu_s(ctl.pid), time.monotonic()
                time.sleep(idle_s)
                idle_cpu_per_s = (cpu_s(ctl.pid) - idle0) / (time.monotonic() - w0)   # telemetry of n boards
                c0, w0 = cpu_s(ctl.pid), time.monotonic()
                ids = [c.submit_job(WORKLOAD, device_id=f"bench-{i:04d}", power_budget_w=10, minibatches=minibatches).job_id
                       for i in range(n)]
                while True:
                    jobs = c.list_jobs()
                    if not any(j.active for j in jobs):
                        break
                    time.sleep(0.5)
                wall = time.monotonic() - w0
                cpu = cpu_s(ctl.pid) - c0
            done = [j for j in jobs if j.job_id in ids and j.state == "done"]
            board_s = sum(j.elapsed_s for j in done)
            jobs_cpu = cpu - idle_cpu_per_s * wall
            steps = sum(len(j.steps) for j in done)
            print(f"jobs={n:4d} speed={speed:g}x  {len(done)}/{n} done in {wall:5.1f} s wall, {board_s / max(1, len(done)):6.0f} "
                  f"board s each; controller CPU {cpu:6.1f} s ({idle_cpu_per_s * 100:4.1f}% idle for telemetry) -> "
                  f"{jobs_cpu / n:5.2f} CPU s per job, {jobs_cpu / max(1.0, board_s) * 3600:5.2f} CPU s per board-hour "
                  f"of training; {steps} loop steps; RSS {rss_mib(ctl.pid):6.0f} MiB", flush=True)
            print(f"calibrated transfer (5 folds + final, time and power, 50 modes, {10 * epochs} epochs): "
                  f"{transfer_cpu_s:.1f} CPU s, once per (board model, workload) without a model", flush=True)
        finally:
            assert agents.stdin is not None
            agents.stdin.close()
            agents.wait(120)
            ctl.terminate()
            ctl.wait(30)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--jobs", type=int, default=100)
    p.add_argument("--speed", type=float, default=50.0, help="board-clock acceleration of the emulated boards")
    p.add_argument("--minibatches", type=int, default=2000)
    p.add_argument("--epochs", type=int, default=30, help="the seeded reference's training epochs (x10: transfer)")
    p.add_argument("--idle-s", type=float, default=5.0, help="seconds the idle controller's CPU is measured")
    p.add_argument("--run-agents", type=int, default=0)
    p.add_argument("--controller", default="")
    a = p.parse_args()
    if a.run_agents:
        run_agents(a.controller, a.run_agents, a.speed)
        return
    print(f"jobs benchmark on {os.cpu_count()} cores: {a.jobs} {WORKLOAD} jobs under 10 W on emulated {BOARD} boards")
    bench(a.jobs, a.speed, a.minibatches, a.epochs, a.idle_s)


if __name__ == "__main__":
    main()
