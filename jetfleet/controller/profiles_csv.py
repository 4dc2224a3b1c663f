"""Profiles as CSV, one documented schema, one row per observation (several per mode allowed):

    board_model,workload,cpu_cores,cpu_mhz,gpu_mhz,mem_mhz,minibatch_time_ms,power_w[,board_id,observed_at]

minibatch_time_ms is the median time per minibatch, power_w the mean board power (W) over the
measured window; observed_at is seconds since the epoch. Import is all or nothing: every row is
checked first and the first bad rows are reported with their line numbers. Names (board_model,
workload, board_id) are identifiers (``jetfleet.shared.bounds``); values must be physically
possible (power up to the board model's limit, a minibatch up to an hour).

Importing is idempotent: a file's rows are stored under ``import-<digest of the file's rows>``,
observations numbered per mode in file order, so importing the same file again finds its rows
stored and adds nothing. On export, a text cell that a spreadsheet would run as a formula (it starts
with =, +, -, @, a tab or a carriage return) is prefixed with an apostrophe."""

from __future__ import annotations

import csv
import hashlib
import io
import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from jetfleet.controller.store import ProfileRecord
from jetfleet.shared.bounds import MAX_MINIBATCH_S, MAX_TIMESTAMP_S, check_id
from jetfleet.shared.catalog import Catalog, PowerMode, catalog_from_knobs, power_limit_w
from jetfleet.shared.errors import InvalidArgument

REQUIRED = ["board_model", "workload", "cpu_cores", "cpu_mhz", "gpu_mhz", "mem_mhz", "minibatch_time_ms", "power_w"]
OPTIONAL = ["board_id", "observed_at"]
MAX_ROWS = 1_000_000
MAX_ERRORS = 5
MAX_IMPORT_BYTES = 128 * 1024 * 1024   # one CSV (about 1.5 million rows of the documented schema)
EXPORT_CHUNK_ROWS = 10_000             # rows per streamed export chunk (about 0.8 MB)
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


@dataclass(frozen=True)
class Row:
    """One checked data row of a profile CSV, with its line number for error messages."""

    line: int
    board_model: str
    workload: str
    mode: PowerMode
    minibatch_time_ms: float
    power_w: float
    board_id: str
    observed_at: float


def _name(value: str, column: str) -> str:
    try:
        return check_id(value, column)
    except InvalidArgument as e:
        raise ValueError(e.message) from None


def _number(value: str, column: str, *, integer: bool = False, hi: float = math.inf) -> float:
    try:
        x = float(value)
    except ValueError:
        raise ValueError(f"{column} {value[:40]!r} is not a number") from None
    if not math.isfinite(x) or x <= 0:
        raise ValueError(f"{column} must be a positive finite number, got {value[:40]!r}")
    if x > hi:
        raise ValueError(f"{column}={value[:40]} is impossible; allowed (0, {hi:g}]")
    if integer and x != int(x):
        raise ValueError(f"{column} must be a whole number, got {value[:40]!r}")
    return x


def parse(text: str, name: str = "input") -> list[Row]:
    """The checked rows of a profile CSV; InvalidArgument for a bad header, no rows, or the first bad lines."""
    if len(text) > MAX_IMPORT_BYTES:
        raise InvalidArgument(f"{name}: {len(text)} characters; at most {MAX_IMPORT_BYTES} per import", field="csv")
    try:
        return _parse(text, name)
    except csv.Error as e:  # a NUL byte, a field over the csv module's limit: not a profile CSV
        raise InvalidArgument(f"{name}: not a profile CSV ({e}); nothing was imported", field="csv") from None


def _parse(text: str, name: str) -> list[Row]:
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        raise InvalidArgument(f"{name}: empty file; expected the header {','.join(REQUIRED)}", field="csv")
    header = [h.strip() for h in header]
    missing = [c for c in REQUIRED if c not in header]
    unknown = [c for c in header if c not in REQUIRED + OPTIONAL]
    if missing or unknown or len(set(header)) != len(header):
        raise InvalidArgument(f"{name} line 1: header must hold {','.join(REQUIRED)} (optional: {','.join(OPTIONAL)}); "
                              f"missing {missing or 'none'}, unknown {[u[:40] for u in unknown][:5] or 'none'}",
                              field="csv")
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
            board_model = _name(get("board_model", ""), "board_model")
            mode = PowerMode(int(_number(get("cpu_cores", ""), "cpu_cores", integer=True, hi=4096)),
                             _number(get("cpu_mhz", ""), "cpu_mhz", hi=100_000),
                             _number(get("gpu_mhz", ""), "gpu_mhz", hi=100_000),
                             _number(get("mem_mhz", ""), "mem_mhz", hi=100_000))
            rows.append(Row(line, board_model, _name(get("workload", ""), "workload"), mode,
                            _number(get("minibatch_time_ms", ""), "minibatch_time_ms", hi=MAX_MINIBATCH_S * 1e3),
                            _number(get("power_w", ""), "power_w", hi=power_limit_w(board_model)),
                            _name(get("board_id", ""), "board_id") if get("board_id") else "",
                            _number(get("observed_at", ""), "observed_at", hi=MAX_TIMESTAMP_S)
                            if get("observed_at") else 0.0))
        except ValueError as e:
            errors.append(f"{name} line {line}: {e}")
            if len(errors) >= MAX_ERRORS:
                break
    if errors:
        raise InvalidArgument("; ".join(errors) + " (nothing was imported)", field="csv")
    if not rows:
        raise InvalidArgument(f"{name}: no data rows", field="csv")
    return rows


