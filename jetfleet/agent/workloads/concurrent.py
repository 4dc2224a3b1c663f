"""Real torch work for a concurrent session (issue 15): a training loop stepped one minibatch at a time and a
loaded model serving batches, for the managed scheduler (``jetfleet.shared.concurrency``) on a board."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from jetfleet.agent.device.base import ConcurrentSteps
from jetfleet.agent.workloads.inference import InferenceModel
from jetfleet.agent.workloads.training import TrainingSession
from jetfleet.shared import defaults

if TYPE_CHECKING:
    from jetfleet.agent.workloads.plugins import WorkloadPlugin


class TorchConcurrentSteps(ConcurrentSteps):
    """Training and inference on one device, one step at a time (``scale`` < 1: tiny copies for CPU tests)."""

    def __init__(self, training: str, inference: str, *, minibatch_size: int = defaults.MINIBATCH_SIZE,
                 workers: int = defaults.WORKERS, scale: float = 1.0, device: str | None = None,
                 plugins: Mapping[str, WorkloadPlugin] | None = None) -> None:
        plugins = plugins or {}
        self.training = TrainingSession(training, minibatch_size=minibatch_size, workers=workers, scale=scale,
                                        device=device, plugin=plugins.get(training))
        self.serving = InferenceModel(inference, scale=scale, device=device, plugin=plugins.get(inference))

    def train(self) -> float:
        """One real training minibatch; its seconds."""
        return self.training.step()

    def infer(self, n: int) -> float:
        """One real forward pass of ``n`` requests; its seconds."""
        return self.serving.forward(self.serving.batch(n))

    def close(self) -> None:
        """Stop the training loader."""
        self.training.close()
