"""SqueezeNet 1.1 (Iandola et al., 2016) as a jetfleet workload plugin: a small CNN for image
classification, written with plain torch. The agent imports this module only when it loads its
plugins; ``plugin()`` says what the workload is and how to build its model."""

from __future__ import annotations

import torch
from torch import nn

from jetfleet.agent.workloads.plugins import WorkloadPlugin
from jetfleet.shared.workloads import WorkloadSpec


class Fire(nn.Module):
    """SqueezeNet's fire module: a 1x1 squeeze, then 1x1 and 3x3 expands side by side."""

    def __init__(self, cin: int, squeeze: int, expand: int) -> None:
        super().__init__()
        self.squeeze = nn.Sequential(nn.Conv2d(cin, squeeze, 1), nn.ReLU(inplace=True))
        self.e1 = nn.Sequential(nn.Conv2d(squeeze, expand, 1), nn.ReLU(inplace=True))
        self.e3 = nn.Sequential(nn.Conv2d(squeeze, expand, 3, padding=1), nn.ReLU(inplace=True))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.squeeze(x)
        return torch.cat([self.e1(s), self.e3(s)], 1)


def squeezenet(num_classes: int = 1000, scale: float = 1.0) -> nn.Module:
    """SqueezeNet 1.1; ``scale`` < 1 narrows every layer (a copy small enough to train on a CPU in a test)."""
    def c(n: int) -> int:
        return max(4, int(n * scale))

    return nn.Sequential(
        nn.Conv2d(3, c(64), 3, stride=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, ceil_mode=True),
        Fire(c(64), c(16), c(64)), Fire(c(128), c(16), c(64)), nn.MaxPool2d(3, 2, ceil_mode=True),
        Fire(c(128), c(32), c(128)), Fire(c(256), c(32), c(128)), nn.MaxPool2d(3, 2, ceil_mode=True),
        Fire(c(256), c(48), c(192)), Fire(c(384), c(48), c(192)), Fire(c(384), c(64), c(256)),
        Fire(c(512), c(64), c(256)),
        nn.Dropout(0.5), nn.Conv2d(c(512), num_classes, 1), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1),
        nn.Flatten())


def plugin() -> WorkloadPlugin:
    """The workload: SqueezeNet 1.1 on 224x224 images of 1000 classes; its data pipeline costs about what
    ResNet-18's ImageNet pipeline does per sample (decode, random crop, flip, normalise)."""
    spec = WorkloadSpec("squeezenet", "SqueezeNet 1.1 image classification, 224x224", "ImageNet (synthetic)", 9.0,
                        "image", 224, 1000)
    return WorkloadPlugin(spec, lambda scale: squeezenet(spec.classes, scale), tiny_input_size=32)
