"""The Empirical Roofline Toolkit's kernels in torch on CUDA, for a real board (issue 16). Imports torch.

``compute``: back-to-back N x N FP32 matmuls (2 N^3 FLOPs each, 3 N^2 x 4 bytes of DRAM traffic at most),
``memory``: a streaming triad a = b + s * c over arrays far larger than L2 (12 bytes and 2 FLOPs per element),
``idle``: the host thread spins on the clock with nothing on the GPU. Each runs for about ``seconds`` of wall
time, synchronising the GPU before the clock is read."""

from __future__ import annotations

import time

MATMUL_N = 2048
TRIAD_ELEMENTS = 32 * 1024 * 1024   # 3 x 128 MiB: far beyond any Jetson's L2


def run(kernel: str, seconds: float) -> tuple[float, float, float, float]:
    """(FLOPs, DRAM bytes, start, end) of ``kernel`` run for ``seconds`` on the CUDA device."""
    import torch

    if kernel == "idle":
        start = time.time()
        while time.time() - start < seconds:
            pass
        return 0.0, 0.0, start, time.time()
    if not torch.cuda.is_available():
        raise RuntimeError("torch sees no CUDA device on this board")
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False     # FP32 on the CUDA cores: the roof the characterisation uses
    flops = nbytes = 0.0
    if kernel == "compute":
        a = torch.randn(MATMUL_N, MATMUL_N, device=dev)
        b = torch.randn(MATMUL_N, MATMUL_N, device=dev)
        out = torch.empty_like(a)
        torch.mm(a, b, out=out)
        torch.cuda.synchronize()
        start = time.time()
        while time.time() - start < seconds:
            for _ in range(8):
                torch.mm(a, b, out=out)
            torch.cuda.synchronize()
            flops += 8 * 2.0 * MATMUL_N ** 3
            nbytes += 8 * 3.0 * MATMUL_N ** 2 * 4
    elif kernel == "memory":
        b = torch.randn(TRIAD_ELEMENTS, device=dev)
        c = torch.randn(TRIAD_ELEMENTS, device=dev)
        a = torch.empty_like(b)
        torch.add(b, c, alpha=1.5, out=a)
        torch.cuda.synchronize()
        start = time.time()
        while time.time() - start < seconds:
            for _ in range(8):
                torch.add(b, c, alpha=1.5, out=a)
            torch.cuda.synchronize()
            flops += 8 * 2.0 * TRIAD_ELEMENTS
            nbytes += 8 * 12.0 * TRIAD_ELEMENTS
    else:
        raise ValueError(f"kernel must be idle, compute or memory, got {kernel!r}")
    return flops, nbytes, start, time.time()
