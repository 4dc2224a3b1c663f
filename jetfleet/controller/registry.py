"""The fleet registry: which boards exist, which are online (by heartbeat), their current mode,
last telemetry and a rolling telemetry window; persisted through the store."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from jetfleet.controller.config import ControllerConfig
from jetfleet.controller.metrics import ControllerMetrics
from jetfleet.controller.store import DeviceRecord, Event, Store
from jetfleet.shared.catalog import Catalog, catalog_from_dict
from jetfleet.shared.convert import catalog_from_pb, check_name, check_sample, mode_from_pb
from jetfleet.shared.errors import AlreadyExists, InvalidArgument, NotFound
from jetfleet.shared.proto import agent_pb2, common_pb2

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Session:
    session_id: str
    device_id: str
    serial: str
    outbox: asyncio.Queue[agent_pb2.ControllerMessage | None]
    last_seen: float
    closed: bool = False

    def send(self, msg: agent_pb2.ControllerMessage) -> None:
        if not self.closed:
            self.outbox.put_nowait(msg)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.outbox.put_nowait(None)  # ends the response stream


@dataclass(eq=False)
class LiveDevice:
    record: DeviceRecord
    catalog: Catalog
    window: deque[common_pb2.TelemetrySample]
    session: Session | None = None
    metrics_address: str = ""   # HOST:PORT of the agent's /metrics (peer host as seen here), "" = none
    last_telemetry: common_pb2.TelemetrySample | None = None
    watchers: set[asyncio.Queue[common_pb2.TelemetrySample | None]] = field(default_factory=set)

    @property
    def online(self) -> bool:
        return self.session is not None and not self.session.closed


class Fleet:
    def __init__(self, store: Store, config: ControllerConfig, metrics: ControllerMetrics, *,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self.store, self.config, self.metrics = store, config, metrics
        self.clock, self.wall = clock, wall
        self.devices: dict[str, LiveDevice] = {}

    async def load(self) -> None:
        for rec in await asyncio.to_thread(self.store.list_devices):
            self.devices[rec.device_id] = LiveDevice(rec, catalog_from_dict(rec.catalog), self._window())
        self._update_gauges()
        log.info("registry loaded %d boards from %s", len(self.devices), self.store.url)

    def _window(self) -> deque[common_pb2.TelemetrySample]:
        return deque(maxlen=self.config.telemetry_window)

    # --- sessions --------------------------------------------------------------------------------
    async def attach(self, hello: agent_pb2.Hello, peer_host: str = "") -> Session:
        board = hello.board
        device_id = check_name(board.device_id, "hello.board.device_id")
        check_name(board.serial, "hello.board.serial")
        catalog = catalog_from_pb(board.catalog)
        if board.model != catalog.model:
            raise InvalidArgument(f"hello.board.model {board.model!r} differs from its catalog's "
                                  f"{catalog.model!r}", field="hello.board.model")
        mode = catalog.validate(mode_from_pb(hello.current_mode)) if hello.HasField("current_mode") else None
        live = self.devices.get(device_id)
        if live is not None and live.online and live.session and live.session.serial != board.serial:
            raise AlreadyExists(f"device id {device_id!r} is already connected from board serial "
                                f"{live.session.serial}; this board is {board.serial}", field="device_id")
        now = self.wall()
        rec = DeviceRecord(device_id, catalog.model, board.serial, dict(board.software), catalog.to_dict(),
                           board.emulated, str(mode) if mode else "", live.record.first_seen_s if live else now, now)
        await asyncio.to_thread(self.store.upsert_device, rec)
        await asyncio.to_thread(self.store.append_event, Event(device_id, now, "online", board.serial))
        if live is None:
            live = self.devices[device_id] = LiveDevice(rec, catalog, self._window())
        else:
            live.record, live.catalog = rec, catalog
        if live.session is not None:  # the same board reconnecting: the old stream is dead
            live.session.close()
        live.session = Session(uuid.uuid4().hex, device_id, board.serial, asyncio.Queue(), self.clock())
        host = f"[{peer_host}]" if ":" in peer_host else peer_host
        live.metrics_address = f"{host}:{hello.metrics_port}" if hello.metrics_port and peer_host else ""
        self._update_gauges()
        log.info("board %s (%s, serial %s) online", device_id, catalog.model, board.serial)
        return live.session

    async def detach(self, session: Session, reason: str) -> None:
        live = self.devices.get(session.device_id)
        session.close()
        if live is None or live.session is not session:
            return
        live.session = None
        live.record.last_seen_s = self.wall()
        await asyncio.to_thread(self.store.upsert_device, live.record)
        await asyncio.to_thread(self.store.append_event, Event(session.device_id, self.wall(), "offline", reason))
        self._update_gauges()
        log.info("board %s offline: %s", session.device_id, reason)

    async def reap(self) -> list[str]:
        """Mark boards offline whose heartbeats stopped; returns their ids."""
        now = self.clock()
        stale = [d.session for d in self.devices.values()
                 if d.session and not d.session.closed and now - d.session.last_seen > self.config.offline_after_s]
        for s in stale:
            if s is not None:
                await self.detach(s, f"no heartbeat for {self.config.offline_after_s:.1f} s")
        return [s.device_id for s in stale if s is not None]

    def touch(self, session: Session) -> None:
        session.last_seen = self.clock()

    def heartbeat(self, session: Session, hb: agent_pb2.Heartbeat) -> None:
        self.touch(session)
        if hb.HasField("current_mode"):
            live = self.get(session.device_id)
            live.record.current_mode = str(live.catalog.validate(mode_from_pb(hb.current_mode)))

    def telemetry(self, session: Session, batch: agent_pb2.TelemetryBatch) -> int:
        self.touch(session)
        if len(batch.samples) > self.config.max_batch_samples:
            raise InvalidArgument(f"telemetry batch of {len(batch.samples)} samples exceeds the limit of "
                                  f"{self.config.max_batch_samples}", field="telemetry.samples")
        live = self.get(session.device_id)
        rails = set(live.catalog.rail_labels())
        for s in batch.samples:
            check_sample(s, rails)
        for s in batch.samples:
            live.window.append(s)
            for q in live.watchers:
                if q.qsize() < 10_000:
                    q.put_nowait(s)
        if batch.samples:
            live.last_telemetry = batch.samples[-1]
            self.metrics.board_power.labels(session.device_id, live.catalog.model).set(live.last_telemetry.total_w)
        self.metrics.telemetry_samples.inc(len(batch.samples))
        self.metrics.telemetry_dropped.inc(batch.dropped)
        return len(batch.samples)

    async def set_current_mode(self, device_id: str, mode: str) -> None:
        live = self.get(device_id)
        live.record.current_mode = mode
        await asyncio.to_thread(self.store.upsert_device, live.record)
        await asyncio.to_thread(self.store.append_event, Event(device_id, self.wall(), "mode", mode))

    # --- queries -----------------------------------------------------------------------------------
    def get(self, device_id: str) -> LiveDevice:
        live = self.devices.get(device_id)
        if live is None:
            known = ", ".join(sorted(self.devices)[:20]) or "none"
            raise NotFound(f"unknown device {device_id!r} (known: {known})", field="device_id")
        return live

    def list(self, model: str = "") -> list[LiveDevice]:
        return [d for k, d in sorted(self.devices.items()) if not model or d.catalog.model == model]

    def watch(self, device_id: str) -> asyncio.Queue[common_pb2.TelemetrySample | None]:
        q: asyncio.Queue[common_pb2.TelemetrySample | None] = asyncio.Queue()
        self.get(device_id).watchers.add(q)
        return q

    def unwatch(self, device_id: str, q: asyncio.Queue[common_pb2.TelemetrySample | None]) -> None:
        live = self.devices.get(device_id)
        if live:
            live.watchers.discard(q)

    def _update_gauges(self) -> None:
        self.metrics.agents.clear()
        counts: dict[tuple[str, str], int] = {}
        for d in self.devices.values():
            key = (d.catalog.model, "online" if d.online else "offline")
            counts[key] = counts.get(key, 0) + 1
        for (model, state), n in counts.items():
            self.metrics.agents.labels(model, state).set(n)

    def close_all(self) -> None:
        for d in self.devices.values():
            if d.session:
                d.session.close()

