"""The device registry: which boards exist, their sessions, which are online (by heartbeat) and
their current mode; persisted through the store. What the boards measure is the telemetry hub's
(``telemetry.py``)."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from jetfleet.controller.config import ControllerConfig
from jetfleet.controller.metrics import ControllerMetrics
from jetfleet.controller.store import DeviceRecord, Event, Store
from jetfleet.shared.bounds import check_id, check_text
from jetfleet.shared.catalog import Catalog, catalog_from_dict
from jetfleet.shared.convert import check_board, mode_from_pb
from jetfleet.shared.errors import AlreadyExists, FailedPrecondition, JetfleetError, NotFound, ResourceExhausted
from jetfleet.shared.proto import agent_pb2
from jetfleet.shared.queued import NOTHING, take_queued
from jetfleet.shared.workloads import WORKLOADS

log = logging.getLogger(__name__)
MAX_OUTBOX = 1000        # messages queued to one agent; an agent that stops reading gets no more commands
MAX_QUEUED_NOTICES = 50  # refusals queued to one agent; more are dropped (and counted) until it reads them
MAX_BATCH_COMMANDS = 64  # commands queued together that go to an agent as one CommandBatch


@dataclass(eq=False)
class Session:
    """One agent's live stream: what the controller sends it goes through ``outbox``."""

    session_id: str
    device_id: str
    serial: str
    outbox: asyncio.Queue[agent_pb2.ControllerMessage | None]
    last_seen: float
    closed: bool = False
    dropped_notices: int = 0
    catalog: Catalog | None = None   # the board's catalog as of this session's hello (a new hello, a new session)
    batches: bool = False   # its agent reads CommandBatch (its hello said so): commands queued together go as one
    command_batches: int = 0   # CommandBatch messages sent (tests and logs)
    _carry: object = NOTHING  # a message taken from the outbox behind a batch, sent next

    def send(self, msg: agent_pb2.ControllerMessage) -> None:
        """Queue a message to the agent (dropped once the session is closed).

        ResourceExhausted when MAX_OUTBOX messages are queued already: the agent is not reading."""
        if self.closed:
            return
        if self.outbox.qsize() >= MAX_OUTBOX:
            raise ResourceExhausted(f"device {self.device_id} is not reading its stream ({self.outbox.qsize()} "
                                    "messages queued); nothing more is sent to it", field="device_id")
        self.outbox.put_nowait(msg)

    def notify(self, msg: agent_pb2.ControllerMessage) -> bool:
        """Queue a notice to the agent unless MAX_QUEUED_NOTICES messages wait already; False if it was dropped."""
        if self.closed or self.outbox.qsize() >= MAX_QUEUED_NOTICES:
            self.dropped_notices += 1
            return False
        self.outbox.put_nowait(msg)
        return True

    async def next_message(self) -> agent_pb2.ControllerMessage | None:
        """The next message to send (None: the stream ends). Commands queued together go as one CommandBatch to
        an agent that reads them, in the order they were queued."""
        carried = self._carry
        self._carry = NOTHING
        msg = await self.outbox.get() if carried is NOTHING else carried
        assert msg is None or isinstance(msg, agent_pb2.ControllerMessage)
        if msg is None or not self.batches or self.outbox.empty() or msg.WhichOneof("kind") != "command":
            return msg
        more, self._carry = take_queued(self.outbox, lambda m: m is not None and m.WhichOneof("kind") == "command",
                                        MAX_BATCH_COMMANDS - 1)   # a message taken after them is sent next
        commands = [msg.command] + [m.command for m in more if m is not None]
        if len(commands) == 1:
            return msg
        self.command_batches += 1
        return agent_pb2.ControllerMessage(commands=agent_pb2.CommandBatch(commands=commands))

    def close(self) -> None:
        """End the session's response stream."""
        if not self.closed:
            self.closed = True
            self.outbox.put_nowait(None)  # ends the response stream


@dataclass(eq=False)
class LiveDevice:
    """A known board: its stored record, its catalog and its session while it is online."""

    record: DeviceRecord
    catalog: Catalog
    session: Session | None = None
    metrics_address: str = ""   # HOST:PORT of the agent's /metrics (peer host as seen here), "" = none
    busy: str = ""              # the command its last heartbeat said it runs ("" when idle)
    instance_id: str = ""       # the agent process's instance (from its hello): a new one forgot every command
    workloads: tuple[str, ...] = ()              # what the board offers (the built-ins and its plugins)
    reported: tuple[object, ...] = ()            # the last heartbeat's mode: ((cores, MHz...), its checked text)
    broken_workloads: dict[str, str] = field(default_factory=dict)   # plugins that failed to load there
    templates: dict[str, tuple[str, ...]] = field(default_factory=dict)   # job templates its agent launches: args
    template_rules: dict[str, tuple[str, ...]] = field(default_factory=dict)   # their args' rules (ArgRule texts)
    speed: float = 0.0          # board seconds per wall second, as its agent said (1: real time; 0: not said)

    @property
    def online(self) -> bool:
        """True while the board's agent holds a session."""
        return self.session is not None and not self.session.closed


