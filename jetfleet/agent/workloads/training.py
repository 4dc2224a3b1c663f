"""Real training loops for the registered workloads: synthetic data of the published shapes, a real
DataLoader with workers doing real per-sample CPU work, forward, backward and an optimiser step.

On a board this runs on the GPU; tests run it on the CPU with ``scale`` < 1 (tiny inputs)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from jetfleet.agent.workloads import models
from jetfleet.agent.workloads.registry import check_run_args, get_workload


@dataclass(frozen=True)
class Shapes:
    kind: str  # "image" or "tokens"
    size: int  # image side or sequence length
    classes: int


def shapes(name: str, scale: float) -> Shapes:
    small = scale < 1.0
    table = {
        "resnet18": Shapes("image", 32 if small else 224, 10 if small else 1000),
        "mobilenet_v3": Shapes("image", 32 if small else 224, 10 if small else 1000),
        "yolo_v8n": Shapes("image", 64 if small else 640, 8 if small else 80),
        "bert_base": Shapes("tokens", 16 if small else 256, 1000 if small else 30522),
        "lstm": Shapes("tokens", 8 if small else 35, 500 if small else 10000),
    }
    return table[name]


def build_model(name: str, scale: float = 1.0) -> nn.Module:
    get_workload(name)
    s = shapes(name, scale)
    builders: dict[str, Callable[[], nn.Module]] = {
        "resnet18": lambda: models.resnet18(s.classes, scale),
        "mobilenet_v3": lambda: models.mobilenet_v3(s.classes, scale),
        "yolo_v8n": lambda: models.yolo_v8n(s.classes, scale),
        "bert_base": lambda: models.bert_base(scale),
        "lstm": lambda: models.lstm(scale),
    }
    return builders[name]()


class SyntheticSamples(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Samples made the way a real pipeline makes them: raw uint8 (or token ids), then the usual
    per-sample CPU work (random crop and flip, normalisation) in the DataLoader workers."""

    def __init__(self, shape: Shapes, length: int, seed: int = 0) -> None:
        self.shape, self.length, self.seed = shape, length, seed

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + i)
        s = self.shape
        if s.kind == "tokens":
            ids = torch.randint(0, s.classes, (s.size + 1,), generator=g)
            return ids[:-1], ids[1:]
        pad = s.size // 8
        raw = torch.randint(0, 256, (3, s.size + pad, s.size + pad), dtype=torch.uint8, generator=g)
        y0, x0 = (int(v) for v in torch.randint(0, pad + 1, (2,), generator=g))
        img = raw[:, y0:y0 + s.size, x0:x0 + s.size].float().div_(255.0)
        if bool(torch.rand(1, generator=g) < 0.5):
            img = img.flip(-1)
        img = (img - 0.45) / 0.225
        return img, torch.randint(0, s.classes, (), generator=g)


def _loss(name: str, out: Any, target: torch.Tensor) -> torch.Tensor:
    if name == "yolo_v8n":  # dense regression of every head against a smooth target
        return sum((o.float().pow(2).mean() for o in out), torch.zeros(()))
    if name == "bert_base":
        start = target[:, 0] % out.shape[1]
        return nn.functional.cross_entropy(out[..., 0], start)
    if name == "lstm":
        return nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))
    return nn.functional.cross_entropy(out, target)


def run_training(name: str, minibatches: int, *, minibatch_size: int = 16, workers: int = 4,
                 scale: float = 1.0, device: str | None = None, seed: int = 0,
                 on_minibatch: Callable[[int, float], bool | None] | None = None) -> list[float]:
    """Train ``minibatches`` minibatches; return each one's wall time in seconds (data wait
    included, GPU synchronised, as the papers measured)."""
    check_run_args(minibatches, minibatch_size, workers)
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    torch.manual_seed(seed)
    model = build_model(name, scale).to(dev).train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    data = SyntheticSamples(shapes(name, scale), minibatches * minibatch_size, seed)
    loader = DataLoader(data, batch_size=minibatch_size, num_workers=workers, drop_last=True,
                        persistent_workers=False, pin_memory=dev.type == "cuda")
    times: list[float] = []
    start = time.perf_counter()
    for i, (x, y) in enumerate(loader):
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        _loss(name, model(x), y).backward()
        opt.step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        now = time.perf_counter()
        times.append(now - start)
        if on_minibatch is not None and on_minibatch(i, now - start):
            break
        start = now
    return times
