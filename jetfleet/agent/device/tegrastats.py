"""Parse tegrastats lines (JetPack 4 to 6 formats) into telemetry.

Rails appear as ``NAME <instant>mW/<average>mW``; the GPU as ``GR3D_FREQ 12%@1300`` (Xavier) or
``GR3D_FREQ 12%@[1300,1300]`` (Orin, one value per GPC); the CPU as ``CPU [5%@2201,off,...]``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from jetfleet.agent.device.base import TelemetrySample
from jetfleet.agent.device.thermal import normalise_mapping
from jetfleet.shared.catalog import Catalog
from jetfleet.shared.errors import InvalidArgument

_RAIL = re.compile(r"\b([A-Z][A-Z0-9_]*)\s+(\d+)mW/(\d+)mW")
_CPU = re.compile(r"\bCPU \[([^\]]*)\]")
_GPU = re.compile(r"\bGR3D_FREQ (\d+)%(?:@\[?([\d,]+)\]?)?")
_EMC = re.compile(r"\bEMC_FREQ (\d+)%(?:@(\d+))?")
_TEMP = re.compile(r"\b([A-Za-z_]+\d*)@(-?[\d.]+)C\b")
_RAM = re.compile(r"\bRAM (\d+)/(\d+)MB")
_TIME = re.compile(r"^(\d\d-\d\d-\d{4} \d\d:\d\d:\d\d)")


@dataclass(frozen=True)
class TegrastatsLine:
    """One parsed tegrastats line: rails (mW), per-core CPU load and clock, GPU and EMC load and clock, temperatures."""

    timestamp: str | None
    rails_mw: dict[str, tuple[int, int]]          # name -> (instant, average) mW
    cpu: list[tuple[int, int] | None]             # per core (util %, MHz) or None when off
    gpu_util_pct: int | None
    gpu_mhz: list[int] = field(default_factory=list)
    emc_util_pct: int | None = None
    emc_mhz: int | None = None
    temps_c: dict[str, float] = field(default_factory=dict)
    ram_used_mb: int | None = None

    def to_sample(self, catalog: Catalog, t_s: float) -> TelemetrySample:
        """Keep the rails of the board's rail map (instant values, W); temperatures normalised like jtop's."""
        labels = set(catalog.rail_labels())
        rails = {k: v[0] / 1000.0 for k, v in self.rails_mw.items() if k in labels}
        online = [c for c in self.cpu if c is not None]
        return TelemetrySample(
            t_s=t_s, rails_w=rails, total_w=catalog.total_power_w(rails),
            cpu_mhz=float(max((c[1] for c in online), default=0)),
            gpu_mhz=float(max(self.gpu_mhz, default=0)), mem_mhz=float(self.emc_mhz or 0),
            cores_online=len(online), temps_c=normalise_mapping(self.temps_c),
            cpu_util=sum(c[0] for c in online) / 100.0 / max(1, len(online)),
            gpu_util=(self.gpu_util_pct or 0) / 100.0)


def parse_line(line: str) -> TegrastatsLine:
    """Parse one tegrastats line of any supported JetPack; InvalidArgument if it has neither a CPU list nor a rail."""
    cpu_m = _CPU.search(line)
    if not cpu_m and not _RAIL.search(line):
        raise InvalidArgument(f"not a tegrastats line: {line[:80]!r}", field="line")
    cpu: list[tuple[int, int] | None] = []
    for part in (cpu_m.group(1).split(",") if cpu_m else []):
        part = part.strip()
        m = re.fullmatch(r"(\d+)%@(\d+)", part)
        cpu.append((int(m.group(1)), int(m.group(2))) if m else None)
    gpu = _GPU.search(line)
    emc = _EMC.search(line)
    ram = _RAM.search(line)
    ts = _TIME.search(line)
    rails = {m.group(1): (int(m.group(2)), int(m.group(3))) for m in _RAIL.finditer(line)}
    return TegrastatsLine(
        timestamp=ts.group(1) if ts else None, rails_mw=rails, cpu=cpu,
        gpu_util_pct=int(gpu.group(1)) if gpu else None,
        gpu_mhz=[int(x) for x in gpu.group(2).split(",")] if gpu and gpu.group(2) else [],
        emc_util_pct=int(emc.group(1)) if emc else None,
        emc_mhz=int(emc.group(2)) if emc and emc.group(2) else None,
        temps_c={m.group(1): float(m.group(2)) for m in _TEMP.finditer(line)},
        ram_used_mb=int(ram.group(1)) if ram else None)
