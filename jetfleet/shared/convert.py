"""Conversions between the domain dataclasses and the wire messages (one place, both sides)."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from functools import lru_cache
from typing import Any, Sequence

from jetfleet.shared.bounds import (
    MAX_MAP_ENTRIES,
    MAX_MHZ,
    MAX_NAME_BYTES,
    MAX_REASON_BYTES,
    MAX_TEMP_C,
    MAX_TIMESTAMP_S,
    MAX_WORKLOADS,
    MIN_TEMP_C,
    check_count,
    check_id,
    check_label,
    check_range,
    check_text,
)
from jetfleet.shared.catalog import KNOBS, Catalog, PowerMode, Rail, catalog_from_knobs, format_mhz, power_limit_w
from jetfleet.shared.errors import InvalidArgument
from jetfleet.shared.proto import common_pb2 as pb
from jetfleet.shared.template_args import ARG_NAME, MAX_ARGS, ArgRule

# Bounds on what a peer may send (the agent and the controller trust nothing they receive);
# identifiers, labels and text are bounded in ``jetfleet.shared.bounds``.
MAX_KNOB_VALUES = 256
MAX_RAILS = 32
MAX_RAIL_PARTS = 8
_LABEL_FAST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}\Z").match   # bounds.LABEL_RULE


def mode_to_pb(mode: PowerMode) -> pb.PowerMode:
    """A PowerMode as a wire PowerMode."""
    return pb.PowerMode(cores=mode.cores, cpu_mhz=mode.cpu_mhz, gpu_mhz=mode.gpu_mhz, mem_mhz=mode.mem_mhz)


def mode_from_pb(msg: pb.PowerMode) -> PowerMode:
    """A wire PowerMode as a PowerMode (not checked against a catalog)."""
    return PowerMode(int(msg.cores), float(msg.cpu_mhz), float(msg.gpu_mhz), float(msg.mem_mhz))


def catalog_to_pb(cat: Catalog) -> pb.Catalog:
    """A catalog as a wire Catalog: knobs, presets, rails and grids."""
    return pb.Catalog(model=cat.model, name=cat.name, cores=list(cat.cores), cpu_mhz=list(cat.cpu_mhz),
                      gpu_mhz=list(cat.gpu_mhz), mem_mhz=list(cat.mem_mhz),
                      presets={k: mode_to_pb(v) for k, v in cat.presets.items()},
                      rails=[pb.Rail(label=r.label, parts=list(r.parts), in_total=r.in_total) for r in cat.rails],
                      grids={name: pb.Grid(**{k: list(v) for k, v in spec.items()})
                             for name, spec in cat.grid_specs.items()})


def catalog_from_pb(msg: pb.Catalog) -> Catalog:
    """A catalog a peer sent, checked for size and sanity before it is believed.

    A lab has a few board models and thousands of boards sending the same catalog in every hello: a catalog
    already checked is recognised by its bytes and the same (immutable) Catalog returned; a refused one is
    checked again each time it is sent."""
    return _catalog_of(msg.SerializeToString(deterministic=True))


@lru_cache(maxsize=64)
def _catalog_of(data: bytes) -> Catalog:
    return _check_catalog(pb.Catalog.FromString(data))


def _check_catalog(msg: pb.Catalog) -> Catalog:
    check_id(msg.model, "catalog.model")
    check_text(msg.name, "catalog.name", MAX_NAME_BYTES)
    for knob in ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz"):
        values = list(getattr(msg, knob))
        if not 1 <= len(values) <= MAX_KNOB_VALUES:
            raise InvalidArgument(f"catalog.{knob} must have 1..{MAX_KNOB_VALUES} values, got {len(values)}",
                                  field=f"catalog.{knob}")
        if any(not math.isfinite(v) or v <= 0 or v > MAX_MHZ for v in values):
            raise InvalidArgument(f"catalog.{knob} has a value outside (0, {MAX_MHZ:g}]", field=f"catalog.{knob}")
    check_count(len(msg.rails), MAX_RAILS, "catalog.rails")
    check_count(len(msg.presets), MAX_MAP_ENTRIES, "catalog.presets")
    check_count(len(msg.grids), MAX_MAP_ENTRIES, "catalog.grids")
    rails = []
    for r in msg.rails:
        check_count(len(r.parts), MAX_RAIL_PARTS, "catalog.rails.parts")
        rails.append(Rail(check_label(r.label, "catalog.rails.label"),
                          tuple(check_label(p, "catalog.rails.parts") for p in r.parts), r.in_total))
    presets = {check_label(k, "catalog.presets"): str(mode_from_pb(v)) for k, v in msg.presets.items()}
    cat = catalog_from_knobs(msg.model, msg.cores, msg.cpu_mhz, msg.gpu_mhz, msg.mem_mhz,
                             name=msg.name, presets=presets, rails=rails)
    grids: dict[str, dict[str, tuple[float, ...]]] = {}
    for name, g in msg.grids.items():
        check_label(name, "catalog.grids")
        spec = {k: tuple(float(x) for x in getattr(g, k)) for k in KNOBS if len(getattr(g, k))}
        for knob, grid_values in spec.items():
            if len(grid_values) > MAX_KNOB_VALUES or not set(grid_values) <= set(cat.knob_values(knob)):
                raise InvalidArgument(f"catalog grid {name!r} has {knob} values outside the catalog",
                                      field="catalog.grids")
        grids[name] = spec
    return replace(cat, grid_specs=grids)


def sample_to_pb(s: Any) -> pb.TelemetrySample:
    """A telemetry sample (anything with TelemetrySample's fields) as a wire TelemetrySample."""
    return pb.TelemetrySample(t_s=s.t_s, rails_w=dict(s.rails_w), total_w=s.total_w, cpu_mhz=s.cpu_mhz,
                              gpu_mhz=s.gpu_mhz, mem_mhz=s.mem_mhz, cores_online=s.cores_online,
                              temps_c=dict(s.temps_c), cpu_util=s.cpu_util, gpu_util=s.gpu_util)


def label_ok(text: str) -> bool:
    """Whether ``text`` is a valid label (``bounds.LABEL_RULE``), without building an error."""
    return _LABEL_FAST(text) is not None


def _plausible(msg: pb.TelemetrySample, labels: frozenset[str], max_w: float, max_cores: int) -> bool:
    """The common case in one pass, without building an error: every value within its bounds."""
    rails, temps = msg.rails_w, msg.temps_c
    if len(rails) > MAX_RAILS or len(temps) > MAX_MAP_ENTRIES or not labels.issuperset(rails):
        return False
    if not (0 <= msg.total_w <= max_w and 0 <= msg.t_s <= MAX_TIMESTAMP_S and 0 <= msg.cpu_util <= 1
            and 0 <= msg.gpu_util <= 1 and msg.cores_online <= max_cores and 0 <= msg.cpu_mhz <= MAX_MHZ
            and 0 <= msg.gpu_mhz <= MAX_MHZ and 0 <= msg.mem_mhz <= MAX_MHZ):  # NaN fails every comparison
        return False
    if not all(0 <= w <= max_w for w in rails.values()):
        return False
    return all(MIN_TEMP_C <= c <= MAX_TEMP_C and _LABEL_FAST(k) for k, c in temps.items())


def check_sample(msg: pb.TelemetrySample, catalog: Catalog, field: str = "telemetry.samples") -> None:
    """A telemetry sample is physically possible on the board (``jetfleet.shared.bounds``) and names only
    rails of its rail map; InvalidArgument naming the first bad field otherwise."""
    if _plausible(msg, catalog.rail_label_set, power_limit_w(catalog.model), catalog.cores[-1]):
        return
    _refuse(msg, catalog, field)


def check_samples(samples: Sequence[pb.TelemetrySample], catalog: Catalog, field: str = "telemetry.samples") -> None:
    """``check_sample`` for every sample of a batch, the board's bounds looked up once for the batch."""
    if not samples:
        return
    labels, max_w, max_cores = catalog.rail_label_set, power_limit_w(catalog.model), catalog.cores[-1]
    for msg in samples:
        if not _plausible(msg, labels, max_w, max_cores):
            _refuse(msg, catalog, field)


def _refuse(msg: pb.TelemetrySample, catalog: Catalog, field: str) -> None:
    """InvalidArgument naming the first bad field of a sample that is not plausible."""
    rails = set(catalog.rail_labels())
    check_count(len(msg.rails_w), MAX_RAILS, f"{field}.rails_w")
    check_count(len(msg.temps_c), MAX_MAP_ENTRIES, f"{field}.temps_c")
    unknown = set(msg.rails_w) - rails
    if unknown:
        names = ", ".join(sorted(check_label(u, f"{field}.rails_w") for u in unknown))
        raise InvalidArgument(f"telemetry names rails not in the board's rail map: {names} "
                              f"(allowed: {', '.join(sorted(rails))})", field=f"{field}.rails_w")
    max_w = power_limit_w(catalog.model)
    check_range(msg.t_s, 0, MAX_TIMESTAMP_S, f"{field}.t_s", " s")
    check_range(msg.total_w, 0, max_w, f"{field}.total_w", " W")
    for rail, w in msg.rails_w.items():
        check_range(w, 0, max_w, f"{field}.rails_w[{rail}]", " W")
    for knob in ("cpu_mhz", "gpu_mhz", "mem_mhz"):
        check_range(getattr(msg, knob), 0, MAX_MHZ, f"{field}.{knob}", " MHz")
    check_range(msg.cores_online, 0, max(catalog.cores), f"{field}.cores_online")
    for sensor, c in msg.temps_c.items():
        check_label(sensor, f"{field}.temps_c")
        check_range(c, MIN_TEMP_C, MAX_TEMP_C, f"{field}.temps_c[{sensor}]", " C")
    check_range(msg.cpu_util, 0, 1, f"{field}.cpu_util")
    check_range(msg.gpu_util, 0, 1, f"{field}.gpu_util")


def mode_text(mode: pb.PowerMode) -> str:
    """A wire PowerMode as CORES/CPU/GPU/MEM text, the way operators write it."""
    return "/".join([str(mode.cores), format_mhz(mode.cpu_mhz), format_mhz(mode.gpu_mhz), format_mhz(mode.mem_mhz)])


def check_board(board: pb.BoardInfo, field: str = "hello.board") -> Catalog:
    """Check who a board says it is (id, serial, software, workloads, catalog), every field bounded in
    bytes and count; returns its catalog. InvalidArgument naming the first bad field."""
    check_id(board.device_id, f"{field}.device_id")
    check_label(board.serial, f"{field}.serial")
    check_count(len(board.software), MAX_MAP_ENTRIES, f"{field}.software")
    for key, value in board.software.items():
        check_label(key, f"{field}.software")
        check_text(value, f"{field}.software[{key}]")
    check_count(len(board.workloads), MAX_WORKLOADS, f"{field}.workloads")
    for w in board.workloads:
        check_id(w, f"{field}.workloads")
    check_count(len(board.broken_workloads), MAX_WORKLOADS, f"{field}.broken_workloads")
    for name, why in board.broken_workloads.items():
        check_id(name, f"{field}.broken_workloads")
        check_text(why, f"{field}.broken_workloads[{name}]", MAX_REASON_BYTES)
    check_count(len(board.templates), MAX_WORKLOADS, f"{field}.templates")
    for t in board.templates:
        check_id(t.name, f"{field}.templates")
        check_count(len(t.args), MAX_ARGS, f"{field}.templates[{t.name}].args")
        for a in t.args:
            if not ARG_NAME.match(a):
                raise InvalidArgument(f"{field}.templates[{t.name}].args: {a[:32]!r} is not an arg name",
                                      field=f"{field}.templates")
        if t.arg_rules and len(t.arg_rules) != len(t.args):
            raise InvalidArgument(f"{field}.templates[{t.name}].arg_rules: {len(t.arg_rules)} rules for "
                                  f"{len(t.args)} args (one per arg, or none)", field=f"{field}.templates")
        for rule in t.arg_rules:
            ArgRule.parse(rule, f"{field}.templates[{t.name}].arg_rules")
    if math.isnan(board.speed) or board.speed < 0:
        raise InvalidArgument(f"{field}.speed {board.speed!r}: board seconds per wall second, > 0 (inf: instant; "
                              "0: not reported)", field=f"{field}.speed")
    catalog = catalog_from_pb(board.catalog)
    if board.model != catalog.model:
        raise InvalidArgument(f"{field}.model {board.model[:64]!r} differs from its catalog's {catalog.model!r}",
                              field=f"{field}.model")
    return catalog
