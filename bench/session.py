"""Training-session overhead (jetfleet.session): what ``step()`` costs the operator's loop, against an agent in a
process of its own (`jetfleet agent run --session-socket`, an emulated AGX Xavier at infinite speed, so the agent's
pacing is the twin's arithmetic only), beside a plain loop and an unmanaged session; and one real training step of
a small MLP on this CPU, for the ratio. Prints figures; asserts nothing (target: <= 50 us per call and <= 1% of a
step).

    python bench/session.py [--calls 20000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jetfleet.session import Session  # noqa: E402
from tests import procs  # noqa: E402
from tests.waiting import wait_until  # noqa: E402

LIMIT_US = 50.0
LIMIT_PCT = 1.0


def per_call_us(step, calls: int, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(calls):
            step()
        samples.append((time.perf_counter() - t) / calls * 1e6)
    return statistics.median(samples)


def mlp_step_us(repeat: int) -> float:
    """One optimiser step of a 64-256-10 MLP on a minibatch of 32 on this CPU (the example's size)."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))

    def step() -> None:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    return per_call_us(step, 200, repeat)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sock = Path(tmp) / "session.sock"
        agent = procs.spawn([sys.executable, "-m", "jetfleet.cli", "agent", "run", "--device",
                             "emulated:agx-xavier:0", "--speed", "inf", "--controller", "127.0.0.1:9",
                             "--session-socket", str(sock)], stdout=procs.DEVNULL, stderr=procs.DEVNULL)
        try:
            wait_until(sock.exists, 60, "the agent's session socket")
            plain = per_call_us(lambda: None, args.calls, args.repeat)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                unmanaged = Session("resnet18", path=str(Path(tmp) / "none.sock"), strict=False)
            free = per_call_us(unmanaged.step, args.calls, args.repeat)
            with Session("resnet18", path=str(sock)) as s:
                managed = per_call_us(s.step, args.calls, args.repeat)
                flushes = []
                for _ in range(50):
                    s.step()
                    t = time.perf_counter()
                    s.flush()
                    flushes.append((time.perf_counter() - t) * 1e6)
        finally:
            agent.end()
    step_us = mlp_step_us(args.repeat)
    api = managed - plain
    print(f"plain loop: {plain:.2f} us per iteration")
    print(f"unmanaged session step(): {free - plain:.2f} us per call")
    print(f"step() with an agent: {api:.2f} us per call (limit {LIMIT_US:g} us, ratio {api / LIMIT_US:.2f}); "
          f"one report to the agent: median {statistics.median(flushes):.0f} us, sent every 64 steps or 1 s")
    print(f"MLP training step on this CPU: {step_us:.0f} us; step() is {100 * api / step_us:.3f}% of it "
          f"(limit {LIMIT_PCT:g}%)")


if __name__ == "__main__":
    main()
