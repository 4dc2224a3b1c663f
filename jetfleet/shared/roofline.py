"""Pagoda's time and energy rooflines (ARCHITECTURE §8), the arithmetic both sides share.

Per power mode: the peak FLOP/s and DRAM bandwidth the Empirical Roofline Toolkit's two kernels achieve,
and an energy model E = eps_flop * W + eps_byte * Q + pi0 * T fitted from the board's power in three
windows of the same measurement (idle, compute kernel, bandwidth kernel). A workload is placed on them
by its FLOPs W and DRAM bytes Q per minibatch from the characterisation's analytical model (training =
3 x inference, Pagoda's rule, unless a forward-only characterisation exists).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jetfleet.shared.errors import FailedPrecondition, InvalidArgument

KERNELS = ("compute", "memory")
MIN_PROFILED_WORKLOADS = 3         # the profile fit has three unknowns: one workload per unknown at least
PHASES = ("training", "inference")
TRAINING_PER_INFERENCE = 3.0       # Pagoda: a training step costs 3 x a forward pass
DEFAULT_KERNEL_S = 2.0             # board seconds per kernel
MAX_KERNEL_S = 600.0
TRIAD_FLOPS_PER_BYTE = 2.0 / 12.0  # a[i] = b[i] + s * c[i] in FP32: 2 FLOPs per 12 bytes moved


@dataclass(frozen=True)
class EnergyFit:
    """The energy roofline's three constants of one mode."""

    eps_flop_j: float     # J per FLOP
    eps_byte_j: float     # J per DRAM byte
    pi0_w: float          # constant power while running (W)


def fit_energy(*, idle_w: float, compute_w: float, memory_w: float, peak_flops: float, compute_bytes_per_s: float,
               peak_bytes_per_s: float, memory_flops: float) -> EnergyFit:
    """Solve P = pi0 + eps_flop * F + eps_byte * B for the two kernels, with pi0 the board's power with the
    kernels' host thread running and nothing on the GPU (the idle window).

    Two equations, two unknowns: [F_c B_c; F_m B_m] [eps_flop; eps_byte] = [P_c - pi0; P_m - pi0]. A negative
    solution (noise on a kernel that barely lifts power) is clipped at 0 and the other refitted alone."""
    for name, v in (("idle_w", idle_w), ("compute_w", compute_w), ("memory_w", memory_w),
                    ("peak_flops", peak_flops), ("peak_bytes_per_s", peak_bytes_per_s)):
        if not (math.isfinite(v) and v > 0):
            raise InvalidArgument(f"{name}={v!r} must be a positive number", field=name)
    dc, dm = max(0.0, compute_w - idle_w), max(0.0, memory_w - idle_w)
    fc, bc, fm, bm = peak_flops, max(0.0, compute_bytes_per_s), max(0.0, memory_flops), peak_bytes_per_s
    det = fc * bm - bc * fm
    ef = (dc * bm - bc * dm) / det if det else dc / fc
    eb = (fc * dm - dc * fm) / det if det else dm / bm
    if ef < 0:
        ef, eb = 0.0, (dc * bc + dm * bm) / (bc * bc + bm * bm)
    if eb < 0:
        eb, ef = 0.0, (dc * fc + dm * fm) / (fc * fc + fm * fm)
    return EnergyFit(ef, eb, idle_w)


@dataclass(frozen=True)
class ProfiledCost:
    """One workload as profiled in a mode: its analytical W and Q per minibatch, and the profile's time and energy
    per minibatch (median minibatch time x mean power over the profile's window)."""

    workload: str
    flops: float
    nbytes: float
    time_s: float
    energy_j: float


def profile_energy_j(s: ProfiledCost, fit: EnergyFit) -> float:
    """What ``fit`` says the profiled minibatch costs: eps_flop W + eps_byte Q + pi0 T, T the profiled time."""
    return fit.eps_flop_j * s.flops + fit.eps_byte_j * s.nbytes + fit.pi0_w * s.time_s


def energy_mape(samples: Sequence[ProfiledCost], fit: EnergyFit) -> float:
    """Mean absolute percentage error (as a fraction) of ``fit``'s energy over the profiled workloads."""
    return sum(abs(profile_energy_j(s, fit) - s.energy_j) / s.energy_j for s in samples) / len(samples)


