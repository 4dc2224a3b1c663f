"""Inception v3 in plain torch (the layout of Szegedy et al. 2016 and of torchvision's ``inception_v3``, without
the auxiliary head), for one purpose: to characterise the network the real NX/Nano sweeps served (Triton's
``inception_graphdef``, Inception v3 at 299x299) on the meta device, the way a workload plugin is
characterised, so the twin's physics can be held against those sweeps. It is not a registered workload."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

INPUT_SIZE = 299


Conv = Callable[..., nn.Module]   # (cin, cout, kernel, stride=1, pad=0) -> a convolution unit


def _conv(cin: int, cout: int, k: int | tuple[int, int], stride: int = 1, pad: int | tuple[int, int] = 0) -> nn.Module:
    """Convolution without bias, batch norm, ReLU (torchvision's BasicConv2d)."""
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, pad, bias=False), nn.BatchNorm2d(cout, eps=0.001),
                         nn.ReLU(inplace=True))


def _fused(cin: int, cout: int, k: int | tuple[int, int], stride: int = 1, pad: int | tuple[int, int] = 0) -> nn.Module:
    """The same unit as a served frozen graph runs it: one convolution with a bias, the batch norm folded into
    its weights and the ReLU into its kernel (cuDNN's convolution-bias-activation)."""
    return nn.Conv2d(cin, cout, k, stride, pad, bias=True)


class _Branches(nn.Module):
    """Parallel branches whose outputs are concatenated along the channels."""

    def __init__(self, *branches: nn.Module) -> None:
        super().__init__()
        self.branches = nn.ModuleList(branches)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outs: list[torch.Tensor] = []
        for b in self.branches:
            y = b(x)
            outs.extend(y if isinstance(y, list) else [y])
        return torch.cat(outs, 1)


class _Split(nn.Module):
    """A stem followed by two parallel heads whose outputs both go on (InceptionE's 1x3 / 3x1 pairs)."""

    def __init__(self, stem: nn.Module, a: nn.Module, b: nn.Module) -> None:
        super().__init__()
        self.stem, self.a, self.b = stem, a, b

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        h = self.stem(x)
        return [self.a(h), self.b(h)]


def _a(c: Conv, cin: int, pool: int) -> nn.Module:
    return _Branches(c(cin, 64, 1), nn.Sequential(c(cin, 48, 1), c(48, 64, 5, pad=2)),
                     nn.Sequential(c(cin, 64, 1), c(64, 96, 3, pad=1), c(96, 96, 3, pad=1)),
                     nn.Sequential(nn.AvgPool2d(3, 1, 1), c(cin, pool, 1)))


def _b(c: Conv, cin: int) -> nn.Module:
    return _Branches(c(cin, 384, 3, 2), nn.Sequential(c(cin, 64, 1), c(64, 96, 3, pad=1), c(96, 96, 3, 2)),
                     nn.MaxPool2d(3, 2))


def _c(c: Conv, cin: int, c7: int) -> nn.Module:
    def row(a: int, b: int) -> nn.Module:
        return c(a, b, (1, 7), pad=(0, 3))

    def col(a: int, b: int) -> nn.Module:
        return c(a, b, (7, 1), pad=(3, 0))

    return _Branches(c(cin, 192, 1), nn.Sequential(c(cin, c7, 1), row(c7, c7), col(c7, 192)),
                     nn.Sequential(c(cin, c7, 1), col(c7, c7), row(c7, c7), col(c7, c7), row(c7, 192)),
                     nn.Sequential(nn.AvgPool2d(3, 1, 1), c(cin, 192, 1)))


def _d(c: Conv, cin: int) -> nn.Module:
    return _Branches(nn.Sequential(c(cin, 192, 1), c(192, 320, 3, 2)),
                     nn.Sequential(c(cin, 192, 1), c(192, 192, (1, 7), pad=(0, 3)), c(192, 192, (7, 1), pad=(3, 0)),
                                   c(192, 192, 3, 2)),
                     nn.MaxPool2d(3, 2))


def _e(c: Conv, cin: int) -> nn.Module:
    def heads(ch: int) -> tuple[nn.Module, nn.Module]:
        return c(ch, 384, (1, 3), pad=(0, 1)), c(ch, 384, (3, 1), pad=(1, 0))

    return _Branches(c(cin, 320, 1), _Split(c(cin, 384, 1), *heads(384)),
                     _Split(nn.Sequential(c(cin, 448, 1), c(448, 384, 3, pad=1)), *heads(384)),
                     nn.Sequential(nn.AvgPool2d(3, 1, 1), c(cin, 192, 1)))


def inception_v3(num_classes: int = 1000, scale: float = 1.0, *, fused: bool = False) -> nn.Module:
    """Inception v3 (``scale`` is accepted for the plugin interface; the network is always full size); ``fused``:
    as a frozen inference graph runs it (batch norm folded, ReLU fused into each convolution)."""
    del scale
    c: Conv = _fused if fused else _conv
    return nn.Sequential(
        c(3, 32, 3, 2), c(32, 32, 3), c(32, 64, 3, pad=1), nn.MaxPool2d(3, 2), c(64, 80, 1), c(80, 192, 3),
        nn.MaxPool2d(3, 2), _a(c, 192, 32), _a(c, 256, 64), _a(c, 288, 64), _b(c, 288), _c(c, 768, 128),
        _c(c, 768, 160), _c(c, 768, 160), _c(c, 768, 192), _d(c, 768), _e(c, 1280), _e(c, 2048),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.5), nn.Linear(2048, num_classes))


def forward_cost(batch_size: int = 1, *, fused: bool = True) -> dict[str, Any]:
    """The forward pass's characterisation (kernels, FLOPs, bytes by intensity) at ``batch_size``, measured on
    the meta device as a workload plugin's is; the shape the twin's ``inference_state`` takes. ``fused``
    (default): the frozen graph Triton serves (TensorFlow folds batch norm and fuses the ReLUs)."""
    from jetfleet.agent.workloads.characterise import characterise_inference
    from jetfleet.agent.workloads.plugins import WorkloadPlugin
    from jetfleet.shared.workloads import WorkloadSpec

    spec = WorkloadSpec("inception_v3", "Inception v3, 299x299 (Triton's inception_graphdef)", "ImageNet", 0.0,
                        "image", INPUT_SIZE, 1000)
    plugin = WorkloadPlugin(spec, lambda scale: inception_v3(1000, scale, fused=fused))
    cost = characterise_inference(spec.name, batch_size, plugin)
    return {"input": cost["input"], "by_batch": {str(batch_size): cost}}
