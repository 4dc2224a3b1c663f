"""The digital twin's physics: steady-state time per minibatch and power per rail of a workload in a
power mode, from first principles. No state and no noise here (``board.py`` adds those).
``docs/twin.md`` states every assumption and compares the output with the published anchors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jetfleet.shared.catalog import Catalog, PowerMode
from jetfleet.shared.workloads import WorkloadSpec, characterisation

# Global constants, the same for every board (docs/twin.md, "Constants").
DENSE_EFFICIENCY = 0.62        # achieved share of peak FP32 FLOP/s in compute-bound kernels
BANDWIDTH_EFFICIENCY = 0.70    # achieved share of DRAM peak bandwidth
KERNEL_GPU_OVERHEAD_S = 4e-6   # fixed GPU-side cost per kernel (launch latency, tail effects)
LAUNCH_CYCLES = 36_000         # CPU cycles the framework spends to issue one kernel (eager PyTorch)
ROOFLINE_OVERLAP_LOSS = 0.3   # share of the smaller of (compute, memory) time a kernel does not hide
OVERLAP_LOSS = 0.12            # share of the shorter of (launch, GPU) that does not overlap
CONTENTION_PER_THREAD = 0.10   # slow-down per runnable thread beyond the online cores
VOLTAGE_KNEE = 0.30            # below this share of f_max the rail sits at its minimum voltage
SYS_REGULATOR_LOSS = 0.06      # share of the other rails' power lost in regulators (on sys)


@dataclass(frozen=True)
class Steady:
    """What a board does in one mode, steady state, per minibatch."""

    minibatch_s: float
    gpu_s: float
    launch_s: float
    data_s: float
    gpu_util: float
    cpu_util: float             # mean over online cores
    mem_gbps: float
    parts_w: Mapping[str, float]  # per twin component: gpu, cpu, soc, cv, mem, sys
    rails_w: Mapping[str, float]
    total_w: float


def voltage(freq: float, table: tuple[float, ...], volt: list[float] | tuple[float, float]) -> float:
    """Voltage rises along the frequency table above a knee (DVFS floor below it)."""
    lo, hi = float(volt[0]), float(volt[1])
    fmax = max(table)
    knee = VOLTAGE_KNEE * fmax
    if freq <= knee:
        return lo
    return lo + (hi - lo) * (freq - knee) / (fmax - knee)


def fp32_flops(hw: Mapping[str, Any], gpu_mhz: float, efficiency: float = DENSE_EFFICIENCY) -> float:
    """The FP32 FLOP/s a board's kernels achieve at ``gpu_mhz``: CUDA cores x 2 x clock x the framework's share
    of peak (``efficiency``) x the board's own factor (``gpu_efficiency``, 1 unless its TOML file says: an older
    GPU generation whose kernels reach a different share, calibrated against measurements, docs/twin.md)."""
    return float(hw["cuda_cores"]) * 2.0 * gpu_mhz * 1e6 * efficiency * float(hw.get("gpu_efficiency", 1.0))


def _gpu_time_s(char: Mapping[str, Any], scale: float, gpu_mhz: float, mem_mhz: float,
                hw: Mapping[str, Any], dense_efficiency: float = DENSE_EFFICIENCY,
                bandwidth_efficiency: float = BANDWIDTH_EFFICIENCY) -> tuple[float, float]:
    """Per-kernel-class roofline. Returns (GPU busy seconds, DRAM bytes moved).

    Within a kernel, compute and memory traffic overlap imperfectly: t = max(c, m) + k * min(c, m).
    Convolutions run on tensor cores in TF32 where the GPU has them (PyTorch's default for cuDNN),
    matmuls in FP32 (PyTorch's default). DRAM traffic is the ideal input+output bytes times a
    board factor for cache re-reads (a small L2 re-reads more). Bandwidth is the lesser of DRAM's
    (EMC clock x 2 transfers x bus width) and the GPU side's (GPU clock x bytes per clock)."""
    fp32 = fp32_flops(hw, gpu_mhz, dense_efficiency)
    peaks = {"conv_bins": fp32 * float(hw.get("tensor_core_conv_speedup", 1.0)), "matmul_bins": fp32}
    # The GPU side also limits bandwidth: its L2/crossbar moves a fixed number of bytes per GPU clock.
    bw = min(mem_mhz * 1e6 * 2.0 * hw["mem_bus_bytes"], gpu_mhz * 1e6 * hw["gpu_bytes_per_clk"]) * bandwidth_efficiency
    traffic = float(hw.get("dram_traffic_factor", 1.0))
    t = 0.0
    moved = 0.0
    for cls, peak in peaks.items():
        for flops, nbytes, _n in char[cls]:
            c, m = flops * scale / peak, nbytes * scale * traffic / bw
            t += max(c, m) + ROOFLINE_OVERLAP_LOSS * min(c, m)
            moved += nbytes * scale * traffic
    t += char["memory_bytes"] * scale * traffic / bw
    moved += char["memory_bytes"] * scale * traffic
    t += char["kernels"] * KERNEL_GPU_OVERHEAD_S
    return t, moved


def steady_state(catalog: Catalog, spec: WorkloadSpec, mode: PowerMode, *, minibatch_size: int | None = None,
                 workers: int | None = None, cost: Mapping[str, Any] | None = None) -> Steady:
    """Time per minibatch and power per rail of ``spec`` in ``mode`` at steady state.

    ``minibatch_size`` and ``workers`` default to the workload's own; ``cost`` (its characterisation)
    defaults to the built-in one (a plugin's comes from its board's workload registry)."""
    hw = catalog.twin
    char = cost if cost is not None else characterisation(spec.name)
    mb = minibatch_size or spec.minibatch_size
    nw = spec.workers if workers is None else workers
    scale = mb / char["minibatch_size"]
    cpu_ghz = mode.cpu_mhz / 1000.0 * float(hw.get("cpu_ipc", 1.0))

    gpu_s, moved = _gpu_time_s(char, scale, mode.gpu_mhz, mode.mem_mhz, hw)
    # Runnable threads: the training loop, plus the workers, want a core each.
    contention = 1.0 + CONTENTION_PER_THREAD * max(0, nw + 2 - mode.cores)
    launch_s = char["kernels"] * LAUNCH_CYCLES / (cpu_ghz * 1e9) * contention
    worker_cores = max(1, min(nw, mode.cores - 1)) if nw else 0
    data_core_s = mb * spec.cpu_ms_per_sample_at_1ghz / 1000.0 / cpu_ghz
    data_s = data_core_s / worker_cores * contention if nw else data_core_s
    step_s = max(gpu_s, launch_s) + OVERLAP_LOSS * min(gpu_s, launch_s)
    if nw == 0 or mode.cores == 1:
        minibatch_s = step_s + data_s           # nothing to prefetch on: the loop loads its own data
    else:
        minibatch_s = max(step_s, data_s) + OVERLAP_LOSS * min(step_s, data_s) * 0.25
    gpu_util = min(1.0, gpu_s / minibatch_s)
    # The training thread busy-waits on the GPU (CUDA sync spins), so it keeps its core busy.
    busy_cores = min(float(mode.cores), 1.0 + (data_core_s if nw else 0.0) / minibatch_s)
    mem_gbps = moved / minibatch_s / 1e9
    parts = part_power_w(catalog, mode, gpu_util=gpu_util, busy_cores=busy_cores, mem_gbps=mem_gbps)
    rails = rail_power_w(catalog, parts)
    return Steady(minibatch_s, gpu_s, launch_s, data_s, gpu_util, busy_cores / mode.cores, mem_gbps,
                  parts, rails, catalog.total_power_w(rails))


def part_power_w(catalog: Catalog, mode: PowerMode, *, gpu_util: float, busy_cores: float,
                 mem_gbps: float) -> dict[str, float]:
    """Static plus dynamic power of each component: P = C * util * f * V^2 (+ traffic for DRAM)."""
    hw = catalog.twin
    static = hw["static_w"]
    vg = voltage(mode.gpu_mhz, catalog.gpu_mhz, hw["gpu_volt"])
    vc = voltage(mode.cpu_mhz, catalog.cpu_mhz, hw["cpu_volt"])
    vm = voltage(mode.mem_mhz, catalog.mem_mhz, hw["mem_volt"])
    gpu = static["gpu"] * vg / hw["gpu_volt"][1] + hw["gpu_cap_w_per_ghz_v2"] * gpu_util * mode.gpu_mhz / 1e3 * vg**2
    cpu = (static["cpu"] + hw["cpu_core_leak_w"] * mode.cores * vc / hw["cpu_volt"][1]
           + hw["cpu_core_cap_w_per_ghz_v2"] * busy_cores * mode.cpu_mhz / 1e3 * vc**2)
    mem = (static["mem"] + hw["mem_w_per_ghz"] * mode.mem_mhz / 1e3 * (vm / hw["mem_volt"][1]) ** 2
           + hw["mem_w_per_gbps"] * mem_gbps)
    parts = {"gpu": gpu, "cpu": cpu, "mem": mem, "soc": float(static["soc"]), "cv": float(static["cv"])}
    parts["sys"] = float(static["sys"]) + SYS_REGULATOR_LOSS * sum(parts.values())
    return parts


def rail_power_w(catalog: Catalog, parts: Mapping[str, float]) -> dict[str, float]:
    """Power per rail (W): the sum of the twin components that feed each rail of the catalog."""
    return {r.label: sum(parts.get(p, 0.0) for p in r.parts) for r in catalog.rails}


def idle_state(catalog: Catalog, mode: PowerMode) -> Steady:
    """The board in a mode with nothing running (the OS keeps a few % of the CPU busy)."""
    parts = part_power_w(catalog, mode, gpu_util=0.0, busy_cores=0.03 * mode.cores, mem_gbps=0.2)
    rails = rail_power_w(catalog, parts)
    return Steady(0.0, 0.0, 0.0, 0.0, 0.0, 0.03, 0.2, parts, rails, catalog.total_power_w(rails))


# --- issue 16: the Empirical Roofline Toolkit's kernels on the twin ------------------------------------
ERT_MEMORY_GPU_UTIL = 0.45   # a streaming kernel keeps the SMs' load/store path busy, not their FP units


@dataclass(frozen=True)
class KernelRates:
    """What one micro-benchmark kernel achieves in a mode: FLOP/s, DRAM bytes/s, and the board's state."""

    flops_per_s: float
    bytes_per_s: float
    steady: Steady


def kernel_state(catalog: Catalog, mode: PowerMode, kernel: str) -> KernelRates:
    """The compute-bound kernel (large FP32 matmuls: the FP32 peak the twin's convolutions and matmuls see,
    cache-resident, a little DRAM traffic) or the bandwidth-bound one (a streaming triad at the DRAM/crossbar
    limit, 2 FLOPs per 12 bytes), with the power the board draws while it runs. The launching thread spins
    on one core, as it does for a workload."""
    hw = catalog.twin
    fp32 = fp32_flops(hw, mode.gpu_mhz)
    bw = min(mode.mem_mhz * 1e6 * 2.0 * hw["mem_bus_bytes"], mode.gpu_mhz * 1e6 * hw["gpu_bytes_per_clk"]) \
        * BANDWIDTH_EFFICIENCY
    if kernel == "compute":
        flops, nbytes, util = fp32, fp32 / 512.0, 1.0       # an N=4096 SGEMM tile loop: ~512 FLOPs per DRAM byte
    elif kernel == "memory":
        flops, nbytes, util = bw * 2.0 / 12.0, bw, ERT_MEMORY_GPU_UTIL
    else:
        raise ValueError(f"kernel must be compute or memory, got {kernel!r}")
    gbps = nbytes / 1e9
    parts = part_power_w(catalog, mode, gpu_util=util, busy_cores=1.0, mem_gbps=gbps)
    rails = rail_power_w(catalog, parts)
    steady = Steady(1.0, 1.0, 0.0, 0.0, util, 1.0 / mode.cores, gbps, parts, rails, catalog.total_power_w(rails))
    return KernelRates(flops, nbytes, steady)


def spinning_state(catalog: Catalog, mode: PowerMode) -> Steady:
    """The board with the benchmark's host thread spinning on one core and the GPU idle: pi0's window."""
    parts = part_power_w(catalog, mode, gpu_util=0.0, busy_cores=1.0, mem_gbps=0.2)
    rails = rail_power_w(catalog, parts)
    return Steady(0.0, 0.0, 0.0, 0.0, 0.0, 1.0 / mode.cores, 0.2, parts, rails, catalog.total_power_w(rails))
