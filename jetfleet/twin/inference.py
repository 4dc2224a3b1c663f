"""The twin's physics of inference (issue 15): steady-state time and power of one forward pass of a batch
of requests in a power mode, from the same first principles as training (``physics.py``): the GPU roofline
per kernel class over the forward pass's own characterisation, kernel launches on the serving thread, and
the same power model. No state and no noise here (``board.py`` adds those); ``docs/twin.md`` lists the
assumptions and the anchors.

Differences from a training minibatch, each a fact of serving rather than a fitted knob:
- no data-loader workers: a request arrives decoded, the serving thread stacks the batch and copies it to
  the GPU (``INPUT_CPU_MS_PER_MB_AT_1GHZ`` per MB of input on that thread, not overlapped: the forward pass
  waits for its input);
- eager PyTorch in eval mode under ``no_grad`` issues each kernel through the dispatcher without autograd
  bookkeeping, but a served batch is a cold start for the CPU caches (one pass, then idle), so a launch costs
  ``INFERENCE_LAUNCH_CYCLES``;
- the serving thread busy-waits on the GPU, so it keeps one core busy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jetfleet.shared.catalog import Catalog, PowerMode
from jetfleet.shared.workloads.inference import bracket
from jetfleet.twin.physics import (
    BANDWIDTH_EFFICIENCY,
    DENSE_EFFICIENCY,
    OVERLAP_LOSS,
    Steady,
    _gpu_time_s,
    part_power_w,
    rail_power_w,
)

INFERENCE_LAUNCH_CYCLES = 200_000     # host cost per kernel of a served forward pass (calibrated, docs/twin.md)
INFERENCE_DENSE_EFFICIENCY = 0.33     # achieved share of peak FLOP/s in a served pass (calibrated, docs/twin.md)
INFERENCE_BANDWIDTH_EFFICIENCY = 0.50  # achieved share of DRAM bandwidth in a served pass (calibrated, docs/twin.md)
EAGER_EFFICIENCY = (INFERENCE_DENSE_EFFICIENCY, INFERENCE_BANDWIDTH_EFFICIENCY)
# A frozen graph (TensorFlow under Triton) runs autotuned cuDNN kernels as a training step does: the training
# shares of peak (physics.DENSE_EFFICIENCY, BANDWIDTH_EFFICIENCY; docs/twin.md §5d)
GRAPH_EFFICIENCY = (DENSE_EFFICIENCY, BANDWIDTH_EFFICIENCY)
BATCH_OVERHEAD_CYCLES = 2_000_000     # per forward pass: Python, stacking, synchronising, the result's copy back
INPUT_CPU_MS_PER_MB_AT_1GHZ = 0.6     # stacking and copying a batch's input to the GPU, per MB


def _input_mb(cost: Mapping[str, Any], batch: int) -> float:
    kind, size = str(cost["input"]).split()
    per = 3 * int(size) ** 2 * 4 if kind == "image" else int(size) * 8
    return batch * per / 1e6


def _one(catalog: Catalog, mode: PowerMode, cost: Mapping[str, Any],
         efficiency: tuple[float, float]) -> tuple[float, float, float, float]:
    """(batch seconds, GPU seconds, launch seconds, DRAM bytes) of one characterised forward pass."""
    hw = catalog.twin
    cpu_ghz = mode.cpu_mhz / 1000.0 * float(hw.get("cpu_ipc", 1.0))
    gpu_s, moved = _gpu_time_s(cost, 1.0, mode.gpu_mhz, mode.mem_mhz, hw, *efficiency)
    launch_s = (cost["kernels"] * INFERENCE_LAUNCH_CYCLES + BATCH_OVERHEAD_CYCLES) / (cpu_ghz * 1e9)
    input_s = _input_mb(cost, int(cost["minibatch_size"])) * INPUT_CPU_MS_PER_MB_AT_1GHZ / 1000.0 / cpu_ghz
    step_s = max(gpu_s, launch_s) + OVERLAP_LOSS * min(gpu_s, launch_s)
    return input_s + step_s, gpu_s, launch_s, moved


def inference_state(catalog: Catalog, mode: PowerMode, cost: Mapping[str, Any], batch_size: int, *,
                    efficiency: tuple[float, float] = EAGER_EFFICIENCY) -> Steady:
    """Time of one forward pass of ``batch_size`` requests (``minibatch_s``) and the board's power while
    passes run back to back, from ``cost`` = {"input", "by_batch": {size: characterisation}}; between two
    characterised sizes, time, GPU time and traffic are interpolated (cost is affine in the batch there).
    ``efficiency``: the served kernels' (FP32, DRAM) shares of peak, PyTorch's eager serving by default;
    ``GRAPH_EFFICIENCY`` for a frozen graph served with autotuned cuDNN kernels."""
    lo, hi, w = bracket(batch_size)
    a = _one(catalog, mode, cost["by_batch"][str(lo)], efficiency)
    b = _one(catalog, mode, cost["by_batch"][str(hi)], efficiency) if w else a
    batch_s, gpu_s, launch_s, moved = ((1 - w) * x + w * y for x, y in zip(a, b))
    gpu_util = min(1.0, gpu_s / batch_s)
    mem_gbps = moved / batch_s / 1e9
    parts = part_power_w(catalog, mode, gpu_util=gpu_util, busy_cores=min(float(mode.cores), 1.0), mem_gbps=mem_gbps)
    rails = rail_power_w(catalog, parts)
    return Steady(batch_s, gpu_s, launch_s, batch_s - max(gpu_s, launch_s), gpu_util, 1.0 / mode.cores, mem_gbps,
                  parts, rails, catalog.total_power_w(rails))
