"""`make gpu-check`: the training session's step timing on a real CUDA GPU. The example's own training
(examples/own-training: the digits MLP) and each built-in workload's training loop (jetfleet.agent.workloads.training,
published input shapes) run on CUDA with a ``jetfleet.session.Session`` attached to an agent's session socket on an
emulated board (the real ``SessionServer`` in this process), and print, per workload:

- the session's step time: the median of the steps the agent asked to have timed (every step here), which the
  session times by synchronising CUDA at ``step()`` — against the CUDA-event time between the same step boundaries
  (an event recorded just before each ``step()``, read after the run: no synchronisation inside the loop);
- the API's overhead per step: the wall time of N steps with a session at the agent's default settings (reports
  every 64 steps, 32 timed every 8 reports) less the same N steps without one (the least of ``--repeat`` runs of
  each, alternated), per step, and as a share of a step.

Exits 0 after printing the table; exits 3 with a message naming what is missing when this machine has no CUDA device
(nothing is measured: there is no fallback to the CPU, whose timing needs no synchronisation). At most ~5 minutes on
one GPU at the default sizes.

    python bench/gpu_check.py [--steps 100] [--warmup 20] [--repeat 2] [--workloads digits-mlp,resnet18,...]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

EXIT_NO_CUDA = 3
EXAMPLE = ROOT / "examples" / "own-training" / "train.py"
BUILTINS = ("resnet18", "mobilenet_v3", "yolo_v8n", "bert_base", "lstm")


class Agent:
    """The agent's session socket (the real SessionServer) on an emulated board, on an event loop thread."""

    def __init__(self, path: Path, **config: Any) -> None:
        from jetfleet.agent.sessions import SessionConfig, SessionServer
        from jetfleet.twin import EmulatedBoard

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = SessionServer(EmulatedBoard("agx-orin", 0, speed=float("inf")),
                                    SessionConfig(path=str(path), **config))
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(30)

    def close(self) -> None:
        try:
            asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


