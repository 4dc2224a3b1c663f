"""Real inference for the registered workloads (issue 15): the model in eval mode under ``torch.no_grad``,
forward passes of batches of requests of the served input shape (``jetfleet.shared.workloads.inference``),
each timed with the GPU synchronised. On a board this runs on the GPU; tests run it on the CPU with
``scale`` < 1 (tiny inputs)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import nn

from jetfleet.agent.workloads.training import Shapes, build_model, shapes
from jetfleet.shared.workloads import check_run_args
from jetfleet.shared.workloads.inference import check_batch_size, input_size

if TYPE_CHECKING:
    from jetfleet.agent.workloads.plugins import WorkloadPlugin


class InferenceModel:
    """A loaded model serving batches: build once (a serving process keeps its model), then ``forward`` per batch."""

    def __init__(self, name: str, *, scale: float = 1.0, device: str | None = None, seed: int = 0,
                 plugin: WorkloadPlugin | None = None) -> None:
        self.dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        torch.manual_seed(seed)
        s = shapes(name, scale, plugin)
        size = input_size(name, s.size) if plugin is None and scale >= 1.0 else s.size
        self.shape = Shapes(s.kind, size, s.classes)
        self.model: nn.Module = build_model(name, scale, plugin).to(self.dev).eval()
        self._gen = torch.Generator().manual_seed(seed)

    def batch(self, batch_size: int) -> torch.Tensor:
        """A batch of requests of the served shape (synthetic: images or token ids)."""
        s = self.shape
        if s.kind == "image":
            return torch.randn(batch_size, 3, s.size, s.size, generator=self._gen)
        return torch.randint(0, s.classes, (batch_size, s.size), generator=self._gen)

    def forward(self, x: torch.Tensor) -> float:
        """Serve one batch: copy in, forward under no_grad, synchronise; the seconds it took."""
        start = time.perf_counter()
        with torch.no_grad():
            self.model(x.to(self.dev, non_blocking=True))
        if self.dev.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start


def run_inference(name: str, n: int, *, batch_size: int = 1, scale: float = 1.0, device: str | None = None,
                  seed: int = 0, on_batch: Callable[[int, float], bool | None] | None = None,
                  plugin: WorkloadPlugin | None = None) -> list[float]:
    """Serve ``n`` batches of ``batch_size`` requests back to back; each batch's seconds (fewer if ``on_batch``
    returns True)."""
    check_batch_size(batch_size)
    check_run_args(n, 1, 0)
    served = InferenceModel(name, scale=scale, device=device, seed=seed, plugin=plugin)
    times: list[float] = []
    for i in range(n):
        t = served.forward(served.batch(batch_size))
        times.append(t)
        if on_batch is not None and on_batch(i, t):
            break
    return times
