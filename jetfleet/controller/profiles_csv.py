"""Profiles as CSV, one documented schema, one row per observation (several per mode allowed):

    board_model,workload,cpu_cores,cpu_mhz,gpu_mhz,mem_mhz,minibatch_time_ms,power_w[,board_id,observed_at]

minibatch_time_ms is the median time per minibatch, power_w the mean board power (W) over the
measured window; observed_at is seconds since the epoch. Import is all or nothing: every row is
checked first and the first bad rows are reported with their line numbers."""

from __future__ import annotations

import csv
import io
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from jetfleet.controller.store import ProfileRecord
from jetfleet.shared.catalog import Catalog, PowerMode, catalog_from_knobs
from jetfleet.shared.errors import InvalidArgument

REQUIRED = ["board_model", "workload", "cpu_cores", "cpu_mhz", "gpu_mhz", "mem_mhz", "minibatch_time_ms", "power_w"]
OPTIONAL = ["board_id", "observed_at"]
MAX_ROWS = 1_000_000
MAX_ERRORS = 5


@dataclass(frozen=True)
class Row:
    line: int
    board_model: str
    workload: str
    mode: PowerMode
    minibatch_time_ms: float
    power_w: float
    board_id: str
    observed_at: float


def _name(value: str, column: str) -> str:
    if not value or len(value) > 128 or any(c.isspace() or c in ",/" for c in value):
        raise ValueError(f"{column} must be 1..128 characters without spaces, commas or slashes, got {value!r}")
    return value


def _number(value: str, column: str, *, integer: bool = False) -> float:
    try:
        x = float(value)
    except ValueError:
        raise ValueError(f"{column} {value!r} is not a number") from None
    if not math.isfinite(x) or x <= 0:
        raise ValueError(f"{column} must be a positive finite number, got {value!r}")
    if integer and x != int(x):
        raise ValueError(f"{column} must be a whole number, got {value!r}")
    return x


def parse(text: str, name: str = "input") -> list[Row]:
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        raise InvalidArgument(f"{name}: empty file; expected the header {','.join(REQUIRED)}", field="csv")
    header = [h.strip() for h in header]
    missing = [c for c in REQUIRED if c not in header]
    unknown = [c for c in header if c not in REQUIRED + OPTIONAL]
    if missing or unknown or len(set(header)) != len(header):
        raise InvalidArgument(f"{name} line 1: header must hold {','.join(REQUIRED)} (optional: {','.join(OPTIONAL)}); "
                              f"missing {missing or 'none'}, unknown {unknown or 'none'}", field="csv")
    col = {c: i for i, c in enumerate(header)}
    rows: list[Row] = []
    errors: list[str] = []
    for line, fields in enumerate(reader, start=2):
        if not fields or all(not f.strip() for f in fields):
            continue
        if len(rows) >= MAX_ROWS:
            raise InvalidArgument(f"{name}: more than {MAX_ROWS} rows", field="csv")
        try:
            if len(fields) != len(header):
                raise ValueError(f"{len(fields)} fields, the header has {len(header)}")
            values = {c: fields[i].strip() for c, i in col.items()}
            get = values.get
            mode = PowerMode(int(_number(get("cpu_cores", ""), "cpu_cores", integer=True)),
                             _number(get("cpu_mhz", ""), "cpu_mhz"), _number(get("gpu_mhz", ""), "gpu_mhz"),
                             _number(get("mem_mhz", ""), "mem_mhz"))
            rows.append(Row(line, _name(get("board_model", ""), "board_model"), _name(get("workload", ""), "workload"),
                            mode, _number(get("minibatch_time_ms", ""), "minibatch_time_ms"),
                            _number(get("power_w", ""), "power_w"),
                            _name(get("board_id", ""), "board_id") if get("board_id") else "",
                            _number(get("observed_at", ""), "observed_at") if get("observed_at") else 0.0))
        except ValueError as e:
            errors.append(f"{name} line {line}: {e}")
            if len(errors) >= MAX_ERRORS:
                break
    if errors:
        raise InvalidArgument("; ".join(errors) + " (nothing was imported)", field="csv")
    if not rows:
        raise InvalidArgument(f"{name}: no data rows", field="csv")
    return rows


def to_records(rows: list[Row], catalog_of: Callable[[str], Catalog | None],
               source: str = "") -> tuple[list[ProfileRecord], dict[str, Catalog]]:
    """Check every row's mode against its board model's catalog; a model with none gets a catalog
    built from the file's knob values (returned so the caller stores it with the rows)."""
    source = source or f"import-{uuid.uuid4().hex[:12]}"
    new: dict[str, Catalog] = {}
    for model in sorted({r.board_model for r in rows}):
        if catalog_of(model) is None:
            mine = [r.mode for r in rows if r.board_model == model]
            new[model] = catalog_from_knobs(model, [m.cores for m in mine], [m.cpu_mhz for m in mine],
                                            [m.gpu_mhz for m in mine], [m.mem_mhz for m in mine],
                                            name=f"{model} (from imported profiles)")
    errors = []
    records = []
    seen: dict[tuple[str, str, str], int] = {}
    now = time.time()
    for r in rows:
        cat = new.get(r.board_model) or catalog_of(r.board_model)
        assert cat is not None
        try:
            mode = str(cat.validate(r.mode))
        except InvalidArgument as e:
            errors.append(f"line {r.line}: {e.message}")
            if len(errors) >= MAX_ERRORS:
                break
            continue
        key = (r.board_model, r.workload, mode)
        seen[key] = seen.get(key, -1) + 1
        records.append(ProfileRecord(source, mode, seen[key], r.board_model, r.board_id, r.workload,
                                     r.minibatch_time_ms, r.power_w, r.observed_at or now))
    if errors:
        raise InvalidArgument("; ".join(errors) + " (nothing was imported)", field="csv")
    return records, new


def export(records: list[ProfileRecord]) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(REQUIRED + OPTIONAL)
    for r in records:
        cores, cpu, gpu, mem = r.knobs
        w.writerow([r.board_model, r.workload, cores, f"{cpu:g}", f"{gpu:g}", f"{mem:g}", f"{r.minibatch_time_ms:.6g}",
                    f"{r.power_w:.6g}", r.device_id, f"{r.observed_at:.3f}"])
    return out.getvalue()