class Registry:
    """Every board the controller knows, online or not."""

    def __init__(self, store: Store, config: ControllerConfig, metrics: ControllerMetrics, *,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self.store, self.config, self.metrics = store, config, metrics
        self.clock, self.wall = clock, wall
        self.devices: dict[str, LiveDevice] = {}
        # What the gauges say, moved board by board (a full recount on every hello is quadratic in a fleet
        # coming up): each board's (model, state) as exported, and the boards per (model, state).
        self._exported: dict[str, tuple[str, str]] = {}
        self._counts: dict[tuple[str, str], int] = {}
        # called just before a board goes offline: the telemetry hub keeps what the board sent while online
        self.before_offline: Callable[[], None] = lambda: None

    async def load(self) -> None:
        """Read the known boards from the store (all offline until their agents dial in)."""
        for rec in await asyncio.to_thread(self.store.list_devices):
            self.devices[rec.device_id] = LiveDevice(rec, catalog_from_dict(rec.catalog))
        self._update_gauges(*self.devices.values())
        log.info("registry loaded %d boards from %s", len(self.devices), self.store.url)

    # --- sessions --------------------------------------------------------------------------------
    async def attach(self, hello: agent_pb2.Hello, peer_host: str = "") -> Session:
        """Check a hello and open the board's session; a board already online from another serial is refused."""
        board = hello.board
        catalog = check_board(board)
        device_id = board.device_id
        check_text(hello.agent_version, "hello.agent_version", 64)
        mode = catalog.validate(mode_from_pb(hello.current_mode)) if hello.HasField("current_mode") else None
        workloads = tuple(board.workloads)              # each checked by check_board
        broken = dict(board.broken_workloads)
        instance = check_id(hello.instance_id, "hello.instance_id") if hello.instance_id else ""
        live = self.devices.get(device_id)
        if live is not None and live.online and live.session and live.session.serial != board.serial:
            raise AlreadyExists(f"device id {device_id!r} is already connected from board serial "
                                f"{live.session.serial}; this board is {board.serial}", field="device_id")
        now = self.wall()
        rec = DeviceRecord(device_id, catalog.model, board.serial, dict(board.software), catalog.to_dict(),
                           board.emulated, str(mode) if mode else "", live.record.first_seen_s if live else now, now)
        await asyncio.to_thread(self._record_online, rec, Event(device_id, now, "online", board.serial))
        if live is None:
            live = self.devices[device_id] = LiveDevice(rec, catalog)
        else:
            live.record, live.catalog = rec, catalog
        if live.session is not None:  # the same board reconnecting: the old stream is dead
            live.session.close()
        live.session = Session(uuid.uuid4().hex, device_id, board.serial, asyncio.Queue(), self.clock(),
                               catalog=catalog, batches=hello.batches)
        live.instance_id, live.workloads, live.broken_workloads = instance, workloads, broken
        live.templates = {t.name: tuple(t.args) for t in board.templates}   # each checked by check_board
        live.template_rules = {t.name: tuple(t.arg_rules) for t in board.templates if any(t.arg_rules)}
        live.speed = board.speed if board.emulated else 1.0
        host = f"[{peer_host}]" if ":" in peer_host else peer_host
        live.metrics_address = f"{host}:{hello.metrics_port}" if hello.metrics_port and peer_host else ""
        self._update_gauges(live)
        log.info("board %s (%s, serial %s) online", device_id, catalog.model, board.serial)
        return live.session

    def _record_online(self, rec: DeviceRecord, event: Event) -> None:
        """The board's record, then its online event (one trip to a store thread per hello)."""
        self.store.upsert_device(rec)
        self.store.append_event(event)

    async def detach(self, session: Session, reason: str) -> None:
        """Close a session; the board goes offline if it was its current one.

        The board is offline at once; if the store cannot record it now, that is logged, not raised."""
        live = self.devices.get(session.device_id)
        session.close()
        if live is None or live.session is not session:
            return
        self.before_offline()
        live.session = None
        live.record.last_seen_s = self.wall()
        self.metrics.board_offline(session.device_id, live.catalog.model)
        self._update_gauges(live)
        log.info("board %s offline: %s", session.device_id, reason)
        try:
            await asyncio.to_thread(self.store.upsert_device, live.record)
            await asyncio.to_thread(self.store.append_event, Event(session.device_id, self.wall(), "offline", reason))
        except JetfleetError as e:
            log.warning("board %s offline, not recorded in the store: %s", session.device_id, e.message)

    async def forget(self, device_id: str) -> None:
        """Remove an offline board and its history from the registry and the store.

        FailedPrecondition while its agent is connected (stop the agent first)."""
        live = self.get(device_id)
        if live.online:
            raise FailedPrecondition(f"device {device_id} is online; stop its agent before forgetting it",
                                     field="device_id")
        await asyncio.to_thread(self.store.delete_device, device_id)
        if self.devices.get(device_id) is live and not live.online:
            del self.devices[device_id]
            self.metrics.board_forgotten(device_id)
        self._update_gauges(live)
        log.info("board %s forgotten", device_id)

    async def reap(self, lag_s: float = 0.0) -> list[str]:
        """Mark boards offline whose heartbeats stopped; returns their ids.

        ``lag_s``: how far behind the controller itself is (its reaper ran that late): a heartbeat that waited
        unread for that long is not the board's fault, so each board gets that much longer."""
        now = self.clock()
        limit = self.config.offline_after_s + max(0.0, lag_s)
        stale = [d.session for d in self.devices.values()
                 if d.session and not d.session.closed and now - d.session.last_seen > limit]
        for s in stale:
            if s is not None:
                await self.detach(s, f"no heartbeat for {self.config.offline_after_s:.1f} s")
        return [s.device_id for s in stale if s is not None]

    def touch(self, session: Session) -> None:
        """The agent spoke: it is alive."""
        session.last_seen = self.clock()

    def heartbeat(self, session: Session, hb: agent_pb2.Heartbeat) -> None:
        """A heartbeat keeps the session alive and reports the mode the board runs."""
        self.touch(session)
        live = self.get(session.device_id)
        live.busy = hb.busy_command_id[:160]
        if hb.HasField("current_mode"):
            m = hb.current_mode
            knobs = (m.cores, m.cpu_mhz, m.gpu_mhz, m.mem_mhz)
            # Checked once per change of mode, not once per heartbeat.
            if not live.reported or live.reported[0] != knobs or live.reported[1] != live.record.current_mode:
                live.record.current_mode = str(live.catalog.validate(mode_from_pb(m)))
                live.reported = (knobs, live.record.current_mode)

    def record_mode(self, device_id: str, mode: str) -> None:
        """Store the mode a board confirmed (its record and a mode event); blocking, run off the event loop."""
        live = self.devices.get(device_id)
        if live is None:  # forgotten meanwhile
            return
        self.store.upsert_device(replace(live.record, current_mode=mode))
        self.store.append_event(Event(device_id, self.wall(), "mode", mode))

    # --- queries -----------------------------------------------------------------------------------
    def get(self, device_id: str) -> LiveDevice:
        """The board ``device_id``; NotFound naming some known ones otherwise."""
        live = self.devices.get(device_id)
        if live is None:
            known = ", ".join(sorted(self.devices)[:20]) or "none"
            raise NotFound(f"unknown device {device_id[:64]!r} (known: {known})", field="device_id")
        return live

    def check_workload(self, workload: str, *, device_id: str = "", board_model: str = "") -> None:
        """NotFound unless ``workload`` is built in or offered by the board (or by a known board of the model):
        a board offers the built-ins plus the plugins installed on it."""
        if workload in WORKLOADS:
            return
        boards = [self.get(device_id)] if device_id else self.list(board_model)
        if any(workload in d.workloads for d in boards):
            return
        offered = sorted({w for d in boards for w in d.workloads} - set(WORKLOADS))
        broken = sorted({f"{k} ({v})" for d in boards for k, v in d.broken_workloads.items() if k == workload})
        where = device_id or board_model or "any board"
        raise NotFound(f"unknown workload {workload!r} for {where}; built in: {', '.join(sorted(WORKLOADS))}"
                       + (f"; plugins offered there: {', '.join(offered)}" if offered else "")
                       + (f"; broken there: {', '.join(broken)}" if broken else ""), field="workload")

    def list(self, model: str = "") -> list[LiveDevice]:
        """Every board (of ``model``), by id."""
        return [d for k, d in sorted(self.devices.items()) if not model or d.catalog.model == model]

    def _update_gauges(self, *lives: LiveDevice) -> None:
        """Move the series of the given boards: each one's online state, and the per-model counts it leaves and
        joins (a count that reaches 0 goes, as a forgotten board's state does)."""
        for d in lives:
            dev = d.record.device_id
            known = self.devices.get(dev) is d
            new = (d.catalog.model, "online" if d.online else "offline") if known else None
            if known:
                self.metrics.board_online.labels(dev, d.catalog.model).set(1 if d.online else 0)
            old = self._exported.get(dev)
            if old == new:
                continue
            for key, delta in ((old, -1), (new, 1)):
                if key is None:
                    continue
                n = self._counts[key] = self._counts.get(key, 0) + delta
                if n > 0:
                    self.metrics.agents.labels(*key).set(n)
                else:
                    del self._counts[key]
                    self.metrics.agents.remove(*key)
            if new is None:
                del self._exported[dev]
            else:
                self._exported[dev] = new

    def close_all(self) -> None:
        """End every session (the controller is stopping)."""
        for d in self.devices.values():
            if d.session:
                d.session.close()

