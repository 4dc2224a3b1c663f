"""`make gpu-check`: the training session's step timing on a real CUDA GPU. The example's own training
(examples/own-training: the digits MLP) and each built-in workload's training loop (jetfleet.agent.workloads.training,
published input shapes) run on CUDA with a ``jetfleet.session.Session`` attached to an agent's session socket on an
emulated board (the real ``SessionServer`` in this process), and print, per workload:

- the session's step time: the median of the steps the agent asked to have timed (every step here), which the
  session times by synchronising CUDA at ``step()`` — against the CUDA-event time between the same step boundaries
  (an event recorded just before each ``step()``, read after the run: no synchronisation inside the loop);
- the API's overhead per step, with the agent in a process of its own as on a board (`jetfleet agent run
  --session-socket`), on the same training step with one minibatch already on the GPU (no data loader,
  whose pace varies from run to run by more than the overhead): the wall time of N steps with a session at the
  agent's default settings (reports every 64 steps, 32 timed every 8 reports) less the same N steps without one (the
  least of ``--repeat`` runs of each, alternated), per step and as a share of a step; the time spent inside ``step()``
  per call less its waits in CUDA's synchronisation (the API's own cost: a wait there is queued GPU work the loop
  would wait for later, its cost is the overlap it removes, which the wall figure holds), and the synchronisations per
  100 steps.

Then the real-board backend's CUDA paths (``JetsonBoard`` over a fixture tree laid out like an AGX Orin with JetPack
5, ``tests/jetson_trees.py``: its sysfs is a fixture, its torch work is real): each built-in workload's
``run_minibatches`` (median minibatch time, data wait included, against the CUDA-event step time of the table above),
``run_inference`` at batch 1 and 8, ``open_concurrent`` (a training step and an inference batch interleaved), and the
roofline kernels ``run_kernel("compute")`` and ``run_kernel("memory")`` (FP32 FLOP/s and DRAM bytes/s, beside the
card's published peaks where the card is known).

Exits 0 after printing the tables; exits 3 with a message naming what is missing when this machine has no CUDA device
(nothing is measured: there is no fallback to the CPU, whose timing needs no synchronisation). At most ~5 minutes on
one GPU at the default sizes.

    python bench/gpu_check.py [--steps 100] [--warmup 20] [--repeat 3] [--workloads digits-mlp,resnet18,...]
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


Loop = tuple[Callable[[], None], Callable[[], None], Any, Any]


def example_loop(torch: Any, dev: Any) -> Loop:
    """The example's training step (its data, its MLP, its optimiser) on ``dev``, the same step on one minibatch
    kept on ``dev``; its model and one minibatch."""
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

    xf, yf = (t.to(dev) for t in next(iter(loader)))

    def fixed() -> None:
        opt.zero_grad()
        loss_fn(model(xf), yf).backward()
        opt.step()

    xb, _ = next(iter(loader))
    return step, fixed, model, xb


def builtin_loop(torch: Any, dev: Any, name: str) -> Loop:
    """A built-in workload's training step at its published shapes (the agent's own model, data and loss), and the
    same step on one minibatch kept on ``dev``."""
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

    xf, yf = (t.to(dev) for t in next(it))

    def fixed() -> None:
        opt.zero_grad(set_to_none=True)
        training_loss(name, model(xf), yf).backward()
        opt.step()

    return step, fixed, None, None


def _forever(loader: Any) -> Iterator[Any]:
    while True:
        yield from loader


SYNCS = {"n": 0, "s": 0.0}     # the session's CUDA synchronisations in this run, and the seconds waited in them


def count_syncs() -> None:
    """Have the session's CUDA synchronisation counted and timed (in SYNCS)."""
    import jetfleet.session.client as client

    find = client._cuda_sync

    def counted() -> Callable[[], None] | None:
        sync = find()
        if sync is None:
            return None

        def timed() -> None:
            t = time.perf_counter()
            sync()
            SYNCS["s"] += time.perf_counter() - t
            SYNCS["n"] += 1

        return timed

    client._cuda_sync = counted


