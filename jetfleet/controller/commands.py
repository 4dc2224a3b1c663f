"""Commands to boards: each has an id, goes down the board's stream, is acknowledged, and is
answered with a result carrying the same id. Idempotent by id: a repeated id returns the stored
outcome (or waits for the one in flight) instead of acting twice; the agent also keeps recent
results by id, so a command resent after a reconnect is not executed twice."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

from google.protobuf import json_format

from jetfleet.controller.metrics import ControllerMetrics
from jetfleet.controller.registry import Fleet, Session
from jetfleet.controller.store import CommandRecord
from jetfleet.shared.convert import check_name, mode_from_pb
from jetfleet.shared.errors import DeadlineExceeded, InvalidArgument, JetfleetError, Unavailable, error_from_code
from jetfleet.shared.proto import agent_pb2

log = logging.getLogger(__name__)


class CommandRouter:
    def __init__(self, fleet: Fleet, metrics: ControllerMetrics) -> None:
        self.fleet, self.metrics = fleet, metrics
        self._pending: dict[str, tuple[str, asyncio.Future[agent_pb2.CommandResult]]] = {}

    async def send(self, device_id: str, command: agent_pb2.Command, *, timeout_s: float | None = None,
                   command_id: str = "") -> agent_pb2.CommandResult:
        """Send ``command`` (its kind set; its id is ``command_id`` or a new one) and wait for the result.

        Raises the board's error as a domain error when the command failed."""
        kind = command.WhichOneof("kind") or ""
        if not kind:
            raise InvalidArgument("command has no kind", field="command")
        cid = check_name(command_id, "request_id") if command_id else uuid.uuid4().hex
        command.command_id = cid
        live = self.fleet.get(device_id)
        store = self.fleet.store
        record = CommandRecord(cid, device_id, kind, json_format.MessageToDict(command), time.time())
        if not await asyncio.to_thread(store.insert_command, record):
            existing = await asyncio.to_thread(store.get_command, cid)
            if existing is not None and existing.device_id != device_id:
                raise InvalidArgument(f"request id {cid!r} was already used for device {existing.device_id}",
                                      field="request_id")
            if existing is not None and existing.status in ("done", "failed") and not existing.result.get(COMPACTED):
                return _stored_result(existing)
            if cid in self._pending:  # the same request while it is in flight: wait for that one
                return _raise_failed(await asyncio.wait_for(asyncio.shield(self._pending[cid][1]), timeout_s))
        if not live.online or live.session is None:
            raise Unavailable(f"device {device_id!r} is offline", field="device_id")
        fut: asyncio.Future[agent_pb2.CommandResult] = asyncio.get_running_loop().create_future()
        self._pending[cid] = (device_id, fut)
        start = time.perf_counter()
        live.session.send(agent_pb2.ControllerMessage(command=command))
        try:
            result = await asyncio.wait_for(asyncio.shield(fut), timeout_s or self.fleet.config.command_timeout_s)
        except TimeoutError:
            self.metrics.commands.labels(kind, "timeout").inc()
            raise DeadlineExceeded(f"device {device_id} did not answer command {cid} in time; it stays pending, "
                                   "and a retry with the same request id will not repeat it",
                                   field="timeout_s") from None
        finally:
            self._pending.pop(cid, None)
        self.metrics.command_latency.labels(kind).observe(time.perf_counter() - start)
        return _raise_failed(result)

    def on_ack(self, session: Session, ack: agent_pb2.CommandAck) -> None:
        if not ack.accepted:
            log.info("board %s refused command %s: %s", session.device_id, ack.command_id, ack.error.message)

    async def on_result(self, session: Session, result: agent_pb2.CommandResult) -> None:
        rec = await asyncio.to_thread(self.fleet.store.get_command, result.command_id)
        if rec is None or rec.device_id != session.device_id:
            raise InvalidArgument(f"result for unknown command {result.command_id!r}", field="result.command_id")
        if rec.kind == "set_mode" and result.ok:
            mode = self.fleet.get(session.device_id).catalog.validate(mode_from_pb(result.confirmed_mode))
            await self.fleet.set_current_mode(session.device_id, str(mode))
        status = "done" if result.ok else "failed"
        await asyncio.to_thread(self.fleet.store.finish_command, result.command_id, status, _compact(result), {},
                                time.time())
        self.metrics.commands.labels(rec.kind, "ok" if result.ok else "failed").inc()
        pending = self._pending.get(result.command_id)
        if pending is not None and not pending[1].done():
            pending[1].set_result(result)

    def fail_pending(self, device_id: str) -> None:
        """A board went away: commands waiting on it fail now rather than at their timeout. They stay
        pending in the store, so a retry with the same request id resends them."""
        for dev, fut in list(self._pending.values()):
            if dev == device_id and not fut.done():
                fut.set_exception(Unavailable(f"device {device_id} went offline before answering",
                                              field="device_id"))


COMPACTED = "compacted"


def _compact(result: agent_pb2.CommandResult) -> dict[str, object]:
    """What the command log keeps of a result. A profile's samples are stored once, with the profile
    (campaigns record them); the log keeps the summary and says so. A compacted command that is
    replayed is resent to the board, whose agent answers from the run it remembers."""
    if result.WhichOneof("kind") != "profile":
        return json_format.MessageToDict(result)
    slim = agent_pb2.CommandResult()
    slim.CopyFrom(result)
    del slim.profile.power[:]
    del slim.profile.minibatch_times_s[:]
    return {**json_format.MessageToDict(slim), COMPACTED: True, "samples": len(result.profile.power),
            "minibatches": len(result.profile.minibatch_times_s)}


def _raise_failed(result: agent_pb2.CommandResult) -> agent_pb2.CommandResult:
    if not result.ok:
        err: JetfleetError = error_from_code(result.error.code, result.error.message)
        err.field = result.error.field or None
        raise err
    return result


def _stored_result(rec: CommandRecord) -> agent_pb2.CommandResult:
    return _raise_failed(json_format.ParseDict(rec.result, agent_pb2.CommandResult()))
