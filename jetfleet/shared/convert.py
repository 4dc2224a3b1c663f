"""Conversions between the domain dataclasses and the wire messages (one place, both sides)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from jetfleet.shared.catalog import KNOBS, Catalog, PowerMode, Rail, catalog_from_knobs, format_mhz
from jetfleet.shared.errors import InvalidArgument
from jetfleet.shared.proto import common_pb2 as pb

# Bounds on what a peer may send (the agent and the controller trust nothing they receive).
MAX_KNOB_VALUES = 256
MAX_RAILS = 32
MAX_NAME_LEN = 128
MAX_MAP_ENTRIES = 64


def mode_to_pb(mode: PowerMode) -> pb.PowerMode:
    return pb.PowerMode(cores=mode.cores, cpu_mhz=mode.cpu_mhz, gpu_mhz=mode.gpu_mhz, mem_mhz=mode.mem_mhz)


def mode_from_pb(msg: pb.PowerMode) -> PowerMode:
    return PowerMode(int(msg.cores), float(msg.cpu_mhz), float(msg.gpu_mhz), float(msg.mem_mhz))


def catalog_to_pb(cat: Catalog) -> pb.Catalog:
    return pb.Catalog(model=cat.model, name=cat.name, cores=list(cat.cores), cpu_mhz=list(cat.cpu_mhz),
                      gpu_mhz=list(cat.gpu_mhz), mem_mhz=list(cat.mem_mhz),
                      presets={k: mode_to_pb(v) for k, v in cat.presets.items()},
                      rails=[pb.Rail(label=r.label, parts=list(r.parts), in_total=r.in_total) for r in cat.rails],
                      grids={name: pb.Grid(**{k: list(v) for k, v in spec.items()})
                             for name, spec in cat.grid_specs.items()})


def check_name(value: str, field: str) -> str:
    if not value or len(value) > MAX_NAME_LEN or any(c.isspace() or not c.isprintable() for c in value):
        raise InvalidArgument(f"{field} must be 1..{MAX_NAME_LEN} printable characters without spaces, "
                              f"got {value[:40]!r}", field=field)
    return value


def catalog_from_pb(msg: pb.Catalog) -> Catalog:
    """A catalog a peer sent, checked for size and sanity before it is believed."""
    check_name(msg.model, "catalog.model")
    for knob in ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz"):
        values = list(getattr(msg, knob))
        if not 1 <= len(values) <= MAX_KNOB_VALUES:
            raise InvalidArgument(f"catalog.{knob} must have 1..{MAX_KNOB_VALUES} values, got {len(values)}",
                                  field=f"catalog.{knob}")
        if any(not math.isfinite(v) or v <= 0 or v > 100_000 for v in values):
            raise InvalidArgument(f"catalog.{knob} has a value outside 0..100000", field=f"catalog.{knob}")
    if len(msg.rails) > MAX_RAILS or len(msg.presets) > MAX_MAP_ENTRIES:
        raise InvalidArgument(f"catalog has more than {MAX_RAILS} rails or {MAX_MAP_ENTRIES} presets",
                              field="catalog.rails")
    rails = [Rail(check_name(r.label, "catalog.rails.label"), tuple(r.parts), r.in_total) for r in msg.rails]
    presets = {check_name(k, "catalog.presets"): str(mode_from_pb(v)) for k, v in msg.presets.items()}
    cat = catalog_from_knobs(msg.model, msg.cores, msg.cpu_mhz, msg.gpu_mhz, msg.mem_mhz,
                             name=msg.name[:MAX_NAME_LEN], presets=presets, rails=rails)
    if len(msg.grids) > MAX_MAP_ENTRIES:
        raise InvalidArgument(f"catalog has more than {MAX_MAP_ENTRIES} grids", field="catalog.grids")
    grids: dict[str, dict[str, tuple[float, ...]]] = {}
    for name, g in msg.grids.items():
        spec = {k: tuple(float(x) for x in getattr(g, k)) for k in KNOBS if len(getattr(g, k))}
        for knob, grid_values in spec.items():
            if not set(grid_values) <= set(cat.knob_values(knob)):
                raise InvalidArgument(f"catalog grid {name!r} has {knob} values outside the catalog",
                                      field="catalog.grids")
        grids[check_name(name, "catalog.grids")] = spec
    return replace(cat, grid_specs=grids)


def sample_to_pb(s: Any) -> pb.TelemetrySample:
    return pb.TelemetrySample(t_s=s.t_s, rails_w=dict(s.rails_w), total_w=s.total_w, cpu_mhz=s.cpu_mhz,
                              gpu_mhz=s.gpu_mhz, mem_mhz=s.mem_mhz, cores_online=s.cores_online,
                              temps_c=dict(s.temps_c), cpu_util=s.cpu_util, gpu_util=s.gpu_util)


def check_sample(msg: pb.TelemetrySample, rails: set[str]) -> None:
    """A telemetry sample is finite, non-negative, and only names rails of the board's map."""
    if len(msg.rails_w) > MAX_RAILS or len(msg.temps_c) > MAX_MAP_ENTRIES:
        raise InvalidArgument(f"telemetry sample has more than {MAX_RAILS} rails or {MAX_MAP_ENTRIES} temperatures",
                              field="telemetry.samples")
    unknown = set(msg.rails_w) - rails
    if unknown:
        raise InvalidArgument(f"telemetry names rails not in the board's rail map: {', '.join(sorted(unknown))} "
                              f"(allowed: {', '.join(sorted(rails))})", field="telemetry.samples.rails_w")
    values = [msg.t_s, msg.total_w, msg.cpu_mhz, msg.gpu_mhz, msg.mem_mhz, *msg.rails_w.values()]
    if any(not math.isfinite(v) or v < 0 for v in values) or any(not math.isfinite(v) for v in msg.temps_c.values()):
        raise InvalidArgument("telemetry sample has a negative or non-finite value", field="telemetry.samples")


def mode_text(mode: pb.PowerMode) -> str:
    return "/".join([str(mode.cores), format_mhz(mode.cpu_mhz), format_mhz(mode.gpu_mhz), format_mhz(mode.mem_mhz)])