def run(torch: Any, step: Callable[[], None], n: int, session: Any = None) -> tuple[float, list[float], float, int]:
    """``n`` steps: wall seconds (synchronised once at the end), the CUDA-event seconds between step boundaries, the
    seconds spent inside ``session.step()`` less its waits in CUDA's synchronisation, and how many it made."""
    events = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
    clock = time.perf_counter
    inside = 0.0
    SYNCS.update(n=0, s=0.0)
    torch.cuda.synchronize()
    start = clock()
    events[0].record()
    for i in range(n):
        step()
        events[i + 1].record()
        if session is not None:
            t = clock()
            session.step()
            inside += clock() - t
    torch.cuda.synchronize()
    wall = clock() - start
    return (wall, [events[i].elapsed_time(events[i + 1]) / 1e3 for i in range(n)], inside - SYNCS["s"],
            int(SYNCS["n"]))


def agent_process(sock: Path) -> Any:
    """`jetfleet agent run --session-socket` in a process of its own, as on a board (an emulated AGX Orin at infinite
    speed, no controller), once its socket is there."""
    from tests import procs
    from tests.waiting import wait_until

    agent = procs.spawn([sys.executable, "-m", "jetfleet.cli", "agent", "run", "--device", "emulated:agx-orin:0",
                         "--speed", "inf", "--controller", "127.0.0.1:9", "--session-socket", str(sock)],
                        stdout=procs.DEVNULL, stderr=procs.DEVNULL)
    try:
        wait_until(sock.exists, 60, "the agent's session socket")
    except BaseException:
        agent.end()
        raise
    return agent


def check(name: str, torch: Any, dev: Any, steps: int, warmup: int, sock_dir: Path,
          repeat: int = 2) -> tuple[str, float]:
    from jetfleet.session import Session

    step, fixed, model, example = example_loop(torch, dev) if name == "digits-mlp" else builtin_loop(torch, dev, name)
    run(torch, step, warmup)
    kw: dict[str, Any] = {"model": model, "example_input": example} if model is not None else {}
    # the session's timing: the agent asks for every step to be timed (one by one, or in groups of >= 5 ms)
    timing = Agent(sock_dir / f"{name}-t.sock", time_steps=10 * steps, time_every=1, batch_steps=8)
    try:
        with Session(name, path=str(sock_dir / f"{name}-t.sock"), **kw) as s:
            _, cuda_s, _, _ = run(torch, step, steps, s)
        (board,) = timing.server.sessions.values()
        session_s = sorted(sec / k for k, sec in board.timed)
    finally:
        timing.close()
    # the overhead: the agent's default settings (a few steps timed now and then), against no session, on one
    # minibatch kept on the GPU; the least of ``repeat`` runs each, alternated
    run(torch, fixed, warmup)
    bare, with_, inside, syncs = [], [], [], []
    try:
        default: Any = agent_process(sock_dir / f"{name}-d.sock")
        stop = default.end
    except Exception as e:  # measured all the same, with the agent in this process, and said so
        print(f"  (the agent process did not start: {e}; {name}'s overhead is measured with the agent in this "
              "process, whose thread shares the GIL with the loop)", flush=True)
        default = Agent(sock_dir / f"{name}-d.sock")
        stop = default.close
    try:
        with Session(name, path=str(sock_dir / f"{name}-d.sock"), **kw) as s:
            for _ in range(repeat):
                bare.append(run(torch, fixed, steps)[0])
                wall, _, ins, n_sync = run(torch, fixed, steps, s)
                with_.append(wall)
                inside.append(ins)
                syncs.append(n_sync)
    finally:
        stop()
    bare_wall, with_wall = min(bare), min(with_)
    sess_ms = statistics.median(session_s) * 1e3 if session_s else float("nan")
    cuda_ms = statistics.median(cuda_s) * 1e3
    over_us = (with_wall - bare_wall) / steps * 1e6
    return (f"{name:<13} {sess_ms:9.3f} {cuda_ms:9.3f} {100 * (sess_ms / cuda_ms - 1):+7.1f}%  "
            f"{bare_wall / steps * 1e3:9.3f} {over_us:+10.1f} {100 * over_us / (bare_wall / steps * 1e6):+7.2f}% "
            f"{statistics.median(inside) / steps * 1e6:9.1f} {100 * sum(syncs) / (steps * len(syncs)):6.1f}", cuda_ms)


# Published peaks of the cards this may run on: FP32 on the CUDA cores (TFLOP/s, no tensor cores) and DRAM (TB/s),
# from NVIDIA's data sheets (H100 SXM5, H200 SXM, A100 SXM4 80 GB); others print no peak.
PEAKS = {"H100": (67.0, 3.35), "H200": (67.0, 4.8), "A100": (19.5, 2.04)}


