"""Job templates (``job submit --template``): what launching and stopping cost on the agent. The real executor,
session socket and launcher with an emulated AGX Xavier at infinite speed; the launched command is a small Python
script that joins its session and steps (no torch), with a child that ignores SIGTERM. Prints: launch -> the
board's first counted step; cancel -> the whole process group gone (SIGTERM, then SIGKILL after the grace); and
how fast the output tail is read from a process that floods stdout, with the agent's memory growth. Asserts nothing.

    python bench/launch.py [--runs 5] [--grace 0.5] [--flood-lines 2000000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jetfleet.agent.executor import CommandExecutor  # noqa: E402
from jetfleet.agent.launcher import Launcher  # noqa: E402
from jetfleet.agent.sessions import SessionConfig, SessionServer  # noqa: E402
from jetfleet.agent.templates import parse_templates  # noqa: E402
from jetfleet.shared.proto import agent_pb2  # noqa: E402
from jetfleet.twin import EmulatedBoard  # noqa: E402
from tests.waiting import wait_until  # noqa: E402

TRAIN = """
import os, subprocess, sys
sys.path.insert(0, {root!r})
from jetfleet.session import Session
subprocess.Popen([sys.executable, "-c", "import signal, time\\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
                  "print('child up', flush=True)\\nwhile True: time.sleep(1)"])
with Session(os.environ["JETFLEET_WORKLOAD"]) as s:
    while True:
        s.step()
"""


def launch_and_cancel(tmp: Path, runs: int, grace_s: float) -> tuple[list[float], list[float]]:
    script = tmp / "train.py"
    script.write_text(TRAIN.format(root=str(ROOT)))
    sock = str(tmp / "s.sock")
    board = EmulatedBoard("agx-xavier", 5, speed=float("inf"))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def run(coro):
        return asyncio.run_coroutine_threadsafe(coro, loop)

    config = parse_templates({"kill_grace_s": grace_s, "templates": {"resnet18": {"command": [sys.executable,
                                                                                             str(script)]}}},
                             euid=os.geteuid())
    launcher = Launcher(config, sock)
    holder: list[CommandExecutor] = []
    server = SessionServer(board, SessionConfig(path=sock), busy=lambda: holder[0].busy_with_own_work)

    async def make() -> CommandExecutor:
        return CommandExecutor(board, sessions=server, launcher=launcher)

    executor = run(make()).result(30)
    holder.append(executor)
    run(server.start()).result(30)
    started, stopped = [], []
    try:
        for i in range(runs):
            t0 = time.perf_counter()
            result = run(executor.execute(agent_pb2.Command(command_id=f"c{i}", run_training=agent_pb2.RunTraining(
                workload="resnet18", minibatches=10**5, attach=True, attach_timeout_s=60,
                launch=agent_pb2.LaunchTemplate(template="resnet18", launch_id=f"j{i}", minibatches=10**5)))))
            wait_until(lambda i=i: executor.trained.get(f"c{i}", 0) > 0, 60, "the first step")
            started.append(time.perf_counter() - t0)
            wait_until(lambda i=i: "child up" in launcher.launches[f"j{i}"].lines(), 60, "the stubborn child")
            t1 = time.perf_counter()
            run(executor.execute(agent_pb2.Command(command_id=f"x{i}", cancel=agent_pb2.Cancel(
                target_command_id=f"j{i}")))).result(60)
            stopped.append(time.perf_counter() - t1)
            result.result(60)
    finally:
        executor.close()
        run(launcher.stop_all("the bench ended")).result(60)
        run(server.stop()).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
    return started, stopped


async def flood(lines: int) -> tuple[float, int, int]:
    code = f"import sys\nfor i in range({lines}):\n    sys.stdout.write('x' * 1000 + ' line %d\\n' % i)"
    config = parse_templates({"templates": {"flood": {"command": [sys.executable, "-c", code]}}}, euid=os.geteuid())
    launcher = Launcher(config, "/nonexistent.sock")
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    launched = launcher.ensure(agent_pb2.LaunchTemplate(template="flood", launch_id="f", minibatches=1))
    await launcher.wait_exit(launched, 600)
    launched.drain(60)
    return time.perf_counter() - t0, len(launched.tail), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0


def main() -> None:
    """Print the figures."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--grace", type=float, default=0.5, help="kill_grace_s")
    ap.add_argument("--flood-lines", type=int, default=2_000_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        started, stopped = launch_and_cancel(Path(d), args.runs, args.grace)
    print(f"launch -> first step counted on the board: median {statistics.median(started) * 1e3:.0f} ms, max "
          f"{max(started) * 1e3:.0f} ms ({args.runs} runs; the script imports jetfleet.session, no torch)")
    print(f"cancel -> process group gone (a child ignoring SIGTERM, kill_grace_s {args.grace:g}): median "
          f"{statistics.median(stopped) * 1e3:.0f} ms, max {max(stopped) * 1e3:.0f} ms")
    seconds, kept, grew_kb = asyncio.run(flood(args.flood_lines))
    print(f"output tail: {args.flood_lines:,} lines of 1 kB read in {seconds:.1f} s "
          f"({args.flood_lines / seconds:,.0f} lines/s), {kept} lines kept, agent max RSS grew {grew_kb} kB")


if __name__ == "__main__":
    main()