def example_loop(torch: Any, dev: Any) -> tuple[Callable[[], None], Any, Any]:
    """The example's training step (its data, its MLP, its optimiser) on ``dev``; its model and one minibatch."""
    spec = importlib.util.spec_from_file_location("own_training_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    ex = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ex)
    loader, _, _ = ex.data(32)
    model = ex.mlp().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    it = _forever(loader)

    def step() -> None:
        xb, yb = next(it)
        xb, yb = xb.to(dev, non_blocking=True), yb.to(dev, non_blocking=True)
        opt.zero_grad()
        loss_fn(model(xb), yb).backward()
        opt.step()

    xb, _ = next(iter(loader))
    return step, model, xb


def builtin_loop(torch: Any, dev: Any, name: str) -> tuple[Callable[[], None], None, None]:
    """A built-in workload's training step at its published shapes (the agent's own model, data and loss)."""
    from torch.utils.data import DataLoader

    from jetfleet.agent.workloads.training import SyntheticSamples, build_model, shapes, training_loss
    from jetfleet.shared import defaults

    model = build_model(name).to(dev).train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    data = SyntheticSamples(shapes(name, 1.0), 100_000 * defaults.MINIBATCH_SIZE)
    it = iter(DataLoader(data, batch_size=defaults.MINIBATCH_SIZE, num_workers=defaults.WORKERS, drop_last=True,
                         pin_memory=True))

    def step() -> None:
        x, y = next(it)
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        training_loss(name, model(x), y).backward()
        opt.step()

    return step, None, None


def _forever(loader: Any) -> Iterator[Any]:
    while True:
        yield from loader


def run(torch: Any, step: Callable[[], None], n: int, session: Any = None) -> tuple[float, list[float]]:
    """``n`` steps: wall seconds (synchronised once at the end) and the CUDA-event seconds between step boundaries."""
    events = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
    torch.cuda.synchronize()
    start = time.perf_counter()
    events[0].record()
    for i in range(n):
        step()
        events[i + 1].record()
        if session is not None:
            session.step()
    torch.cuda.synchronize()
    wall = time.perf_counter() - start
    return wall, [events[i].elapsed_time(events[i + 1]) / 1e3 for i in range(n)]


def check(name: str, torch: Any, dev: Any, steps: int, warmup: int, sock_dir: Path, repeat: int = 2) -> str:
    from jetfleet.session import Session

    step, model, example = example_loop(torch, dev) if name == "digits-mlp" else builtin_loop(torch, dev, name)
    run(torch, step, warmup)
    kw: dict[str, Any] = {"model": model, "example_input": example} if model is not None else {}
    # the session's timing: the agent asks for every step to be timed (one by one, or in groups of >= 5 ms)
    timing = Agent(sock_dir / f"{name}-t.sock", time_steps=10 * steps, time_every=1, batch_steps=8)
    try:
        with Session(name, path=str(sock_dir / f"{name}-t.sock"), **kw) as s:
            _, cuda_s = run(torch, step, steps, s)
        (board,) = timing.server.sessions.values()
        session_s = sorted(sec / k for k, sec in board.timed)
    finally:
        timing.close()
    # the overhead: the agent's default settings (a few steps timed now and then), against no session; the least
    # of ``repeat`` runs each, alternated (a step's time varies more than the overhead)
    bare, with_ = [], []
    default = Agent(sock_dir / f"{name}-d.sock")
    try:
        with Session(name, path=str(sock_dir / f"{name}-d.sock"), **kw) as s:
            for _ in range(repeat):
                bare.append(run(torch, step, steps)[0])
                with_.append(run(torch, step, steps, s)[0])
    finally:
        default.close()
    bare_wall, with_wall = min(bare), min(with_)
    sess_ms = statistics.median(session_s) * 1e3 if session_s else float("nan")
    cuda_ms = statistics.median(cuda_s) * 1e3
    over_us = (with_wall - bare_wall) / steps * 1e6
    return (f"{name:<13} {sess_ms:9.3f} {cuda_ms:9.3f} {100 * (sess_ms / cuda_ms - 1):+7.1f}%  "
            f"{bare_wall / steps * 1e3:9.3f} {over_us:+10.1f} {100 * over_us / (bare_wall / steps * 1e6):+7.2f}%")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=2, help="runs with and without a session, the least of each")
    ap.add_argument("--workloads", default=",".join(("digits-mlp",) + BUILTINS))
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print(f"gpu-check: no CUDA device here (torch {torch.__version__}, built with CUDA "
              f"{torch.version.cuda or 'none'}; torch.cuda.is_available() is False): nothing was measured. Run it on "
              "a machine with an NVIDIA GPU and a CUDA build of torch.", file=sys.stderr)
        return EXIT_NO_CUDA
    names = [w for w in args.workloads.split(",") if w]
    if "digits-mlp" in names and importlib.util.find_spec("sklearn") is None:
        print("gpu-check: the example's dataset ships with scikit-learn, which is not installed: skipping digits-mlp",
              file=sys.stderr)
        names.remove("digits-mlp")
    dev = torch.device("cuda")
    print(f"gpu-check on {torch.cuda.get_device_name(0)}, torch {torch.__version__} (CUDA {torch.version.cuda}); "
          f"{args.steps} steps per run after {args.warmup} of warm-up; an emulated agx-orin agent in this process")
    print(f"{'workload':<13} {'session':>9} {'CUDA ev.':>9} {'differ':>8}  {'step':>9} {'overhead':>10} {'share':>8}")
    print(f"{'':<13} {'ms/step':>9} {'ms/step':>9} {'':>8}  {'ms bare':>9} {'us/step':>10} {'of step':>8}")
    with tempfile.TemporaryDirectory(prefix="jf-gpu-") as tmp:
        for name in names:
            t0 = time.monotonic()
            line = check(name, torch, dev, args.steps, args.warmup, Path(tmp), args.repeat)
            print(f"{line}   ({time.monotonic() - t0:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
