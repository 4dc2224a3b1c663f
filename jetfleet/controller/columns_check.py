"""Checking telemetry sent as columns, per batch: the same bounds as ``check_sample`` applies to one
sample (``jetfleet.shared.bounds``, the board's rail map), as one vectorised comparison of the whole
block against bounds built once per layout. A block that fails is looked at sample by sample, so the
error names the same field a sample would."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from jetfleet.shared.bounds import MAX_MAP_ENTRIES, MAX_MHZ, MAX_TEMP_C, MAX_TIMESTAMP_S, MIN_TEMP_C, check_count
from jetfleet.shared.catalog import Catalog, power_limit_w
from jetfleet.shared.columns import SCALARS, samples_from_columns
from jetfleet.shared.convert import MAX_RAILS, check_sample, label_ok
from jetfleet.shared.errors import InvalidArgument
from jetfleet.shared.proto import common_pb2


@lru_cache(maxsize=1024)
def layout_ok(rails: tuple[str, ...], temps: tuple[str, ...], allowed: frozenset[str]) -> bool:
    """The rails are the board's, named once each, and the sensors' names are labels, named once each and no more
    of them than a map may hold (so a block of this layout may be checked number by number)."""
    return (set(rails) <= allowed and len(set(rails)) == len(rails) and len(set(temps)) == len(temps)
            and len(temps) <= MAX_MAP_ENTRIES and all(label_ok(t) for t in temps))


@lru_cache(maxsize=256)
def bounds(n: int, nr: int, nt: int, max_w: float, max_cores: int) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper bounds of every number of a block of this layout (``SCALARS``, rails, temperatures)."""
    per = {"t_s": (0, MAX_TIMESTAMP_S), "total_w": (0, max_w), "cpu_mhz": (0, MAX_MHZ), "gpu_mhz": (0, MAX_MHZ),
           "mem_mhz": (0, MAX_MHZ), "cores_online": (0, max_cores), "cpu_util": (0, 1), "gpu_util": (0, 1)}
    lo = [per[k][0] for k in SCALARS for _ in range(n)] + [0.0] * (n * nr) + [MIN_TEMP_C] * (n * nt)
    hi = [per[k][1] for k in SCALARS for _ in range(n)] + [max_w] * (n * nr) + [MAX_TEMP_C] * (n * nt)
    return np.array(lo, dtype=float), np.array(hi, dtype=float)


def check_columns(cols: common_pb2.SampleColumns, catalog: Catalog, field: str = "telemetry.columns") -> int:
    """The number of samples in ``cols`` if every one is physically possible on the board and names only rails of
    its rail map; InvalidArgument naming the first bad field otherwise (nothing is kept of a refused batch)."""
    n, rails, temps = cols.samples, tuple(cols.rails), tuple(cols.temps)
    check_count(len(rails), MAX_RAILS, f"{field}.rails")
    check_count(len(temps), MAX_MAP_ENTRIES, f"{field}.temps")
    expected = 8 * n * (len(SCALARS) + len(rails) + len(temps))
    if len(cols.values) != expected:
        raise InvalidArgument(f"{field}.values holds {len(cols.values)} bytes; {n} samples of {len(rails)} rails and "
                              f"{len(temps)} temperatures take {expected}", field=f"{field}.values")
    if len(set(rails)) != len(rails) or len(set(temps)) != len(temps):
        raise InvalidArgument(f"{field} names a rail or sensor twice", field=f"{field}.rails")
    if n == 0:
        return 0
    if layout_ok(rails, temps, catalog.rail_label_set):
        a = np.frombuffer(cols.values, dtype="<f8")
        lo, hi = bounds(n, len(rails), len(temps), power_limit_w(catalog.model), catalog.cores[-1])
        cores = a[5 * n:6 * n]
        if ((a >= lo) & (a <= hi)).all() and (np.floor(cores) == cores).all():  # NaN fails every comparison
            return n
    cores = np.frombuffer(cols.values, dtype="<f8")[5 * n:6 * n]
    if not bool(np.all((cores >= 0) & (cores <= catalog.cores[-1]) & (cores == np.floor(cores)))):
        raise InvalidArgument(f"{field}.cores_online must be whole numbers 0..{catalog.cores[-1]}",
                              field=f"{field}.cores_online")
    for s in samples_from_columns(cols):   # the slow way, for the message: the first bad sample names its field
        check_sample(s, catalog, field)
    raise InvalidArgument(f"{field} holds an impossible value", field=field)
