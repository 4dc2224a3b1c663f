"""Real training loops for the registered workloads: synthetic data of the published shapes, a real
DataLoader with workers doing real per-sample CPU work, forward, backward and an optimiser step.

On a board this runs on the GPU; tests run it on the CPU with ``scale`` < 1 (tiny inputs)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from jetfleet.agent.workloads import models
from jetfleet.shared import defaults
from jetfleet.shared.workloads import check_run_args, get_workload

if TYPE_CHECKING:
    from jetfleet.agent.workloads.plugins import WorkloadPlugin


@dataclass(frozen=True)
class Shapes:
    """A workload's input: kind ("image" or "tokens"), image side or sequence length, classes."""

    kind: str
    size: int
    classes: int


# Tiny inputs for tests on the CPU (scale < 1); the published shapes are in the registry.
_TINY = {"resnet18": Shapes("image", 32, 10), "mobilenet_v3": Shapes("image", 32, 10), "yolo_v8n": Shapes("image", 64, 8),
         "bert_base": Shapes("tokens", 16, 1000), "lstm": Shapes("tokens", 8, 500)}


def shapes(name: str, scale: float, plugin: WorkloadPlugin | None = None) -> Shapes:
    """The input shape of ``name`` (or of a plugin's workload): the published shape at scale 1, a tiny one below."""
    if plugin is not None:
        s = plugin.spec
        tiny = scale < 1.0 and plugin.tiny_input_size
        return Shapes(s.input_kind, plugin.tiny_input_size if tiny else s.input_size, s.classes)
    spec = get_workload(name)
    return _TINY[name] if scale < 1.0 else Shapes(spec.input_kind, spec.input_size, spec.classes)


def build_model(name: str, scale: float = 1.0, plugin: WorkloadPlugin | None = None) -> nn.Module:
    """The torch model of a registered workload (or a plugin's) at ``scale`` (1.0 is the published shape);
    NotFound for a name that is neither."""
    if plugin is not None:
        return plugin.build_model(scale)
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


def training_loss(name: str, out: Any, target: torch.Tensor, plugin: WorkloadPlugin | None = None) -> torch.Tensor:
    """The loss of one training step of ``name`` (for the detector a proxy: the mean square of its head outputs;
    a plugin's own loss, or cross-entropy)."""
    if plugin is not None:
        return plugin.loss(out, target) if plugin.loss is not None else nn.functional.cross_entropy(out, target)
    if name == "yolo_v8n":  # dense regression of every head against a smooth target
        return sum((o.float().pow(2).mean() for o in out), torch.zeros(()))
    if name == "bert_base":
        start = target[:, 0] % out.shape[1]
        return nn.functional.cross_entropy(out[..., 0], start)
    if name == "lstm":
        return nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))
    return nn.functional.cross_entropy(out, target)


def run_training(name: str, minibatches: int, *, minibatch_size: int = defaults.MINIBATCH_SIZE, workers: int = defaults.WORKERS,
                 scale: float = 1.0, device: str | None = None, seed: int = 0,
                 on_minibatch: Callable[[int, float], bool | None] | None = None,
                 plugin: WorkloadPlugin | None = None) -> list[float]:
    """Train ``minibatches`` minibatches of a registered workload (or of ``plugin``'s); return each one's wall
    time in seconds (data wait included, GPU synchronised, as the papers measured)."""
    check_run_args(minibatches, minibatch_size, workers)
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    torch.manual_seed(seed)
    model = build_model(name, scale, plugin).to(dev).train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    data = SyntheticSamples(shapes(name, scale, plugin), minibatches * minibatch_size, seed)
    loader = DataLoader(data, batch_size=minibatch_size, num_workers=workers, drop_last=True,
                        persistent_workers=False, pin_memory=dev.type == "cuda")
    times: list[float] = []
    start = time.perf_counter()
    for i, (x, y) in enumerate(loader):
        x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        training_loss(name, model(x), y, plugin).backward()
        opt.step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        now = time.perf_counter()
        times.append(now - start)
        if on_minibatch is not None and on_minibatch(i, now - start):
            break
        start = now
    return times


class TrainingSession:
    """A training loop one minibatch at a time (the concurrent scheduler interleaves it with inference batches):
    the model, optimiser and a DataLoader that keeps producing minibatches; ``step()`` trains one, its seconds."""

    def __init__(self, name: str, *, minibatch_size: int = defaults.MINIBATCH_SIZE, workers: int = defaults.WORKERS,
                 scale: float = 1.0, device: str | None = None, seed: int = 0,
                 plugin: WorkloadPlugin | None = None, length: int = 100_000) -> None:
        check_run_args(1, minibatch_size, workers)
        self.name, self.plugin = name, plugin
        self.dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        torch.manual_seed(seed)
        self.model = build_model(name, scale, plugin).to(self.dev).train()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=1e-3, momentum=0.9)
        data = SyntheticSamples(shapes(name, scale, plugin), length * minibatch_size, seed)
        self._loader = DataLoader(data, batch_size=minibatch_size, num_workers=workers, drop_last=True,
                                  pin_memory=self.dev.type == "cuda")
        self._it: Iterator[Any] = iter(self._loader)

    def step(self) -> float:
        """Train one minibatch (data wait included, GPU synchronised); its seconds."""
        start = time.perf_counter()
        try:
            x, y = next(self._it)
        except StopIteration:
            self._it = iter(self._loader)
            x, y = next(self._it)
        x, y = x.to(self.dev, non_blocking=True), y.to(self.dev, non_blocking=True)
        self.opt.zero_grad(set_to_none=True)
        training_loss(self.name, self.model(x), y, self.plugin).backward()
        self.opt.step()
        if self.dev.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start

    def close(self) -> None:
        """Stop the loader's workers."""
        self._it = iter(())