def fit_energy_from_profiles(samples: Sequence[ProfiledCost], where: str = "this mode") -> EnergyFit:
    """Fit eps_flop, eps_byte, pi0 >= 0 of E = eps_flop W + eps_byte Q + pi0 T to the profiled workloads of one
    mode (one sample per workload): non-negative least squares on the relative error (each row divided by its
    E, so every workload weighs the same whatever its size). Three unknowns: refused (FailedPrecondition) with
    fewer than ``MIN_PROFILED_WORKLOADS`` workloads, naming how many there are.

    The NNLS is solved exactly by its active sets: with three unknowns, the least-squares solution on each of
    the 7 non-empty supports, the best of the non-negative ones (the optimum is one of them)."""
    import numpy as np

    names = sorted({s.workload for s in samples})
    if len(names) != len(samples):
        raise InvalidArgument("one profiled sample per workload", field="samples")
    if len(samples) < MIN_PROFILED_WORKLOADS:
        raise FailedPrecondition(
            f"fitting the energy roofline from profiles needs >= {MIN_PROFILED_WORKLOADS} workloads profiled at "
            f"{where}; {len(samples)} profiled" + (f" ({', '.join(names)})" if names else "")
            + f": profile {MIN_PROFILED_WORKLOADS - len(samples)} more there (jetfleet profile start --workload W --modes ...)",
            field="modes")
    for s in samples:
        for name, v in (("flops", s.flops), ("nbytes", s.nbytes), ("time_s", s.time_s), ("energy_j", s.energy_j)):
            if not (math.isfinite(v) and v > 0):
                raise InvalidArgument(f"{s.workload}: {name}={v!r} must be a positive number", field=name)
    a = np.array([[s.flops, s.nbytes, s.time_s] for s in samples]) / np.array([[s.energy_j] for s in samples])
    scale = a.max(axis=0)
    a = a / scale
    ones = np.ones(len(samples))
    best: tuple[float, Any] | None = None
    for support in ((0, 1, 2), (0, 1), (0, 2), (1, 2), (0,), (1,), (2,)):
        sub = a[:, list(support)]
        x_sub = np.linalg.lstsq(sub, ones, rcond=None)[0]
        if (x_sub < 0).any():
            continue
        res = float(((sub @ x_sub - ones) ** 2).sum())
        if best is None or res < best[0] - 1e-15:
            x = np.zeros(3)
            x[list(support)] = x_sub
            best = (res, x / scale)
    assert best is not None   # a single column's LS coefficient is positive: every entry is
    ef, eb, pi0 = (float(v) for v in best[1])
    return EnergyFit(ef, eb, pi0)


def roofline_time_s(flops: float, nbytes: float, peak_flops: float, peak_bytes_per_s: float) -> float:
    """Pagoda's time roofline: T = max(W / peak, Q / BW)."""
    return max(flops / peak_flops, nbytes / peak_bytes_per_s)


def roofline_energy_j(flops: float, nbytes: float, time_s: float, fit: EnergyFit) -> float:
    """Pagoda's energy roofline: E = eps_flop W + eps_byte Q + pi0 T."""
    return fit.eps_flop_j * flops + fit.eps_byte_j * nbytes + fit.pi0_w * time_s


def attainable_flops(intensity: float, peak_flops: float, peak_bytes_per_s: float) -> float:
    """P = min(peak, I x BW) at arithmetic intensity I (FLOPs per byte)."""
    return min(peak_flops, intensity * peak_bytes_per_s)


def check_phase(phase: str) -> str:
    """'' -> 'training'; anything but training or inference is refused naming both."""
    phase = phase or "training"
    if phase not in PHASES:
        raise InvalidArgument(f"phase {phase[:32]!r} is not one of {', '.join(PHASES)}", field="phase")
    return phase


def workload_cost(char: Mapping[str, Any], minibatch_size: int, phase: str = "training",
                  inference: Mapping[str, Any] | None = None) -> tuple[float, float]:
    """(FLOPs, DRAM bytes) of one minibatch (training) or one served batch (inference).

    ``char``: a training step's characterisation; ``inference``: the workload's forward-pass characterisation
    by batch size ({"by_batch": {"1": cost, ...}}, issue 15), interpolated between characterised sizes. Q is
    the ideal traffic of the analytical per-operator model: every kernel's inputs and outputs once (matmul/conv
    bins plus the memory-bound kernels), not the cache-dependent re-reads. Without a forward-pass
    characterisation, inference = training / 3 (Pagoda's rule)."""
    from jetfleet.shared.workloads.inference import bracket

    phase = check_phase(phase)
    if minibatch_size < 1:
        raise InvalidArgument(f"minibatch_size={minibatch_size} must be >= 1", field="minibatch_size")

    def of(c: Mapping[str, Any], size: int) -> tuple[float, float]:
        scale = size / float(c["minibatch_size"])
        nbytes = sum(b for _f, b, _n in list(c["conv_bins"]) + list(c["matmul_bins"])) + float(c["memory_bytes"])
        return float(c["flops"]) * scale, nbytes * scale

    if phase == "inference" and inference is not None:
        lo, hi, w = bracket(minibatch_size)
        a = of(inference["by_batch"][str(lo)], lo)
        b = of(inference["by_batch"][str(hi)], hi) if w else a
        return (1 - w) * a[0] + w * b[0], (1 - w) * a[1] + w * b[1]
    wt, qt = of(char, minibatch_size)
    if phase == "inference":
        return wt / TRAINING_PER_INFERENCE, qt / TRAINING_PER_INFERENCE
    return wt, qt
