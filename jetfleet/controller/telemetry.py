"""Telemetry ingest and fan-out: each board's batches are checked, kept in a rolling window,
relayed to Prometheus and handed to the operators watching that board. The device registry
(``registry.py``) says which boards exist; this module holds what they measure."""

from __future__ import annotations

import asyncio
import logging
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from jetfleet.controller.columns_check import bounds, check_columns, layout_ok
from jetfleet.controller.config import ControllerConfig
from jetfleet.controller.metrics import ControllerMetrics
from jetfleet.shared.catalog import Catalog, power_limit_w
from jetfleet.shared.columns import SCALARS, column_values, samples_from_values
from jetfleet.shared.convert import check_samples
from jetfleet.shared.errors import InvalidArgument, JetfleetError
from jetfleet.shared.proto import agent_pb2, common_pb2

MAX_WATCH_QUEUE = 10_000   # samples queued for one slow watcher before it misses new ones
FLUSH_S = 0.05              # seconds: deferred batches are checked together (1,000 boards, a batch a second: ~50)
MAX_DEFERRED_SAMPLES = 200   # larger blocks are checked on their own (and against the batch limit)
log = logging.getLogger(__name__)


class _Block(NamedTuple):
    """A checked batch of columns as the window keeps it: its numbers and the names of its rails and sensors, not
    its message (a parsed message holds its whole arena: kilobytes a batch, 60 batches a board)."""

    samples: int
    rails: tuple[str, ...]
    temps: tuple[str, ...]
    values: bytes

    @staticmethod
    def of(cols: common_pb2.SampleColumns) -> _Block:
        return _Block(cols.samples, tuple(cols.rails), tuple(cols.temps), cols.values)

    def total_w(self) -> list[float]:
        n = self.samples
        return column_values(self.values)[n:2 * n].tolist()   # SCALARS' second column


_Chunk = _Block | list[common_pb2.TelemetrySample]


@dataclass(eq=False)
class _Board:
    """A board's rolling window, kept as the batches arrived (columns stay columns until a sample is asked for)."""

    limit: int
    chunks: deque[tuple[_Chunk, int]] = field(default_factory=deque)   # (batch, its samples), oldest first
    held: int = 0                                                      # samples in ``chunks``
    last_sample: common_pb2.TelemetrySample | None = None              # cached: the newest sample as a message
    lowest_w: float = math.inf                                         # the lowest board power it has reported
    last_w: float | None = None                                        # the newest sample's board power
    watchers: set[asyncio.Queue[common_pb2.TelemetrySample | None]] = field(default_factory=set)

    def add(self, chunk: _Chunk, n: int, lowest_w: float | None = None, newest_w: float | None = None) -> float:
        """Keep a non-empty batch; drop the oldest batches that lie wholly outside the last ``limit`` samples.
        Returns the batch's newest board power (``lowest_w``/``newest_w``: the batch's, when already known)."""
        if lowest_w is None or newest_w is None:
            totals = [s.total_w for s in chunk] if isinstance(chunk, list) else chunk.total_w()
            lowest_w, newest_w = min(totals), totals[-1]
        if lowest_w < self.lowest_w:
            self.lowest_w = lowest_w
        self.last_w = newest_w
        self.chunks.append((chunk, n))
        self.held += n
        self.last_sample = None
        while self.chunks and self.held - self.chunks[0][1] >= self.limit:
            self.held -= self.chunks.popleft()[1]
        return newest_w

    @property
    def last(self) -> common_pb2.TelemetrySample | None:
        if self.last_sample is None and self.chunks:
            chunk, n = self.chunks[-1]
            self.last_sample = _expand(chunk, n - 1)[0]
        return self.last_sample

    def samples(self) -> list[common_pb2.TelemetrySample]:
        out = [s for chunk, _ in self.chunks for s in _expand(chunk)]
        return out[-self.limit:]


def _log_refused(owner: object, e: JetfleetError) -> None:
    log.warning("telemetry refused (%s): %s", owner, e.message[:300])


