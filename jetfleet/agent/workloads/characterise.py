"""Measure what one training minibatch of each workload costs, from the torch model itself.

One forward, backward and optimiser step runs on the ``meta`` device (shapes only, no arithmetic,
so BERT-base at 16x384 takes a second) under ``torch.utils.flop_counter.FlopCounterMode`` and a
dispatch mode of ours that records, for every aten op (≈ one GPU kernel), its FLOPs and the bytes
of its inputs and outputs. The twin turns these into time with a per-kernel roofline, so ops are
kept in arithmetic-intensity bins rather than summed: a memory-bound op and a compute-bound op
of the same total must not average into a moderate one.

Run ``python -m jetfleet.agent.workloads.characterise`` (``make characterise``) to rewrite
``jetfleet/shared/workloads/characterisation.json``; a test fails when the checked-in file no longer matches the models.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.flop_counter import FlopCounterMode

from jetfleet.agent.workloads.training import build_model, shapes, training_loss
from jetfleet.shared import defaults
from jetfleet.shared import workloads as shared_workloads
from jetfleet.shared.workloads import WORKLOADS

if TYPE_CHECKING:
    from jetfleet.agent.workloads.plugins import WorkloadPlugin

# Intensity bin edges in FLOP/byte; bins are [edge_i, edge_i+1).
INTENSITY_EDGES = [0.0, 1.0, 4.0, 16.0, 32.0, 64.0, 128.0, 256.0, math.inf]
FUSED_KERNELS_PER_LAYER = 6  # cuDNN RNN: input GEMM + persistent recurrent kernel, fwd and bwd
_SKIP = {"aten.detach.default", "aten.view.default", "aten._unsafe_view.default", "aten.t.default",
         "aten.expand.default", "aten.permute.default", "aten.transpose.int", "aten.unsqueeze.default",
         "aten.squeeze.dim", "aten.as_strided.default", "aten.slice.Tensor", "aten.select.int",
         "aten.split.Tensor", "aten.split_with_sizes.default", "aten.alias.default", "aten.empty.memory_format",
         "aten.empty_strided.default", "aten.lift_fresh.default", "aten.split.default",
         "aten.chunk.default", "aten.unbind.int", "aten.reshape.default", "aten._to_copy.default"}


def _bytes(obj: Any) -> int:
    leaves, _ = tree_flatten(obj)
    return sum(t.numel() * t.element_size() for t in leaves if isinstance(t, torch.Tensor))


class _OpRecorder(TorchDispatchMode):
    def __init__(self, flops: FlopCounterMode) -> None:
        super().__init__()
        self.flops = flops
        self.ops: list[tuple[str, float, float]] = []  # (op name, flops, bytes) per kernel

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        before = self.flops.get_total_flops()
        out = func(*args, **(kwargs or {}))
        name = str(func)
        if name not in _SKIP:
            flops = float(self.flops.get_total_flops() - before)
            if name == "aten.convolution_backward.default":
                flops = _conv_backward_flops(args)
            self.ops.append((name, flops, float(_bytes(args) + _bytes(kwargs) + _bytes(out))))
        return out


def _conv_backward_flops(args: tuple[Any, ...]) -> float:
    """Each requested gradient (input, weight) of a convolution costs what the forward costs.

    Counted from the shapes because FlopCounterMode in torch 2.13 ignores ``groups`` in the
    backward formula and reports depthwise convolutions' backward ~25x too high."""
    grad_out, _inp, weight = args[0], args[1], args[2]
    mask = args[-1]
    forward = 2.0 * grad_out.numel() * weight.shape[1] * math.prod(weight.shape[2:])
    return forward * (int(mask[0]) + int(mask[1]))


