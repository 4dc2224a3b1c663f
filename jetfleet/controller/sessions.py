"""Agent sessions, without gRPC: open from a Hello, handle each message, close. A bad message
gets a Notice naming what was wrong and the session goes on; only a bad Hello ends it."""

from __future__ import annotations

import logging

from jetfleet.controller.commands import CommandRouter
from jetfleet.controller.registry import Fleet, Session
from jetfleet.shared.errors import InvalidArgument, JetfleetError
from jetfleet.shared.grpc_errors import error_pb
from jetfleet.shared.proto import agent_pb2

log = logging.getLogger(__name__)
PROTOCOL = 1


def peer_host(peer: str) -> str:
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rsplit(":", 1)[0]
    if kind == "ipv6":
        return rest.rsplit(":", 1)[0].strip("[]")
    return ""


class AgentSessions:
    def __init__(self, fleet: Fleet, router: CommandRouter) -> None:
        self.fleet, self.router = fleet, router

    async def open(self, first: agent_pb2.AgentMessage, peer: str = "") -> Session:
        """``peer`` is gRPC's peer string (ipv4:1.2.3.4:5678, ipv6:[::1]:5678)."""
        if first.WhichOneof("kind") != "hello":
            raise InvalidArgument("the first message of a session must be a hello", field="hello")
        if first.hello.protocol != PROTOCOL:
            raise InvalidArgument(f"protocol {first.hello.protocol} is not supported (this controller speaks "
                                  f"{PROTOCOL})", field="hello.protocol")
        return await self.fleet.attach(first.hello, peer_host(peer))

    def welcome(self, session: Session) -> agent_pb2.ControllerMessage:
        c = self.fleet.config
        return agent_pb2.ControllerMessage(welcome=agent_pb2.Welcome(
            session_id=session.session_id, heartbeat_interval_s=c.heartbeat_interval_s,
            telemetry_interval_s=c.telemetry_interval_s, max_batch_samples=c.max_batch_samples))

    async def handle(self, session: Session, msg: agent_pb2.AgentMessage) -> None:
        kind = msg.WhichOneof("kind")
        try:
            if kind == "heartbeat":
                self.fleet.heartbeat(session, msg.heartbeat)
            elif kind == "telemetry":
                self.fleet.telemetry(session, msg.telemetry)
            elif kind == "ack":
                self.fleet.touch(session)
                self.router.on_ack(session, msg.ack)
            elif kind == "result":
                self.fleet.touch(session)
                await self.router.on_result(session, msg.result)
            elif kind == "hello":
                raise InvalidArgument("hello was already received on this session", field="hello")
            else:
                raise InvalidArgument("empty agent message", field="kind")
        except JetfleetError as e:
            self.fleet.metrics.rejected.labels(kind or "empty").inc()
            log.warning("board %s: refused %s: %s", session.device_id, kind, e.message)
            session.send(agent_pb2.ControllerMessage(notice=agent_pb2.Notice(error=error_pb(e))))

    async def close(self, session: Session, reason: str) -> None:
        await self.fleet.detach(session, reason)
        if not self.fleet.get(session.device_id).online:
            self.router.fail_pending(session.device_id)

    async def reap(self) -> None:
        """Boards whose heartbeats stopped go offline; their waiting commands fail now."""
        for device_id in await self.fleet.reap():
            self.router.fail_pending(device_id)