def backend(torch: Any, names: list[str], cuda_ms: dict[str, float], steps: int, seconds: float, tmp: Path) -> None:
    """The real-board backend's CUDA paths on a fixture tree (see the module's docstring); prints a table."""
    from jetfleet.agent.device.jetson import JetsonBoard, JetsonOptions
    from tests.jetson_trees import build_tree, install_tools

    root = tmp / "orin-jp5"
    build_tree(root, "orin-jp5")
    board = JetsonBoard(root, JetsonOptions(command_path=install_tools(root)))
    try:
        mode = board.apply_mode(board.describe().catalog.maxn)
        print(f"\nthe real-board backend (JetsonBoard on a fixture AGX Orin tree, mode {mode}) on CUDA:")
        print(f"{'workload':<13} {'train':>9} {'CUDA ev.':>9} {'differ':>8}  {'infer b1':>9} {'infer b8':>9}"
              f"  {'concurrent train':>17} {'+ infer b1':>10}")
        print(f"{'':<13} {'ms/mb':>9} {'ms/step':>9} {'':>8}  {'ms':>9} {'ms':>9}  {'ms':>17} {'ms':>10}")
        for name in names:
            t0 = time.monotonic()
            train = statistics.median(board.run_minibatches(name, steps + 10).minibatch_times_s[10:]) * 1e3
            b1 = statistics.median(board.run_inference(name, steps, batch_size=1).minibatch_times_s[5:]) * 1e3
            b8 = statistics.median(board.run_inference(name, steps // 2, batch_size=8).minibatch_times_s[5:]) * 1e3
            both = board.open_concurrent(name, "mobilenet_v3")
            try:
                pairs = [(both.train(), both.infer(1)) for _ in range(steps // 2)][5:]
            finally:
                both.close()
            ct = statistics.median(p[0] for p in pairs) * 1e3
            ci = statistics.median(p[1] for p in pairs) * 1e3
            ev = cuda_ms.get(name, float("nan"))
            print(f"{name:<13} {train:9.3f} {ev:9.3f} {100 * (train / ev - 1):+7.1f}%  {b1:9.3f} {b8:9.3f}  "
                  f"{ct:17.3f} {ci:10.3f}   ({time.monotonic() - t0:.0f} s)", flush=True)
        card = next((v for k, v in PEAKS.items() if k in torch.cuda.get_device_name(0)), None)
        for kernel in ("compute", "memory"):
            run = board.run_kernel(kernel, seconds)
            secs = run.end_s - run.start_s
            rate, unit, peak = ((run.flops / secs / 1e12, "TFLOP/s FP32", card[0] if card else None) if kernel == "compute"
                                else (run.dram_bytes / secs / 1e12, "TB/s DRAM", card[1] if card else None))
            beside = f" (published peak {peak}: {100 * rate / peak:.0f}%)" if peak else ""
            print(f"roofline {kernel:<8} {rate:8.2f} {unit} over {secs:.1f} s{beside}  [{run.method}]", flush=True)
    finally:
        board.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3, help="runs with and without a session, the least of each")
    ap.add_argument("--workloads", default=",".join(("digits-mlp",) + BUILTINS))
    ap.add_argument("--backend-seconds", type=float, default=3.0,
                    help="seconds of each roofline kernel; 0 skips the real-board backend's table")
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
    count_syncs()
    print(f"gpu-check on {torch.cuda.get_device_name(0)}, torch {torch.__version__} (CUDA {torch.version.cuda}); "
          f"{args.steps} steps per run after {args.warmup} of warm-up; an emulated agx-orin agent in this process")
    print(f"{'workload':<13} {'session':>9} {'CUDA ev.':>9} {'differ':>8}  {'fixed mb':>9} {'overhead':>10} {'share':>8} "
          f"{'API cost':>9} {'syncs':>6}")
    print(f"{'':<13} {'ms/step':>9} {'ms/step':>9} {'':>8}  {'ms bare':>9} {'us/step':>10} {'of step':>8} "
          f"{'us/call':>9} {'/100':>6}")
    cuda_ms: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="jf-gpu-") as tmp:
        for name in names:
            t0 = time.monotonic()
            line, cuda_ms[name] = check(name, torch, dev, args.steps, args.warmup, Path(tmp), args.repeat)
            print(f"{line}   ({time.monotonic() - t0:.0f} s)", flush=True)
        if args.backend_seconds > 0:
            backend(torch, [n for n in names if n in BUILTINS], cuda_ms, args.steps, args.backend_seconds, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
