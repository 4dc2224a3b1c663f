"""Telemetry samples as columns (``SampleColumns``): a batch of samples becomes one block of float64
numbers (``array``, no numpy needed on a board), built with one call per column; a message per sample
costs two protobuf maps each (microseconds apiece in Python). The controller checks a block with one
vectorised comparison and reads it back as samples only where a sample is asked for (a watcher, the
latest reading, a window, raw samples)."""

from __future__ import annotations

import sys
from array import array
from typing import Any, Sequence

from jetfleet.shared.proto import agent_pb2
from jetfleet.shared.proto import common_pb2 as pb

SCALARS = ("t_s", "total_w", "cpu_mhz", "gpu_mhz", "mem_mhz", "cores_online", "cpu_util", "gpu_util")
_SWAP = sys.byteorder != "little"   # the block is little-endian on the wire


def columns_from_samples(samples: Sequence[Any]) -> pb.SampleColumns | None:
    """Samples (anything with TelemetrySample's fields) as columns; None when they do not share one set of
    rails and temperature sensors (send those one message each)."""
    if not samples:
        return pb.SampleColumns()
    rails = list(samples[0].rails_w)
    temps = list(samples[0].temps_c)
    values = array("d")
    for name in SCALARS:
        values.extend([getattr(s, name) for s in samples])
    try:
        for part, keys in (("rails_w", rails), ("temps_c", temps)):
            for s in samples:
                d = getattr(s, part)
                if len(d) != len(keys):
                    return None
                values.extend([d[k] for k in keys])
    except KeyError:
        return None
    if _SWAP:
        values.byteswap()
    return pb.SampleColumns(samples=len(samples), rails=rails, temps=temps, values=values.tobytes())


def column_values(cols: pb.SampleColumns | bytes) -> array:  # type: ignore[type-arg]
    """The block's numbers (in this machine's byte order); ``cols`` may be the block's ``values`` bytes alone."""
    values = array("d")
    values.frombytes(cols if isinstance(cols, bytes) else cols.values)
    if _SWAP:
        values.byteswap()
    return values


def column(cols: pb.SampleColumns, name: str) -> list[float]:
    """One scalar column (``SCALARS``) of a checked block."""
    n = cols.samples
    i = SCALARS.index(name)
    return column_values(cols)[i * n:(i + 1) * n].tolist()


def samples_from_columns(cols: pb.SampleColumns, start: int = 0) -> list[pb.TelemetrySample]:
    """The samples of a (checked) block from index ``start``, as wire TelemetrySamples."""
    return samples_from_values(cols.samples, list(cols.rails), list(cols.temps), cols.values, start)


def samples_from_values(n: int, rails: Sequence[str], temps: Sequence[str], raw: bytes,
                        start: int = 0) -> list[pb.TelemetrySample]:
    """The samples of a (checked) block given by its parts (``raw``: its ``values`` bytes, ``n`` samples of these
    rails and sensors) from index ``start``, as wire TelemetrySamples."""
    nr, nt = len(rails), len(temps)
    v = column_values(raw).tolist()
    t_s, total, cpu, gpu, mem, cores, cu, gu = (v[i * n:(i + 1) * n] for i in range(len(SCALARS)))
    rw = v[len(SCALARS) * n:(len(SCALARS) + nr) * n]
    tc = v[(len(SCALARS) + nr) * n:]
    return [pb.TelemetrySample(t_s=t_s[i], total_w=total[i], cpu_mhz=cpu[i], gpu_mhz=gpu[i], mem_mhz=mem[i],
                               cores_online=int(cores[i]), cpu_util=cu[i], gpu_util=gu[i],
                               rails_w=dict(zip(rails, rw[i * nr:(i + 1) * nr])),
                               temps_c=dict(zip(temps, tc[i * nt:(i + 1) * nt])))
            for i in range(start, n)]


def profile_power_w(p: agent_pb2.ProfileResult) -> list[float]:
    """Board power (W) of every sample of a profile's window, whichever way it was sent."""
    return [s.total_w for s in p.power] + (column(p.power_columns, "total_w") if p.power_columns.samples else [])


def profile_samples(p: agent_pb2.ProfileResult) -> int:
    """How many power samples a profile's window holds."""
    return len(p.power) + p.power_columns.samples
