"""Thin gRPC servicers: unpack, call the plain classes, map errors (jetfleet.shared.grpc_errors)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import grpc

from jetfleet.controller.service import OperatorService
from jetfleet.controller.sessions import AgentSessions
from jetfleet.shared.errors import JetfleetError, PermissionDenied
from jetfleet.shared.grpc_errors import rpc, rpc_stream, status_of
from jetfleet.shared.proto import agent_pb2, agent_pb2_grpc, common_pb2, operator_pb2, operator_pb2_grpc
from jetfleet.shared.tls import peer_identity, require

log = logging.getLogger(__name__)


def peer_identity_of(context: grpc.aio.ServicerContext, tls: bool) -> tuple[str, str] | None:
    """(common name, role) of the client certificate; None on plaintext."""
    if not tls:
        return None
    pem = (context.auth_context() or {}).get("x509_pem_cert")
    if not pem:
        raise PermissionDenied("no client certificate", field="certificate")
    return peer_identity(next(iter(pem)))


class AgentLinkServicer(agent_pb2_grpc.AgentLinkServicer):
    def __init__(self, sessions: AgentSessions, *, tls: bool = False) -> None:
        self.sessions = sessions
        self.tls = tls

    async def Session(self, request_iterator: AsyncIterator[agent_pb2.AgentMessage],  # noqa: N802
                      context: grpc.aio.ServicerContext) -> AsyncIterator[agent_pb2.ControllerMessage]:
        it = request_iterator.__aiter__()
        try:
            first = await it.__anext__()
            require(peer_identity_of(context, self.tls), "agent", first.hello.board.device_id)
            session = await self.sessions.open(first, context.peer())
        except StopAsyncIteration:
            return
        except JetfleetError as e:
            await context.abort(status_of(e), e.message)
            return
        reason = ["stream closed by the agent"]

        async def read() -> None:
            try:
                async for msg in it:
                    await self.sessions.handle(session, msg)
            except (asyncio.CancelledError, grpc.aio.AioRpcError):
                reason[0] = "stream broken"
            except Exception:
                log.exception("session %s reader failed", session.device_id)
                reason[0] = "internal error"
            finally:
                session.close()

        reader = asyncio.create_task(read())
        try:
            yield self.sessions.welcome(session)
            while True:
                msg = await session.outbox.get()
                if msg is None:
                    break
                yield msg
        finally:
            reader.cancel()
            await self.sessions.close(session, reason[0])


class OperatorServicer(operator_pb2_grpc.OperatorServicer):
    def __init__(self, service: OperatorService, *, tls: bool = False) -> None:
        self.service = service
        self.tls = tls

    def authorize(self, context: grpc.aio.ServicerContext) -> None:
        require(peer_identity_of(context, self.tls), "operator")

    @rpc
    async def ListDevices(self, request: operator_pb2.ListDevicesRequest,  # noqa: N802
                          context: grpc.aio.ServicerContext) -> operator_pb2.ListDevicesResponse:
        return self.service.list_devices(request.model)

    @rpc
    async def GetDevice(self, request: operator_pb2.GetDeviceRequest,  # noqa: N802
                        context: grpc.aio.ServicerContext) -> operator_pb2.Device:
        return self.service.get_device(request.device_id)

    @rpc
    async def SetMode(self, request: operator_pb2.SetModeRequest,  # noqa: N802
                      context: grpc.aio.ServicerContext) -> operator_pb2.SetModeResponse:
        return await self.service.set_mode(request)

    @rpc_stream
    async def WatchTelemetry(self, request: operator_pb2.WatchTelemetryRequest,  # noqa: N802
                             context: grpc.aio.ServicerContext) -> AsyncIterator[common_pb2.TelemetrySample]:
        async for sample in self.service.watch(request.device_id, request.max_samples):
            yield sample

    @rpc
    async def TrainReference(self, request: operator_pb2.TrainReferenceRequest,  # noqa: N802
                             context: grpc.aio.ServicerContext) -> operator_pb2.ModelInfo:
        return await self.service.models.train_reference(request)

    @rpc
    async def TransferModel(self, request: operator_pb2.TransferModelRequest,  # noqa: N802
                            context: grpc.aio.ServicerContext) -> operator_pb2.ModelInfo:
        return await self.service.models.transfer(request)

    @rpc
    async def ListModels(self, request: operator_pb2.ListModelsRequest,  # noqa: N802
                         context: grpc.aio.ServicerContext) -> operator_pb2.ListModelsResponse:
        docs = await asyncio.to_thread(self.service.fleet.store.list_docs, "model")
        return operator_pb2.ListModelsResponse(models=[self.service.models.info(d) for d in docs])

    @rpc
    async def GetModel(self, request: operator_pb2.GetModelRequest,  # noqa: N802
                       context: grpc.aio.ServicerContext) -> operator_pb2.ModelInfo:
        return self.service.models.info(await asyncio.to_thread(self.service.models.model_doc, request.model_id))

    @rpc
    async def Predict(self, request: operator_pb2.PredictRequest,  # noqa: N802
                      context: grpc.aio.ServicerContext) -> operator_pb2.PredictResponse:
        return await self.service.models.predict(request)

    @rpc
    async def Optimize(self, request: operator_pb2.OptimizeRequest,  # noqa: N802
                       context: grpc.aio.ServicerContext) -> operator_pb2.OptimizeResponse:
        return await self.service.models.optimize(request)

    @rpc
    async def CreateCampaign(self, request: operator_pb2.CreateCampaignRequest,  # noqa: N802
                             context: grpc.aio.ServicerContext) -> operator_pb2.Campaign:
        return await self.service.campaigns.create(request)

    @rpc
    async def ListCampaigns(self, request: operator_pb2.ListCampaignsRequest,  # noqa: N802
                            context: grpc.aio.ServicerContext) -> operator_pb2.ListCampaignsResponse:
        return self.service.list_campaigns()

    @rpc
    async def GetCampaign(self, request: operator_pb2.GetCampaignRequest,  # noqa: N802
                          context: grpc.aio.ServicerContext) -> operator_pb2.Campaign:
        return self.service.get_campaign(request.campaign_id)

    @rpc
    async def ControlCampaign(self, request: operator_pb2.ControlCampaignRequest,  # noqa: N802
                              context: grpc.aio.ServicerContext) -> operator_pb2.Campaign:
        return await self.service.campaigns.control(request.campaign_id, request.action)

    @rpc
    async def ExportProfiles(self, request: operator_pb2.ExportProfilesRequest,  # noqa: N802
                             context: grpc.aio.ServicerContext) -> operator_pb2.ExportProfilesResponse:
        return await self.service.export_profiles(request)

    @rpc
    async def ImportProfiles(self, request: operator_pb2.ImportProfilesRequest,  # noqa: N802
                             context: grpc.aio.ServicerContext) -> operator_pb2.ImportProfilesResponse:
        return await self.service.import_profiles(request)