def _fused_recurrent_kernels(model: torch.nn.Module, x: torch.Tensor) -> tuple[int, int, float]:
    """(aten ops, GPU kernels, elementwise bytes) of the recurrent layers. On a GPU, cuDNN runs an
    LSTM layer as a few fused kernels whose gate arithmetic stays on chip; on the meta device it
    decomposes into per-time-step ops, so those ops are counted here, replaced by
    FUSED_KERNELS_PER_LAYER kernels per layer, and their elementwise traffic dropped."""
    ops = kernels = 0
    elementwise = 0.0
    for mod in model.modules():
        if isinstance(mod, (torch.nn.LSTM, torch.nn.GRU)):
            emb = torch.randn(x.shape[0], x.shape[1], mod.input_size, device="meta", requires_grad=True)
            counter = FlopCounterMode(display=False)
            with counter, _OpRecorder(counter) as rec:
                mod(emb)[0].sum().backward()
            ops += len(rec.ops)
            kernels += FUSED_KERNELS_PER_LAYER * mod.num_layers
            elementwise += sum(b for _, f, b in rec.ops if f <= 0)
    return ops, kernels, elementwise


def characterise(name: str, minibatch_size: int = defaults.MINIBATCH_SIZE,
                 plugin: WorkloadPlugin | None = None) -> dict[str, Any]:
    """What one training step of ``name`` (or of a plugin's workload) costs at ``minibatch_size``: kernels,
    FLOPs, bytes, FLOPs by intensity. It runs on the meta device at the published input shape, so nothing
    is computed: a plugin's cost is measured from its own model the way the built-ins' are."""
    s = shapes(name, 1.0, plugin)
    with torch.device("meta"):
        model = build_model(name, 1.0, plugin).train()
        if s.kind == "image":
            x = torch.randn(minibatch_size, 3, s.size, s.size)
            y = torch.randint(0, s.classes, (minibatch_size,))
        else:
            x = torch.randint(0, s.classes, (minibatch_size, s.size))
            y = torch.randint(0, s.classes, (minibatch_size, s.size))
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, foreach=False)
    counter = FlopCounterMode(display=False)
    with counter, _OpRecorder(counter) as rec:
        training_loss(name, model(x), y, plugin).backward()
        opt.step()
    recurrent_ops, fused, fused_bytes = _fused_recurrent_kernels(model, x)
    return _summarise(rec.ops, model, minibatch_size, f"{s.kind} {s.size}", recurrent_ops, fused, fused_bytes)


def characterise_module(model: torch.nn.Module, example_input: torch.Tensor) -> dict[str, Any]:
    """What one training step of an operator's own ``model`` costs for ``example_input`` (one minibatch), measured
    the way the built-ins' are: a copy of the model on the meta device, forward, a sum as the loss (a loss costs
    little beside the model), backward and an SGD step. The model and its input are left as they were."""
    import copy

    if not isinstance(model, torch.nn.Module) or not isinstance(example_input, torch.Tensor):
        raise TypeError("model must be a torch.nn.Module and example_input one minibatch as a torch.Tensor")
    if example_input.dim() < 2:
        raise ValueError(f"example_input of shape {tuple(example_input.shape)}: give one minibatch, batch first")
    meta = copy.deepcopy(model).to("meta").train()
    x = example_input.to("meta")
    opt = torch.optim.SGD(meta.parameters(), lr=1e-3, momentum=0.9, foreach=False)
    counter = FlopCounterMode(display=False)
    with counter, _OpRecorder(counter) as rec:
        out = meta(x)
        loss = (out if isinstance(out, torch.Tensor) else tree_flatten(out)[0][0]).float().sum()
        loss.backward()
        opt.step()
    recurrent_ops, fused, fused_bytes = _fused_recurrent_kernels(meta, x)
    kind = "image" if x.dim() == 4 else "tokens"
    return _summarise(rec.ops, meta, int(x.shape[0]), f"{kind} {int(x.shape[-1])}", recurrent_ops, fused,
                      fused_bytes)


