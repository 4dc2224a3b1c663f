"""A run's power samples as columns (issue 28): the twin builds a profile's samples as arrays, the profiler finds
the steady state and the window on the time and power columns, and the agent sends the window as the wire's
``SampleColumns`` block, so no object is made per sample on the way (a dataclass per sample was 14% of a
campaign on an instant twin). Samples that do not share one set of rails and sensors (a real board's sampler
may lose a rail mid-run) stay a list of samples, and go one message each."""

from __future__ import annotations

import bisect
import sys
from array import array
from typing import Iterator, Sequence

from jetfleet.agent.device.base import TelemetrySample
from jetfleet.shared.columns import SCALARS, columns_from_samples
from jetfleet.shared.proto import common_pb2 as pb

_SWAP = sys.byteorder != "little"   # the wire block is little-endian


class PowerTrace:
    """Samples in time order, in the wire block's layout (``SampleColumns``: each of SCALARS as a column of ``n``
    numbers, then every sample's rails, then every sample's temperatures, a row per sample), or, for samples
    without one shared layout, the samples themselves."""

    def __init__(self, n: int, rails: Sequence[str], temps: Sequence[str], values: array,  # type: ignore[type-arg]
                 samples: list[TelemetrySample] | None = None) -> None:
        self.n, self.rails, self.temps, self.values = n, tuple(rails), tuple(temps), values
        self._samples = samples

    @classmethod
    def from_samples(cls, samples: list[TelemetrySample]) -> PowerTrace:
        """Samples read one by one (a real board's sampler): columns where they share a layout."""
        cols = columns_from_samples(samples)
        if cols is None:
            return cls(len(samples), (), (), array("d"), samples)
        values = array("d")
        values.frombytes(cols.values)
        if _SWAP:
            values.byteswap()
        return cls(len(samples), cols.rails, cols.temps, values)

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[TelemetrySample]:
        return iter(self.samples())

    def column(self, name: str) -> list[float]:
        """One scalar column (``SCALARS``: t_s, total_w, ...)."""
        if self._samples is not None:
            return [float(getattr(s, name)) for s in self._samples]
        i = SCALARS.index(name)
        return self.values[i * self.n:(i + 1) * self.n].tolist()

    def window(self, t0_s: float, t1_s: float) -> PowerTrace:
        """The samples with t0 <= t_s <= t1 (the time column is in order: two bisections, one slice per column)."""
        if self._samples is not None:
            kept = [s for s in self._samples if t0_s <= s.t_s <= t1_s]
            return PowerTrace(len(kept), (), (), array("d"), kept)
        t = self.column("t_s")
        lo, hi = bisect.bisect_left(t, t0_s), bisect.bisect_right(t, t1_s)
        n, nr, nt, k = self.n, len(self.rails), len(self.temps), len(SCALARS)
        values = array("d")
        for c in range(k):
            values.extend(self.values[c * n + lo:c * n + hi])
        values.extend(self.values[k * n + lo * nr:k * n + hi * nr])
        values.extend(self.values[(k + nr) * n + lo * nt:(k + nr) * n + hi * nt])
        return PowerTrace(hi - lo, self.rails, self.temps, values)

    def columns_pb(self) -> pb.SampleColumns | None:
        """The wire block; None for samples without one layout (send those one message each)."""
        if self._samples is not None:
            return None
        values = self.values
        if _SWAP:
            values = array("d", values)
            values.byteswap()
        return pb.SampleColumns(samples=self.n, rails=list(self.rails), temps=list(self.temps),
                                values=values.tobytes())

    def samples(self) -> list[TelemetrySample]:
        """The samples as objects (for callers that want them one by one; a campaign's window never does)."""
        if self._samples is not None:
            return list(self._samples)
        n, nr, nt = self.n, len(self.rails), len(self.temps)
        v = self.values.tolist()
        t_s, total, cpu, gpu, mem, cores, cu, gu = (v[i * n:(i + 1) * n] for i in range(len(SCALARS)))
        base_r, base_t = len(SCALARS) * n, (len(SCALARS) + nr) * n
        return [TelemetrySample(t_s=t_s[i], rails_w=dict(zip(self.rails, v[base_r + i * nr:base_r + (i + 1) * nr])),
                                total_w=total[i], cpu_mhz=cpu[i], gpu_mhz=gpu[i], mem_mhz=mem[i],
                                cores_online=int(cores[i]),
                                temps_c=dict(zip(self.temps, v[base_t + i * nt:base_t + (i + 1) * nt])),
                                cpu_util=cu[i], gpu_util=gu[i])
                for i in range(n)]
