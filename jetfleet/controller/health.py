"""gRPC health checking (grpc.health.v1.Health) and server reflection on the controller's port, so load
balancers, Kubernetes probes and grpcurl work without jetfleet's .proto files. With mutual TLS they need
a certificate of the lab CA like any client (any role: neither service reveals or changes lab state)."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from jetfleet.shared.proto import agent_pb2, operator_pb2

# The services this controller serves, as clients name them (jetfleet.v1.Operator, jetfleet.v1.AgentLink).
SERVICES = (operator_pb2.DESCRIPTOR.services_by_name["Operator"].full_name,
            agent_pb2.DESCRIPTOR.services_by_name["AgentLink"].full_name)


class HealthAndReflection:
    """Adds both services to a server; NOT_SERVING until ``serving()``, and again from ``stopping()`` on."""

    def __init__(self, server: grpc.aio.Server) -> None:
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        reflection.enable_server_reflection((*SERVICES, health.SERVICE_NAME, reflection.SERVICE_NAME), server)

    async def serving(self) -> None:
        """The controller is ready (its boards loaded, campaigns and jobs resumed): the whole server ("") and
        each jetfleet service answer SERVING."""
        for name in ("", *SERVICES):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)

    async def stopping(self) -> None:
        """The controller is stopping: every service answers NOT_SERVING from now on (load balancers drain it)."""
        await self.health.enter_graceful_shutdown()
