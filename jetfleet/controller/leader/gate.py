"""A standby acts on nothing: a gRPC interceptor in front of every service.

Refused with UNAVAILABLE naming the leader (its address also in trailing metadata, so agents and clients go there):
operator calls that change state (or may: predictions train and cache models), agents' sessions, and, while a
leader is known, reads too (a standby's view of the boards is the store's, not the live one: the leader's answer
is the true one). While no leader is known (a takeover under way, or a lab whose controllers all stand by) a standby
answers reads from what it last loaded, so operators can still look."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from jetfleet.controller.leader.role import Role
from jetfleet.shared.errors import NotLeader
from jetfleet.shared.grpc_errors import abort

OPERATOR = "/jetfleet.v1.Operator/"
# operator calls a standby answers while no leader is known, from what it has loaded
READS = frozenset(OPERATOR + m for m in (
    "ListDevices", "GetDevice", "WatchTelemetry", "ListCampaigns", "GetCampaign", "ExportProfiles",
    "ExportProfilesStream", "ListModels", "GetModel", "ListJobs", "GetJob", "GetFleetPlan"))


class StandbyGate(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Pass every call while this controller leads; on a standby pass health and reflection, and reads while no
    leader is known."""

    def __init__(self, role: Role) -> None:
        self.role = role

    async def intercept_service(self, continuation: Callable[[Any], Awaitable[Any]],
                                details: grpc.HandlerCallDetails) -> Any:
        """The call's handler, or one that refuses it (a standby, a call that is not a read)."""
        method = details.method
        if self.role.leading or method.startswith("/grpc.") or (method in READS and not self.role.leader_address()):
            return await continuation(details)
        handler = await continuation(details)
        if handler is None:
            return None
        return _refusing(handler, self.role, method)


def _refusal(role: Role, method: str) -> NotLeader:
    name = method.rsplit("/", 1)[-1]
    what = "an agent's session" if name == "Session" else f"{name}"
    return NotLeader(f"this controller is a standby and does not serve {what}: {role.describe_leader()}",
                     field="controller", leader=role.leader_address())


def _refusing(handler: Any, role: Role, method: str) -> Any:
    """A handler of the same shape that ends the call with the refusal."""
    kw = {"request_deserializer": handler.request_deserializer, "response_serializer": handler.response_serializer}

    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await abort(context, _refusal(role, method))

    async def streaming(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        await abort(context, _refusal(role, method))
        yield None   # unreachable: abort raises; makes this an async generator

    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(unary, **kw)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(streaming, **kw)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(unary, **kw)
    return grpc.stream_stream_rpc_method_handler(streaming, **kw)
