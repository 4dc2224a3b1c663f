"""Commands to boards: each has an id, goes down the board's stream, is acknowledged, and is
answered with a result carrying the same id. Idempotent by id: a repeated id with the same request
returns the stored outcome (or waits for the one in flight) instead of acting twice; the same id
with a different request is refused (FAILED_PRECONDITION naming both), as payment APIs treat a
reused idempotency key. The agent also keeps recent results by id, so a command resent after a
reconnect is not executed twice.

A result too big for one message arrives as ResultParts followed by the CommandResult that says
how many parts came before it; the parts are joined here, bounded in count and bytes per result.
A result is written to the command log before it settles its command (durable before it is
acknowledged); while the store is unavailable it settles the command at once and the write is retried
in the background with backoff, so a store outage never strands a board's answer.

A caller that stores the outcome itself sends with ``logged=False``: nothing is written when the
command goes out or when its result comes back, and the caller writes the log entry together with
what the result means to it (a campaign: the result, the mode's state and the log entry in one
durable write). Such a command is idempotent by id while it is in flight (a repeat joins it) and on
the board (the agent answers a resent id from its memory)."""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format

from jetfleet.controller.metrics import ControllerMetrics
from jetfleet.controller.registry import LiveDevice, Registry, Session
from jetfleet.controller.retry import StoreRetry
from jetfleet.controller.store import CommandRecord
from jetfleet.shared.bounds import check_command_id
from jetfleet.shared.columns import profile_samples, samples_from_columns
from jetfleet.shared.convert import mode_from_pb, mode_text
from jetfleet.shared.errors import (
    DeadlineExceeded,
    DeviceError,
    FailedPrecondition,
    InvalidArgument,
    JetfleetError,
    ResourceExhausted,
    StoreUnavailable,
    Unavailable,
    error_from_code,
)
from jetfleet.shared.proto import agent_pb2
from jetfleet.shared.workloads import MAX_MINIBATCHES

log = logging.getLogger(__name__)
MAX_RESULT_PARTS = 1024              # parts of one result
MAX_RESULT_BYTES = 64 * 1024 * 1024  # one result joined from parts (about 300,000 power samples of a 4-rail board)
MAX_PARTIAL_RESULTS = 2              # results arriving in parts at once on one session
MAX_UNLOGGED_REMEMBERED = 10_000     # ids of recent commands sent with logged=False (a late result is expected)
MAX_SUPERSEDED = 10_000              # commands nobody wants any more, remembered until their board is seen with them
CANCEL_EVERY_S = 5.0                 # a superseded command seen running is asked to stop at most this often


class BoardOffline(Unavailable):
    """The board is offline, or went offline before answering: the router's own error, never a board's result (a
    board that answers with UNAVAILABLE raises a plain Unavailable)."""


class BoardUnreached(BoardOffline):
    """The board was offline when the command was to be sent: it never reached the board."""


class BoardSilent(DeadlineExceeded):
    """The board did not answer a command within the router's timeout (the command stays pending there): the
    router's own error, never a board's result (a board that answers DEADLINE_EXCEEDED raises a plain one)."""


BOARD_GONE = (BoardOffline, BoardSilent)   # what a job that holds a board waits out: the board itself went away


@dataclass
class _Pending:
    device_id: str
    kind: str
    future: asyncio.Future[agent_pb2.CommandResult]
    session_id: str        # the stream it went down: a result can only come back on it
    logged: bool = True    # False: the caller writes the log entry with the outcome


@dataclass
class _Partial:
    parts: int = 0
    size: int = 0
    times: list[float] = field(default_factory=list)
    power: list[Any] = field(default_factory=list)