def source_of(rows: list[Row]) -> str:
    """The source an import's rows are stored under: a digest of the rows' values (not of line endings,
    spacing or number formatting), so the same observations imported again land on the same keys."""
    h = hashlib.sha256()
    for r in rows:
        h.update(repr((r.board_model, r.workload, r.mode.as_tuple(), r.minibatch_time_ms, r.power_w, r.board_id,
                       r.observed_at)).encode())
    return f"import-{h.hexdigest()[:16]}"


def to_records(rows: list[Row], catalog_of: Callable[[str], Catalog | None],
               source: str = "") -> tuple[list[ProfileRecord], dict[str, Catalog]]:
    """Check every row's mode against its board model's catalog; a model with none gets a catalog
    built from the file's knob values (returned so the caller stores it with the rows).

    Observations are numbered per mode (the store's key is source, mode, observation), in file order."""
    source = source or source_of(rows)
    new: dict[str, Catalog] = {}
    for model in sorted({r.board_model for r in rows}):
        if catalog_of(model) is None:
            mine = [r.mode for r in rows if r.board_model == model]
            new[model] = catalog_from_knobs(model, [m.cores for m in mine], [m.cpu_mhz for m in mine],
                                            [m.gpu_mhz for m in mine], [m.mem_mhz for m in mine],
                                            name=f"{model} (from imported profiles)")
    errors = []
    records = []
    seen: dict[str, int] = {}
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
        seen[mode] = seen.get(mode, -1) + 1
        records.append(ProfileRecord(source, mode, seen[mode], r.board_model, r.board_id, r.workload,
                                     r.minibatch_time_ms, r.power_w, r.observed_at or now))
    if errors:
        raise InvalidArgument("; ".join(errors) + " (nothing was imported)", field="csv")
    return records, new


def fingerprint(r: ProfileRecord) -> tuple[str, ...]:
    """An observation as an export writes it (time and power to 6 significant digits, the time to the
    millisecond): the same row exported and imported again has the same fingerprint, whatever its source."""
    return (r.board_model, r.workload, r.mode, f"{r.minibatch_time_ms:.6g}", f"{r.power_w:.6g}", r.device_id,
            f"{r.observed_at:.3f}")


def not_stored(records: list[ProfileRecord], stored: Iterable[ProfileRecord]) -> list[ProfileRecord]:
    """The records whose observation is not among ``stored`` already (under any source: a campaign's rows exported
    and imported again are the rows the campaign stored). Rows without their own time (``observed_at`` taken at
    import) cannot be told apart this way; the import's digest source recognises those."""
    seen = {fingerprint(r) for r in stored}
    return [r for r in records if fingerprint(r) not in seen]


def cell(text: str) -> str:
    """A text cell a spreadsheet shows as text: one starting like a formula gets a leading apostrophe."""
    return "'" + text if text.startswith(_FORMULA_START) else text


def export(records: list[ProfileRecord]) -> str:
    """Profiles as CSV in the documented schema, ``board_id`` and ``observed_at`` included."""
    return "".join(export_chunks(records, len(records) + 1))


def export_chunks(records: list[ProfileRecord], rows_per_chunk: int = EXPORT_CHUNK_ROWS) -> Iterator[str]:
    """The CSV of ``records`` in pieces of ``rows_per_chunk`` rows, the header in the first."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(REQUIRED + OPTIONAL)
    for i, r in enumerate(records, start=1):
        cores, cpu, gpu, mem = r.knobs
        w.writerow([cell(r.board_model), cell(r.workload), cores, f"{cpu:g}", f"{gpu:g}", f"{mem:g}",
                    f"{r.minibatch_time_ms:.6g}", f"{r.power_w:.6g}", cell(r.device_id), f"{r.observed_at:.3f}"])
        if i % rows_per_chunk == 0:
            yield out.getvalue()
            out.seek(0)
            out.truncate()
    if out.tell():
        yield out.getvalue()