def _summarise(ops: list[tuple[str, float, float]], model: torch.nn.Module, batch: int, input_text: str,
               recurrent_ops: int, fused: int, fused_bytes: float) -> dict[str, Any]:
    """Recorded ops -> kernels, FLOPs, bytes and FLOPs by intensity (the twin's input)."""
    bins = {cls: [[0.0, 0.0, 0] for _ in INTENSITY_EDGES[:-1]] for cls in ("conv", "matmul")}
    memory_bytes, memory_kernels = 0.0, 0
    for op, f, b in ops:
        if f <= 0:
            memory_bytes += b
            memory_kernels += 1
            continue
        cls = "conv" if "convolution" in op else "matmul"
        i = next(k for k in range(len(INTENSITY_EDGES) - 1) if f / max(b, 1.0) < INTENSITY_EDGES[k + 1])
        bins[cls][i][0] += f
        bins[cls][i][1] += b
        bins[cls][i][2] += 1
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    return {
        "minibatch_size": batch,
        "input": input_text,
        "kernels": len(ops) - recurrent_ops + fused,
        "flops": float(sum(f for _, f, _ in ops)),
        "param_bytes": float(params),
        "memory_kernels": memory_kernels,
        "memory_bytes": memory_bytes - fused_bytes,
        # [flops, bytes, kernels] of compute kernels per class and intensity bin (INTENSITY_EDGES)
        "conv_bins": [[round(f), round(b), n] for f, b, n in bins["conv"] if n],
        "matmul_bins": [[round(f), round(b), n] for f, b, n in bins["matmul"] if n],
    }


def _fused_recurrent_forward(model: torch.nn.Module, x: torch.Tensor) -> tuple[int, int, float]:
    """``_fused_recurrent_kernels`` for a forward pass: cuDNN's inference LSTM is an input GEMM and a
    persistent recurrent kernel per layer."""
    ops = kernels = 0
    elementwise = 0.0
    for mod in model.modules():
        if isinstance(mod, (torch.nn.LSTM, torch.nn.GRU)):
            emb = torch.randn(x.shape[0], x.shape[1], mod.input_size, device="meta")
            counter = FlopCounterMode(display=False)
            with torch.no_grad(), counter, _OpRecorder(counter) as rec:
                mod(emb)
            ops += len(rec.ops)
            kernels += 2 * mod.num_layers
            elementwise += sum(b for _, f, b in rec.ops if f <= 0)
    return ops, kernels, elementwise


def characterise_inference(name: str, batch_size: int, plugin: WorkloadPlugin | None = None) -> dict[str, Any]:
    """What one forward pass (eval mode, no autograd) of ``name`` (or a plugin's workload) costs for a batch of
    ``batch_size`` requests at the served input shape (``jetfleet.shared.workloads.inference``)."""
    from jetfleet.shared.workloads.inference import input_size

    s = shapes(name, 1.0, plugin)
    size = input_size(name, s.size) if plugin is None else s.size
    with torch.device("meta"):
        model = build_model(name, 1.0, plugin).eval()
        if s.kind == "image":
            x = torch.randn(batch_size, 3, size, size)
        else:
            x = torch.randint(0, s.classes, (batch_size, size))
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter, _OpRecorder(counter) as rec:
        model(x)
    recurrent_ops, fused, fused_bytes = _fused_recurrent_forward(model, x)
    return _summarise(rec.ops, model, batch_size, f"{s.kind} {size}", recurrent_ops, fused, fused_bytes)


def characterise_inference_sizes(name: str, plugin: WorkloadPlugin | None = None) -> dict[str, Any]:
    """The forward-pass cost of ``name`` at every characterised batch size."""
    from jetfleet.shared.workloads.inference import CHARACTERISED_BATCH_SIZES

    by = {str(b): characterise_inference(name, b, plugin) for b in CHARACTERISED_BATCH_SIZES}
    return {"input": by["1"]["input"], "by_batch": by}


def characterise_inference_all() -> dict[str, dict[str, Any]]:
    """The forward-pass characterisation of every registered workload, by name."""
    return {name: characterise_inference_sizes(name) for name in sorted(WORKLOADS)}


def characterise_all() -> dict[str, dict[str, Any]]:
    """The characterisation of every registered workload at its own minibatch size, by name."""
    return {name: characterise(name, WORKLOADS[name].minibatch_size) for name in sorted(WORKLOADS)}


def main(argv: list[str]) -> int:
    """Rewrite characterisation.json and inference_characterisation.json; with ``--check``, write nothing and
    return 1 if either is stale (else 0)."""
    here = Path(shared_workloads.__file__).parent
    files = {here / "characterisation.json": characterise_all,
             here / "inference_characterisation.json": characterise_inference_all}
    texts = {path: json.dumps(make(), indent=1, sort_keys=True) + "\n" for path, make in files.items()}
    if argv and argv[0] == "--check":
        return 0 if all(path.exists() and path.read_text() == text for path, text in texts.items()) else 1
    for path, text in texts.items():
        path.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