class CommandRouter:
    """Sends commands down boards' streams, matches results to them by id, and keeps the command log in the store."""

    def __init__(self, registry: Registry, metrics: ControllerMetrics, retry: StoreRetry | None = None) -> None:
        self.registry, self.metrics = registry, metrics
        self.retry = retry or StoreRetry(on_retry=metrics.store_retries.inc)
        self._pending: dict[str, _Pending] = {}
        self._partials: dict[tuple[str, str], _Partial] = {}   # (session id, command id) -> parts so far
        self._tasks: set[asyncio.Task[None]] = set()
        # Listeners of running trainings' progress reports, by command id (a job registers its own).
        self._progress: dict[str, Callable[[str, agent_pb2.TrainingProgress], None]] = {}
        self._unlogged: OrderedDict[str, str] = OrderedDict()   # command id -> device, sent with logged=False
        # Commands their owner gave up on (a job moved to another board, or ended): command id -> board. A board seen
        # running one (its heartbeat names it) is told to cancel it: it must not train work counted nowhere.
        self._superseded: OrderedDict[str, str] = OrderedDict()
        # board -> how many of ``_superseded`` are its: a heartbeat of a board with none is not read further
        self._superseded_on: dict[str, int] = {}
        self._cancelled_at: dict[str, float] = {}
        self.superseded_cancels = 0   # cancels sent for superseded commands (tests and logs)
        self._cancels: set[asyncio.Task[None]] = set()

    async def send(self, device_id: str, command: agent_pb2.Command, *, timeout_s: float | None = None,
                   command_id: str = "", logged: bool = True) -> agent_pb2.CommandResult:
        """Send ``command`` (its kind set; its id is ``command_id`` or a new one) and wait for the result.

        ``logged=False``: the caller writes the command's log entry with its outcome (``log_record``);
        nothing is written here. Raises the board's error as a domain error when the command failed."""
        kind = command.WhichOneof("kind") or ""
        if not kind:
            raise InvalidArgument("command has no kind", field="command")
        cid = check_command_id(command_id, "request_id") if command_id else uuid.uuid4().hex
        command.command_id = cid
        self._unsupersede(cid)   # sent again: wanted again (the board joins the run it has)
        live = self.registry.get(device_id)
        if not logged:
            if cid in self._pending:   # the same command in flight: join it
                return await self._join(cid, device_id, timeout_s)
            self._unlogged[cid] = device_id
            self._unlogged.move_to_end(cid)
            while len(self._unlogged) > MAX_UNLOGGED_REMEMBERED:
                self._unlogged.popitem(last=False)
            return await self._send(live, device_id, cid, kind, command, timeout_s, logged=False)
        store = self.registry.store
        payload = json_format.MessageToDict(command)
        record = CommandRecord(cid, device_id, kind, payload, self.registry.wall())
        if not await asyncio.to_thread(store.insert_command, record):
            existing = await asyncio.to_thread(store.get_command, cid)
            if existing is not None:
                _same_request(existing, record)
            if existing is not None and existing.status in ("done", "failed") and not existing.result.get(COMPACTED):
                return _stored_result(existing)
            if cid in self._pending:  # the same request while it is in flight: wait for that one
                return await self._join(cid, device_id, timeout_s)
        return await self._send(live, device_id, cid, kind, command, timeout_s, logged=True)

    async def _join(self, cid: str, device_id: str, timeout_s: float | None) -> agent_pb2.CommandResult:
        """Wait for the command ``cid`` already in flight."""
        running = self._pending[cid].future
        try:
            return _raise_failed(await asyncio.wait_for(asyncio.shield(running), timeout_s))
        except asyncio.TimeoutError:
            raise BoardSilent(f"command {cid} is still running on {device_id}", field="timeout_s") from None

    async def _send(self, live: LiveDevice, device_id: str, cid: str, kind: str, command: agent_pb2.Command,
                    timeout_s: float | None, *, logged: bool) -> agent_pb2.CommandResult:
        if not live.online or live.session is None:
            raise BoardUnreached(f"device {device_id!r} is offline", field="device_id")
        fut: asyncio.Future[agent_pb2.CommandResult] = asyncio.get_running_loop().create_future()
        session = live.session
        session.send(agent_pb2.ControllerMessage(command=command))  # ResourceExhausted if it does not read
        self._pending[cid] = _Pending(device_id, kind, fut, session.session_id, logged)
        start = time.perf_counter()
        try:
            result = await asyncio.wait_for(asyncio.shield(fut), timeout_s or self.registry.config.command_timeout_s)
        except asyncio.TimeoutError:
            self.metrics.commands.labels(kind, "timeout").inc()
            raise BoardSilent(f"device {device_id} did not answer command {cid} in time; it stays pending, "
                                   "and a retry with the same request id will not repeat it",
                                   field="timeout_s") from None
        finally:
            if self._pending.get(cid) is not None and self._pending[cid].future is fut:
                del self._pending[cid]
        self.metrics.command_latency.labels(kind).observe(time.perf_counter() - start)
        return _raise_failed(result)

    def on_ack(self, session: Session, ack: agent_pb2.CommandAck) -> None:
        """Log a board's refusal of a command (the failed result that follows settles it)."""
        if not ack.accepted:
            log.info("board %s refused command %s: %s", session.device_id, ack.command_id[:160],
                     ack.error.message[:200])

    def on_part(self, session: Session, part: agent_pb2.ResultPart) -> None:
        """Keep one part of a result that arrives in parts; InvalidArgument or ResourceExhausted if it does not fit."""
        pending = self._pending.get(part.command_id)
        if pending is None or pending.device_id != session.device_id:
            raise InvalidArgument(f"result part for unknown command {part.command_id[:160]!r}",
                                  field="result_part.command_id")
        key = (session.session_id, part.command_id)
        partial = self._partials.get(key)
        if partial is None:
            if sum(1 for k in self._partials if k[0] == session.session_id) >= MAX_PARTIAL_RESULTS:
                raise ResourceExhausted(f"more than {MAX_PARTIAL_RESULTS} results arriving in parts at once",
                                        field="result_part")
            partial = self._partials[key] = _Partial()
        size = part.ByteSize()
        if part.index != partial.parts or partial.parts >= MAX_RESULT_PARTS or partial.size + size > MAX_RESULT_BYTES:
            del self._partials[key]
            raise ResourceExhausted(f"result of {part.command_id} in parts: part {part.index} after {partial.parts} "
                                    f"parts, {partial.size + size} bytes (at most {MAX_RESULT_PARTS} parts in order, "
                                    f"{MAX_RESULT_BYTES} bytes)", field="result_part.index")
        partial.parts += 1
        partial.size += size
        partial.times.extend(part.minibatch_times_s)
        partial.power.extend(part.power)

    def _joined(self, session: Session, result: agent_pb2.CommandResult) -> agent_pb2.CommandResult:
        partial = self._partials.pop((session.session_id, result.command_id), None)
        got = partial.parts if partial else 0
        if got != result.parts:
            raise DeviceError(f"result of {result.command_id} arrived with {got} of its {result.parts} parts",
                              field="result.parts")
        if partial is None:
            return result
        whole = agent_pb2.CommandResult()
        whole.CopyFrom(result)
        if whole.WhichOneof("kind") == "profile":
            del whole.profile.minibatch_times_s[:]
            whole.profile.minibatch_times_s.extend(partial.times + list(result.profile.minibatch_times_s))
            del whole.profile.power[:]
            whole.profile.power.extend(partial.power + list(result.profile.power)
                                       + samples_from_columns(result.profile.power_columns))
            whole.profile.ClearField("power_columns")
        return whole

    def drop_session(self, session: Session) -> None:
        """Forget the parts of results a closed session was sending."""
        for key in [k for k in self._partials if k[0] == session.session_id]:
            del self._partials[key]

    async def on_result(self, session: Session, result: agent_pb2.CommandResult) -> None:
        """Settle a command with its board's result, then record it (a confirmed mode too) in the store.

        InvalidArgument if the command is unknown or was sent to another board."""
        pending = self._pending.get(result.command_id)
        if pending is not None:
            if pending.device_id != session.device_id:
                raise InvalidArgument(f"result for unknown command {result.command_id[:160]!r}",
                                      field="result.command_id")
            kind = pending.kind
        elif self._unlogged.get(result.command_id) == session.device_id:
            # Sent unlogged and nobody waits any more (it timed out, or the board's stream was replaced):
            # its caller logs what it learned and resends it by id, which the board answers from memory.
            self._partials.pop((session.session_id, result.command_id), None)
            log.info("board %s: late result of %s dropped; its caller resends it", session.device_id,
                     result.command_id[:160])
            return
        else:  # nobody waits (a controller restart, a timeout): the log still learns the outcome
            rec = await asyncio.to_thread(self.registry.store.get_command, result.command_id)
            if rec is None or rec.device_id != session.device_id:
                raise InvalidArgument(f"result for unknown command {result.command_id[:160]!r}",
                                      field="result.command_id")
            kind = rec.kind
        try:
            result = self._joined(session, result)
        except DeviceError as e:
            if pending is not None and not pending.future.done():
                pending.future.set_exception(e)
            raise
        mode = None
        if kind == "set_mode" and result.ok:
            mode = str(self.registry.get(session.device_id).catalog.validate(mode_from_pb(result.confirmed_mode)))
            self.registry.get(session.device_id).record.current_mode = mode
        self.metrics.commands.labels(kind, "ok" if result.ok else "failed").inc()
        if pending is not None and not pending.logged and mode is None:   # its caller logs it with the outcome
            if not pending.future.done():
                pending.future.set_result(result)
            return
        try:  # durable before it is acknowledged ...
            await asyncio.to_thread(self._record, session.device_id, result, mode)
        except StoreUnavailable as e:  # ... unless the store is down: the answer goes on, the log catches up
            log.warning("command %s: %s; recording it in the background", result.command_id, e.message)
            self._record_later(session.device_id, result, mode)
        if pending is not None and not pending.future.done():
            pending.future.set_result(result)

    def supersede(self, device_id: str, command_id: str) -> None:
        """Nobody wants ``command_id`` on ``device_id`` any more: cancel it there as soon as the board is seen running it."""
        self._unsupersede(command_id)
        self._superseded[command_id] = device_id
        self._superseded_on[device_id] = self._superseded_on.get(device_id, 0) + 1
        while len(self._superseded) > MAX_SUPERSEDED:
            self._unsupersede(next(iter(self._superseded)))

    def _unsupersede(self, command_id: str) -> None:
        device_id = self._superseded.pop(command_id, None)
        if device_id is not None:
            left = self._superseded_on[device_id] - 1
            if left:
                self._superseded_on[device_id] = left
            else:
                del self._superseded_on[device_id]

    def seen_heartbeat(self, session: Session, hb: agent_pb2.Heartbeat) -> None:
        """A board's heartbeat: the command it runs and the launches still running there, each cancelled if it was
        superseded (a launch is named by its job's id, which ``supersede`` is given when the job ends undone). The
        heartbeat of a board none of whose commands was superseded is not read (thousands a second)."""
        if session.device_id not in self._superseded_on:
            return
        self.seen_busy(session, hb.busy_command_id)
        for launch_id in hb.launch_ids:
            self.seen_busy(session, launch_id)

    def seen_busy(self, session: Session, command_id: str) -> None:
        """A board's heartbeat says it runs ``command_id``: if that command was superseded, ask the board to cancel it
        (at most every CANCEL_EVERY_S; the cancel goes in a task of the router's)."""
        if not command_id or self._superseded.get(command_id) != session.device_id:
            return
        now = time.monotonic()
        if now - self._cancelled_at.get(command_id, -math.inf) < CANCEL_EVERY_S:
            return
        self._cancelled_at[command_id] = now
        if len(self._cancelled_at) > MAX_SUPERSEDED:
            self._cancelled_at.clear()
        log.info("board %s runs superseded command or launch %s: cancelling it", session.device_id, command_id[:160])
        self.superseded_cancels += 1
        task = asyncio.create_task(self._cancel_superseded(session.device_id, command_id))
        self._cancels.add(task)
        task.add_done_callback(self._cancels.discard)

    async def _cancel_superseded(self, device_id: str, command_id: str) -> None:
        try:
            await self.send(device_id, agent_pb2.Command(cancel=agent_pb2.Cancel(target_command_id=command_id)),
                            timeout_s=30, logged=False)
        except JetfleetError as e:   # seen running it again later, the board is asked again
            log.info("cancel of superseded %s on %s: %s", command_id[:160], device_id, e.message)

    def watch_progress(self, command_id: str, listener: Callable[[str, agent_pb2.TrainingProgress], None]) -> None:
        """Call ``listener(device_id, report)`` with every progress report of the training ``command_id``."""
        self._progress[command_id] = listener

    def unwatch_progress(self, command_id: str) -> None:
        """Stop passing on the progress of ``command_id``."""
        self._progress.pop(command_id, None)

    def on_progress(self, session: Session, report: agent_pb2.TrainingProgress) -> None:
        """Pass a progress report to its command's listener; a report nobody listens for is dropped.

        InvalidArgument for a report with non-finite or negative figures, more minibatches than a run may have,
        or a mode outside the board's catalog."""
        values = (report.t_s, report.elapsed_s, report.energy_j)
        if any(not math.isfinite(v) or v < 0 for v in values):
            raise InvalidArgument("progress report with a negative or non-finite figure", field="progress")
        if report.minibatches_done > MAX_MINIBATCHES:
            raise InvalidArgument(f"progress report of {report.minibatches_done} minibatches; a run has at most "
                                  f"{MAX_MINIBATCHES}", field="progress.minibatches_done")
        check_command_id(report.command_id, "progress.command_id")
        try:
            self.registry.get(session.device_id).catalog.validate(mode_from_pb(report.mode))
        except InvalidArgument as e:
            raise InvalidArgument(f"progress.mode: {e.message}", field=f"progress.mode.{e.field}") from None
        listener = self._progress.get(report.command_id)
        if listener is not None:
            listener(session.device_id, report)

    def _record(self, device_id: str, result: agent_pb2.CommandResult, mode: str | None) -> None:
        """Store a result in the command log, and the board's confirmed mode (blocking, off the event loop)."""
        if mode is not None:
            self.registry.record_mode(device_id, mode)
        self.registry.store.finish_command(result.command_id, "done" if result.ok else "failed", _compact(result), {},
                                           self.registry.wall())

    def _record_later(self, device_id: str, result: agent_pb2.CommandResult, mode: str | None) -> None:
        task = asyncio.create_task(self.retry.run(self._record, device_id, result, mode,
                                                  what=f"command {result.command_id}"))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def flush(self) -> None:
        """Wait until every result received so far is in the command log."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        """Stop recording results (the controller stops); commands still pending fail now."""
        for task in [*self._tasks, *self._cancels]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._cancels, return_exceptions=True)
        for p in self._pending.values():
            if not p.future.done():
                p.future.set_exception(Unavailable("the controller is stopping", field="device_id"))

    def fail_pending(self, device_id: str, session: Session | None = None) -> None:
        """A board went away (or one of its streams did): commands waiting on it (sent down ``session``) fail
        now rather than at their timeout. They stay pending in the store, so a retry with the same request id
        resends them."""
        for p in list(self._pending.values()):
            if p.device_id == device_id and not p.future.done() and (session is None
                                                                      or p.session_id == session.session_id):
                p.future.set_exception(BoardOffline(f"device {device_id} went offline before answering",
                                                   field="device_id"))


COMPACTED = "compacted"


def _request_text(rec: CommandRecord) -> str:
    """A logged command as operators would say it: 'set_mode 4/960/408/2133 on orin-nano-2'."""
    try:
        cmd = json_format.ParseDict(rec.payload, agent_pb2.Command())
    except json_format.ParseError:
        return f"{rec.kind} on {rec.device_id}"
    what = {"set_mode": lambda: mode_text(cmd.set_mode.mode),
            "run_profile": lambda: f"{cmd.run_profile.workload} in {mode_text(cmd.run_profile.mode)}",
            "run_training": lambda: f"{cmd.run_training.workload} x {cmd.run_training.minibatches}",
            "cancel": lambda: cmd.cancel.target_command_id}.get(rec.kind, lambda: "")()
    return f"{rec.kind} {what} on {rec.device_id}"[:300]


def _same_request(existing: CommandRecord, new: CommandRecord) -> None:
    """FailedPrecondition naming both requests when a request id is reused for a different request."""
    same = (existing.device_id == new.device_id and existing.kind == new.kind
            and {k: v for k, v in existing.payload.items() if k != "commandId"}
            == {k: v for k, v in new.payload.items() if k != "commandId"})
    if not same:
        raise FailedPrecondition(f"request id {new.command_id!r} was already used for a different request: "
                                 f"{_request_text(existing)}; this one is {_request_text(new)}", field="request_id")


_SAMPLE_FIELDS = frozenset({"power", "minibatch_times_s", "power_columns"})


def _compact(result: agent_pb2.CommandResult) -> dict[str, object]:
    """What the command log keeps of a result. A profile's samples are stored once, with the profile
    (campaigns record them); the log keeps the summary and says so. A compacted command that is
    replayed is resent to the board, whose agent answers from the run it remembers."""
    if result.WhichOneof("kind") != "profile":
        return json_format.MessageToDict(result)
    slim = agent_pb2.CommandResult(command_id=result.command_id, ok=result.ok)
    if result.HasField("error"):
        slim.error.CopyFrom(result.error)
    slim.profile.SetInParent()
    for desc, value in result.profile.ListFields():   # all but the samples, without copying them (~40 KB a mode)
        if desc.name not in _SAMPLE_FIELDS:
            if desc.message_type is not None:
                getattr(slim.profile, desc.name).CopyFrom(value)
            else:
                setattr(slim.profile, desc.name, value)
    return {**json_format.MessageToDict(slim), COMPACTED: True, "samples": profile_samples(result.profile),
            "minibatches": len(result.profile.minibatch_times_s)}


def command_record(device_id: str, command: agent_pb2.Command, created_s: float, *,
                   result: agent_pb2.CommandResult | None = None, error: JetfleetError | None = None,
                   finished_s: float = 0.0) -> CommandRecord:
    """The log entry of a command sent with ``logged=False``, with what became of it: done or failed with its
    (compacted) result, or still pending with the error that ended the wait (no result came back)."""
    rec = CommandRecord(command.command_id, device_id, command.WhichOneof("kind") or "",
                        json_format.MessageToDict(command), created_s)
    if result is not None:
        rec.status, rec.result, rec.finished_s = ("done" if result.ok else "failed"), _compact(result), finished_s
    elif error is not None:
        rec.error = {"code": error.code, "message": error.message[:500]}
    return rec


def _raise_failed(result: agent_pb2.CommandResult) -> agent_pb2.CommandResult:
    if not result.ok:
        err: JetfleetError = error_from_code(result.error.code, result.error.message)
        err.field = result.error.field or None
        raise err
    return result


def _stored_result(rec: CommandRecord) -> agent_pb2.CommandResult:
    return _raise_failed(json_format.ParseDict(rec.result, agent_pb2.CommandResult()))
