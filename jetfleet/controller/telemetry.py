"""Telemetry ingest and fan-out: each board's batches are checked, kept in a rolling window,
relayed to Prometheus and handed to the operators watching that board. The device registry
(``registry.py``) says which boards exist; this module holds what they measure."""

from __future__ import annotations

import asyncio
import math
from collections import deque
from dataclasses import dataclass, field

from jetfleet.controller.columns_check import check_columns
from jetfleet.controller.config import ControllerConfig
from jetfleet.controller.metrics import ControllerMetrics
from jetfleet.shared.catalog import Catalog
from jetfleet.shared.columns import column, samples_from_columns
from jetfleet.shared.convert import check_samples
from jetfleet.shared.errors import InvalidArgument
from jetfleet.shared.proto import agent_pb2, common_pb2

MAX_WATCH_QUEUE = 10_000   # samples queued for one slow watcher before it misses new ones
_Chunk = common_pb2.SampleColumns | list[common_pb2.TelemetrySample]


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

    def add(self, chunk: _Chunk, n: int) -> float:
        """Keep a non-empty batch; drop the oldest batches that lie wholly outside the last ``limit`` samples.
        Returns the batch's newest board power."""
        totals = [s.total_w for s in chunk] if isinstance(chunk, list) else column(chunk, "total_w")
        self.lowest_w, self.last_w = min(self.lowest_w, *totals), totals[-1]
        self.chunks.append((chunk, n))
        self.held += n
        self.last_sample = None
        while self.chunks and self.held - self.chunks[0][1] >= self.limit:
            self.held -= self.chunks.popleft()[1]
        return totals[-1]

    @property
    def last(self) -> common_pb2.TelemetrySample | None:
        if self.last_sample is None and self.chunks:
            chunk, n = self.chunks[-1]
            self.last_sample = _expand(chunk, n - 1)[0]
        return self.last_sample

    def samples(self) -> list[common_pb2.TelemetrySample]:
        out = [s for chunk, _ in self.chunks for s in _expand(chunk)]
        return out[-self.limit:]


def _expand(chunk: _Chunk, start: int = 0) -> list[common_pb2.TelemetrySample]:
    return chunk[start:] if isinstance(chunk, list) else samples_from_columns(chunk, start)


class TelemetryHub:
    """Per-board rolling windows of telemetry, the latest sample, and live watchers."""

    def __init__(self, config: ControllerConfig, metrics: ControllerMetrics) -> None:
        self.config, self.metrics = config, metrics
        self._boards: dict[str, _Board] = {}

    def _board(self, device_id: str) -> _Board:
        board = self._boards.get(device_id)
        if board is None:
            board = self._boards[device_id] = _Board(self.config.telemetry_window)
        return board

    def ingest(self, device_id: str, catalog: Catalog, batch: agent_pb2.TelemetryBatch) -> int:
        """Check a batch against the board's catalog and physical bounds (all or none is kept), then keep, relay and
        fan it out. Per batch: samples sent as columns are checked column by column and kept as they came; the
        metrics move once per batch."""
        n_samples, cols = len(batch.samples), batch.columns
        n_cols = cols.samples
        if n_samples + n_cols > self.config.max_batch_samples:
            raise InvalidArgument(f"telemetry batch of {n_samples + n_cols} samples exceeds the limit of "
                                  f"{self.config.max_batch_samples}", field="telemetry.samples")
        check_samples(batch.samples, catalog)
        if batch.HasField("columns"):
            n_cols = check_columns(cols, catalog)
        board = self._board(device_id)
        newest_w = 0.0
        if n_samples:
            newest_w = board.add(list(batch.samples), n_samples)
        if n_cols:
            newest_w = board.add(cols, n_cols)
        if board.watchers and n_samples + n_cols:
            fresh = list(batch.samples) + (samples_from_columns(cols) if n_cols else [])
            for q in board.watchers:
                for s in fresh:
                    if q.qsize() < MAX_WATCH_QUEUE:
                        q.put_nowait(s)
        if n_samples + n_cols:
            # not a cached child: the registry removes an offline board's series, a cached child would stay detached
            self.metrics.board_power.labels(device_id, catalog.model).set(newest_w)
            self.metrics.telemetry_samples.labels(device_id).inc(n_samples + n_cols)
            # inc(0) too: a board's dropped-samples series exists (at 0) from its first samples, as Prometheus expects
            self.metrics.telemetry_dropped.labels(device_id).inc(batch.dropped)
        elif batch.dropped:
            self.metrics.telemetry_dropped.labels(device_id).inc(batch.dropped)
        return n_samples + n_cols

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
        """Drop a forgotten board's window and watchers (the registry drops its series)."""
        self.end(device_id)
        self._boards.pop(device_id, None)