def _check_blocks(pending: list[_Pending], max_samples: int) -> list[tuple[_Block, float, float] | None]:
    """Per deferred batch: its block and its (lowest, newest) board power if the block passed the check together
    with the others of its layout, or None if it must be checked on its own (it failed, or its layout is not one
    a board of that model may send; ``check_columns`` then names the field).

    A layout is a board's catalog, the samples per batch and the rails and sensors named. Batches are grouped by
    the catalog object (one per distinct catalog, shared by the sessions that sent it), the samples and how many
    rails and sensors: cheap to key. Each group's first batch naming a layout its board may send names them; a
    batch naming others (the same counts, other names) is checked on its own, so no per-batch tuple of names is
    built or hashed."""
    out: list[tuple[_Block, float, float] | None] = [None] * len(pending)
    groups: dict[tuple[int, int, int, int], list[int]] = {}
    # per key: the catalog, the names as lists (a protobuf repeated field compares equal to a list only) and as
    # tuples (kept in the window's blocks)
    names: dict[tuple[int, int, int, int], tuple[Catalog, list[str], list[str], tuple[str, ...], tuple[str, ...]]] = {}
    values: list[bytes] = [b""] * len(pending)
    for i, p in enumerate(pending):
        cols = p.cols
        rails, temps = cols.rails, cols.temps
        key = (id(p.catalog), cols.samples, len(rails), len(temps))
        first = names.get(key)
        if first is None:
            # the first batch of a key names its layout, if the layout is one its board may send (a batch naming
            # another is checked on its own, and the next batch of the key tries again)
            if not layout_ok(tuple(rails), tuple(temps), p.catalog.rail_label_set):
                continue
            names[key] = (p.catalog, list(rails), list(temps), tuple(rails), tuple(temps))
        elif rails != first[1] or temps != first[2]:
            continue
        values[i] = cols.values
        groups.setdefault(key, []).append(i)
    for key, rows in groups.items():
        cat, rail_names, temp_names, rail_tuple, temp_tuple = names[key]
        n = key[1]
        width = 8 * n * (len(SCALARS) + len(rail_names) + len(temp_names))
        rows = [i for i in rows if len(values[i]) == width]
        if not rows or n == 0 or n > max_samples:
            continue
        block = np.frombuffer(b"".join([values[i] for i in rows]), dtype="<f8").reshape(len(rows), width // 8)
        lo, hi = bounds(n, len(rail_names), len(temp_names), power_limit_w(cat.model), cat.cores[-1])
        cores = block[:, 5 * n:6 * n]
        good = (((block >= lo) & (block <= hi)).all(axis=1) & (np.floor(cores) == cores).all(axis=1)).tolist()
        total = block[:, n:2 * n]
        for i, ok, lowest, newest in zip(rows, good, total.min(axis=1).tolist(), total[:, -1].tolist()):
            if ok:
                out[i] = (_Block(n, rail_tuple, temp_tuple, values[i]), lowest, newest)
    return out


def _expand(chunk: _Chunk, start: int = 0) -> list[common_pb2.TelemetrySample]:
    if isinstance(chunk, list):
        return chunk[start:]
    return samples_from_values(chunk.samples, chunk.rails, chunk.temps, chunk.values, start)


class _Pending(NamedTuple):
    device_id: str
    catalog: Catalog
    batch: agent_pb2.TelemetryBatch
    cols: common_pb2.SampleColumns   # the batch's columns (read once)
    owner: object   # handed back to ``on_refused`` with the error if the batch is refused


class TelemetryHub:
    """Per-board rolling windows of telemetry, the latest sample, and live watchers.

    Batches sent as columns arrive through ``defer`` and are checked and kept together, up to ``flush_s``
    (FLUSH_S) later: the blocks of every board of one layout (board model, rails, sensors, samples per batch) are
    checked with one vectorised comparison for all of them, so thousands of boards' batches a second cost
    a few numpy calls per flush instead of per batch. Everything that must see a board's telemetry in
    order with its other messages flushes first (the agent sessions before a result, an ack, a report; the
    registry just before a board goes offline); the rest (scrapes, ``devices ls``, the fleet loop) may be up
    to flush_s behind."""

    def __init__(self, config: ControllerConfig, metrics: ControllerMetrics, flush_s: float = FLUSH_S) -> None:
        self.config, self.metrics, self.flush_s = config, metrics, flush_s
        self._boards: dict[str, _Board] = {}
        self._pending: list[_Pending] = []
        self._flush_at: asyncio.TimerHandle | None = None
        self.on_refused: Callable[[object, JetfleetError], None] = _log_refused

    def _board(self, device_id: str) -> _Board:
        board = self._boards.get(device_id)
        if board is None:
            board = self._boards[device_id] = _Board(self.config.telemetry_window)
        return board

    def defer(self, device_id: str, catalog: Catalog, batch: agent_pb2.TelemetryBatch, owner: object) -> None:
        """Take a batch to be checked and kept at the next flush (within ``flush_s``); a refused one goes to
        ``on_refused(owner, error)`` then. A batch of sample messages (an agent of protocol 1) is handled now
        (after what is pending, so a board's batches stay in order), raising if refused."""
        if batch.samples or not batch.HasField("columns"):
            self.flush()
            self.ingest(device_id, catalog, batch)
            return
        self._pending.append(_Pending(device_id, catalog, batch, batch.columns, owner))
        if self._flush_at is None:
            self._flush_at = asyncio.get_running_loop().call_later(self.flush_s, self.flush)

    def flush(self) -> None:
        """Check and keep every deferred batch now, in the order they arrived."""
        if self._flush_at is not None:
            self._flush_at.cancel()
            self._flush_at = None
        pending, self._pending = self._pending, []
        if not pending:
            return
        outcome: list[tuple[_Block, float, float] | None]
        try:
            outcome = _check_blocks(pending, min(MAX_DEFERRED_SAMPLES, self.config.max_batch_samples))
        except Exception:   # a fault of the vectorised check: every batch is checked on its own instead
            log.exception("checking %d telemetry batches together", len(pending))
            outcome = [None] * len(pending)
        for p, result in zip(pending, outcome):
            try:
                if result is None:   # not checked together: the batch's own check says why (or keeps it)
                    self.ingest(p.device_id, p.catalog, p.batch)
                else:
                    self._keep_block(p.device_id, p.catalog.model, *result, p.batch.dropped)
            except JetfleetError as e:
                try:
                    self.on_refused(p.owner, e)
                except Exception:
                    log.exception("telemetry of %s refused (%s); the refusal could not be sent", p.device_id,
                                  e.message[:200])
            except Exception:   # one batch's fault loses that batch, never the others or the caller's work
                log.exception("telemetry batch of %s dropped", p.device_id)

    def ingest(self, device_id: str, catalog: Catalog, batch: agent_pb2.TelemetryBatch) -> int:
        """Check a batch against the board's catalog and physical bounds (all or none is kept), then keep, relay and
        fan it out now. Samples sent as columns are checked column by column and kept as columns (their numbers and
        names, not the message)."""
        n_samples, cols = len(batch.samples), batch.columns
        n_cols = cols.samples
        if n_samples + n_cols > self.config.max_batch_samples:
            raise InvalidArgument(f"telemetry batch of {n_samples + n_cols} samples exceeds the limit of "
                                  f"{self.config.max_batch_samples}", field="telemetry.samples")
        check_samples(batch.samples, catalog)
        if batch.HasField("columns"):
            n_cols = check_columns(cols, catalog)
        return self._keep(device_id, catalog, batch, n_samples, n_cols)

    def _keep(self, device_id: str, catalog: Catalog, batch: agent_pb2.TelemetryBatch, n_samples: int,
              n_cols: int) -> int:
        """Keep a checked batch (its samples, then its columns), hand it to watchers and move the board's series."""
        board = self._board(device_id)
        newest_w = 0.0
        fresh: list[common_pb2.TelemetrySample] = []
        if n_samples:
            fresh = list(batch.samples)
            newest_w = board.add(fresh, n_samples)
        if n_cols:
            block = _Block.of(batch.columns)
            newest_w = board.add(block, n_cols)
            if board.watchers:
                fresh = fresh + _expand(block)
        self._kept(board, device_id, catalog.model, n_samples + n_cols, newest_w, batch.dropped, fresh)
        return n_samples + n_cols

    def _keep_block(self, device_id: str, model: str, block: _Block, lowest_w: float, newest_w: float,
                    dropped: int) -> None:
        """Keep a block checked with others of its layout (its lowest and newest board power read by the check)."""
        board = self._board(device_id)
        board.add(block, block.samples, lowest_w, newest_w)
        self._kept(board, device_id, model, block.samples, newest_w, dropped, _expand(block) if board.watchers else [])

    def _kept(self, board: _Board, device_id: str, model: str, n: int, newest_w: float, dropped: int,
              fresh: list[common_pb2.TelemetrySample]) -> None:
        """Hand a kept batch's samples to the board's watchers and move its series."""
        for q in board.watchers:
            for s in fresh:
                if q.qsize() < MAX_WATCH_QUEUE:
                    q.put_nowait(s)
        if n or dropped:
            series = self.metrics.telemetry.board(device_id, model)
            series.dropped += dropped   # += 0 too: the series exists (at 0) from a board's first samples
            if n:
                series.power_w = newest_w
                series.samples += n

    def last(self, device_id: str) -> common_pb2.TelemetrySample | None:
        """The newest sample of a board, or None if it never sent one."""
        board = self._boards.get(device_id)
        return board.last if board else None

    def last_w(self, device_id: str) -> float | None:
        """The newest sample's board power (W), or None if it never sent one (no sample is built for it)."""
        board = self._boards.get(device_id)
        return board.last_w if board else None

    def lowest_w(self, device_id: str) -> float:
        """The lowest board power (W) a board has reported since the controller started (inf before any)."""
        board = self._boards.get(device_id)
        return board.lowest_w if board else math.inf

    def window(self, device_id: str) -> list[common_pb2.TelemetrySample]:
        """The board's rolling window, oldest first."""
        board = self._boards.get(device_id)
        return board.samples() if board else []

    def watch(self, device_id: str) -> asyncio.Queue[common_pb2.TelemetrySample | None]:
        """A queue that receives every new sample of the board until ``unwatch``."""
        q: asyncio.Queue[common_pb2.TelemetrySample | None] = asyncio.Queue()
        self._board(device_id).watchers.add(q)
        return q

    def unwatch(self, device_id: str, q: asyncio.Queue[common_pb2.TelemetrySample | None]) -> None:
        """Stop feeding a watcher's queue."""
        board = self._boards.get(device_id)
        if board:
            board.watchers.discard(q)

    def end(self, device_id: str) -> None:
        """The board went offline: every watcher's queue gets None, the end of its stream."""
        board = self._boards.get(device_id)
        if board:
            for q in board.watchers:
                q.put_nowait(None)

    def forget(self, device_id: str) -> None:
        """Drop a forgotten board's window, watchers and any batch of it still waiting (the registry drops its
        series)."""
        self.end(device_id)
        self._pending = [p for p in self._pending if p.device_id != device_id]
        self._boards.pop(device_id, None)
