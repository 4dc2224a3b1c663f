"""The boards' default DVFS governors on the twin (issue 16): what a board left to its governors runs at.

Real boards run schedutil on the CPU clusters, nvhost_podgov on the GPU and the EMC's activity-monitor
(actmon) governor on memory. Each picks a frequency from the load it sees; the twin models their steady
state as a fixed point over its own physics, with every core online (the governors do not hotplug):
- schedutil: f = 1.25 x f_max x util of the busiest core, rounded up to a table value. The serving thread
  busy-waits on the GPU (CUDA synchronisation spins), so its core is 100% busy and the cluster runs at f_max.
- nvhost_podgov: keeps the GPU's load near its ``load_target`` (700/1000 by default): the lowest GPU
  frequency whose load (GPU busy share of each batch) is at most PODGOV_LOAD_TARGET, the maximum if none is.
- EMC: the activity monitor's choice (the lowest EMC rate whose bandwidth use is at most EMC_TARGET_UTIL of
  that rate's peak), floored by the GPU's EMC request (Tegra couples them: a GPU at a share of its maximum
  asks for EMC at EMC3D_RATIO x that share of EMC's maximum).
What is not modelled: the governors' sampling periods and the transients around a change (a steady stream
of back-to-back batches gives them time to settle), and boost on input events.
"""

from __future__ import annotations

from collections.abc import Callable

from jetfleet.shared.catalog import Catalog, PowerMode
from jetfleet.twin.physics import BANDWIDTH_EFFICIENCY, Steady

PODGOV_LOAD_TARGET = 0.70
SCHEDUTIL_HEADROOM = 1.25
EMC_TARGET_UTIL = 0.50
EMC3D_RATIO = 1.0
MAX_ITERATIONS = 20


def governed_mode(catalog: Catalog, state: Callable[[PowerMode], Steady], *,
                  gpu_mhz: float | None = None) -> PowerMode:
    """The mode the default governors settle in while ``state(mode)`` (the twin's steady state of the running
    work in a mode) runs; a fixed point of the three governors, each seeing the others' current choice.
    ``gpu_mhz`` pins the GPU (min = max through devfreq, as a frequency sweep does) and leaves the CPU and the
    EMC to their governors."""
    hw = catalog.twin
    cores = max(catalog.cores)
    mode = PowerMode(cores, max(catalog.cpu_mhz), gpu_mhz or max(catalog.gpu_mhz), max(catalog.mem_mhz))
    for _ in range(MAX_ITERATIONS):
        s = state(mode)
        busiest = min(1.0, max(s.cpu_util * mode.cores, 1.0 if s.gpu_util > 0 else 0.0))
        want_cpu = SCHEDUTIL_HEADROOM * max(catalog.cpu_mhz) * busiest
        cpu = next((f for f in catalog.cpu_mhz if f >= want_cpu), max(catalog.cpu_mhz))
        gpu = gpu_mhz or max(catalog.gpu_mhz)
        for f in () if gpu_mhz else catalog.gpu_mhz:
            t = state(PowerMode(cores, cpu, f, mode.mem_mhz))
            if t.gpu_util <= PODGOV_LOAD_TARGET:
                gpu = f
                break
        mem = max(catalog.mem_mhz)
        floor = EMC3D_RATIO * gpu / max(catalog.gpu_mhz) * max(catalog.mem_mhz)
        for f in catalog.mem_mhz:
            if f < floor - 1e-6 and f != max(catalog.mem_mhz):
                continue
            t = state(PowerMode(cores, cpu, gpu, f))
            peak = f * 1e6 * 2.0 * hw["mem_bus_bytes"] * BANDWIDTH_EFFICIENCY / 1e9
            if t.mem_gbps <= EMC_TARGET_UTIL * peak:
                mem = f
                break
        new = PowerMode(cores, cpu, gpu, mem)
        if new == mode:
            return mode
        mode = new
    return mode
