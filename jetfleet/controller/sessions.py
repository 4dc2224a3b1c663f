"""Agent sessions, without gRPC: open from a Hello, handle each message, close. A bad message
gets a Notice naming what was wrong and the session goes on; only a bad Hello ends it."""

from __future__ import annotations

import logging

from jetfleet.controller.admission import HelloAdmission
from jetfleet.controller.commands import CommandRouter
from jetfleet.controller.registry import Registry, Session
from jetfleet.controller.telemetry import TelemetryHub
from jetfleet.shared import defaults
from jetfleet.shared.errors import InvalidArgument, JetfleetError, ResourceExhausted
from jetfleet.shared.grpc_errors import error_pb
from jetfleet.shared.proto import agent_pb2

log = logging.getLogger(__name__)


def peer_host(peer: str) -> str:
    """The host of a gRPC peer string (ipv4:HOST:PORT, ipv6:[HOST]:PORT); '' for any other kind of peer."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rsplit(":", 1)[0]
    if kind == "ipv6":
        return rest.rsplit(":", 1)[0].strip("[]")
    return ""


class AgentSessions:
    """Agent sessions without gRPC: open one from a hello, handle each message, close it."""

    def __init__(self, registry: Registry, telemetry: TelemetryHub, router: CommandRouter) -> None:
        self.registry, self.telemetry, self.router = registry, telemetry, router
        self.admission = HelloAdmission(registry.config.max_hellos_in_flight)
        telemetry.on_refused = self._refused_telemetry   # a deferred batch refused at its flush
        registry.before_offline = telemetry.flush         # a board's batches are kept before it goes offline

    def admit(self) -> None:
        """A session starts: take an admission place for its hello (``admission.py``), or ResourceExhausted saying
        when to dial again (before the hello is looked at). ``admitted`` gives the place back."""
        try:
            self.admission.enter()
        except ResourceExhausted:
            self.registry.metrics.hellos_refused.inc()
            raise

    def admitted(self, welcomed: bool) -> None:
        """The hello of an admitted session is done: welcomed, or the session failed before its welcome."""
        self.admission.leave(welcomed)

    async def open(self, first: agent_pb2.AgentMessage, peer: str = "") -> Session:
        """Open a session from its first message, which must be a hello of this protocol version.

        ``peer`` is gRPC's peer string (ipv4:1.2.3.4:5678, ipv6:[::1]:5678)."""
        if first.WhichOneof("kind") != "hello":
            raise InvalidArgument("the first message of a session must be a hello", field="hello")
        if first.hello.protocol != defaults.PROTOCOL_VERSION:
            raise InvalidArgument(f"protocol {first.hello.protocol} is not supported (this controller speaks "
                                  f"{defaults.PROTOCOL_VERSION})", field="hello.protocol")
        known = self.registry.devices.get(first.hello.board.device_id)
        before = known.session if known is not None else None
        session = await self.registry.attach(first.hello, peer_host(peer))
        if before is not None and before is not session:
            # The board came back before its old stream was seen to break (a restarted agent, a NAT
            # rebinding): what was sent down the old stream will not be answered there. Fail it now, so
            # callers resend it on the new session (by id: an agent still running it joins, not repeats).
            self.router.drop_session(before)
            self.router.fail_pending(session.device_id, before)
        return session

    def welcome(self, session: Session) -> agent_pb2.ControllerMessage:
        """The first message to an agent: its session id and the heartbeat, telemetry and batch settings to use."""
        c = self.registry.config
        return agent_pb2.ControllerMessage(welcome=agent_pb2.Welcome(
            session_id=session.session_id, heartbeat_interval_s=c.heartbeat_interval_s,
            telemetry_interval_s=c.telemetry_interval_s, max_batch_samples=c.max_batch_samples, columns=True,
            folded_heartbeats=True, batches=True))

    async def handle(self, session: Session, msg: agent_pb2.AgentMessage) -> None:
        """Handle one agent message; a bad one gets a Notice naming what was wrong, and the session goes on."""
        if self.handle_now(session, msg):
            return
        self.registry.touch(session)
        results = [msg.result] if msg.WhichOneof("kind") == "result" else msg.results.results
        if not results:
            self._refused(session, "results", InvalidArgument("a result batch with no results", field="results"))
            return
        for result in results:
            try:
                await self.router.on_result(session, result)
            except JetfleetError as e:
                self._refused(session, "result", e)

    def handle_now(self, session: Session, msg: agent_pb2.AgentMessage) -> bool:
        """Handle a message that needs no waiting (every kind but a command's result) without a coroutine per
        message; False, having done nothing, for a result (``handle`` it)."""
        kind = msg.WhichOneof("kind")
        if kind != "telemetry":
            self.telemetry.flush()   # the board's telemetry before anything it sent after it
        if kind == "result" or kind == "results":
            return False
        try:
            if kind == "telemetry":
                if session.closed:   # a late batch of a session already ended: its board is offline, no power
                    return True
                batch = msg.telemetry
                if batch.HasField("heartbeat"):   # folded into the batch by an agent that was told it may
                    hb = batch.heartbeat
                    self.registry.heartbeat(session, hb)
                    self.router.seen_heartbeat(session, hb)
                else:
                    self.registry.touch(session)
                self.telemetry.defer(session.device_id, session.catalog or self.registry.get(session.device_id).catalog,
                                     batch, session)
            elif kind == "heartbeat":
                self.registry.heartbeat(session, msg.heartbeat)
                self.router.seen_heartbeat(session, msg.heartbeat)
            elif kind == "ack":
                self.registry.touch(session)
                self.router.on_ack(session, msg.ack)
            elif kind == "progress":
                self.registry.touch(session)
                self.router.on_progress(session, msg.progress)
            elif kind == "result_part":
                self.registry.touch(session)
                self.router.on_part(session, msg.result_part)
            elif kind == "hello":
                raise InvalidArgument("hello was already received on this session", field="hello")
            else:
                raise InvalidArgument("empty agent message", field="kind")
        except JetfleetError as e:
            self._refused(session, kind or "empty", e)
        return True

    def _refused_telemetry(self, session: object, e: JetfleetError) -> None:
        assert isinstance(session, Session)
        self._refused(session, "telemetry", e)

    def _refused(self, session: Session, kind: str, e: JetfleetError) -> None:
        metrics = self.registry.metrics
        metrics.rejected.labels(kind, e.code).inc()
        log.warning("board %s: refused %s: %s", session.device_id, kind, e.message[:300])
        if not session.notify(agent_pb2.ControllerMessage(notice=agent_pb2.Notice(error=error_pb(e)))):
            metrics.notices_dropped.inc()

    async def close(self, session: Session, reason: str) -> None:
        """Detach a session; if that leaves the board offline, its waiting commands fail now."""
        self.router.drop_session(session)
        self.router.fail_pending(session.device_id, session)  # nothing sent down this stream will be answered
        await self.registry.detach(session, reason)
        live = self.registry.devices.get(session.device_id)
        if live is None or not live.online:
            self.telemetry.end(session.device_id)

    async def reap(self, lag_s: float = 0.0) -> None:
        """Boards whose heartbeats stopped go offline; their waiting commands and telemetry watches end now.

        ``lag_s``: how late the controller's own reaper ran (``Registry.reap``)."""
        for device_id in await self.registry.reap(lag_s):
            self.router.fail_pending(device_id)
            self.telemetry.end(device_id)
