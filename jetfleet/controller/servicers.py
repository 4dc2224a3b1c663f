"""Thin gRPC servicers: unpack, call the plain classes, map errors (jetfleet.shared.grpc_errors)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import grpc

from jetfleet.controller.service import OperatorService
from jetfleet.controller.sessions import AgentSessions
from jetfleet.shared.errors import DeadlineExceeded, JetfleetError, PermissionDenied, ResourceExhausted
from jetfleet.shared.grpc_errors import abort, rpc, rpc_stream
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
    """The agents' gRPC service: one bidirectional session per connected agent."""

    def __init__(self, sessions: AgentSessions, *, tls: bool = False, hello_timeout_s: float = 30.0) -> None:
        self.sessions = sessions
        self.tls = tls
        self.hello_timeout_s = hello_timeout_s

    async def Session(self, request_iterator: AsyncIterator[agent_pb2.AgentMessage],  # noqa: N802
                      context: grpc.aio.ServicerContext) -> AsyncIterator[agent_pb2.ControllerMessage]:
        """Serve an agent: admit its hello (or say when to dial again), check its certificate and hello, read its
        messages, and stream commands down to it."""
        it = request_iterator.__aiter__()
        try:
            self.sessions.admit()
        except ResourceExhausted as e:
            await self._refuse(it, context, e)
            return
        held = True
        try:
            try:
                first = await self._hello(it)
                require(peer_identity_of(context, self.tls), "agent", first.hello.board.device_id)
                session = await self.sessions.open(first, context.peer())
            except StopAsyncIteration:
                return
            except JetfleetError as e:
                await abort(context, e)
                return
            reason = ["stream closed by the agent"]

            async def read() -> None:
                try:
                    handle_now, handle = self.sessions.handle_now, self.sessions.handle
                    async for msg in it:
                        if not handle_now(session, msg):   # a result: may wait for the store
                            await handle(session, msg)
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
                held = False
                self.sessions.admitted(welcomed=True)
                while True:
                    msg = await session.next_message()
                    if msg is None:
                        break
                    yield msg
            finally:
                reader.cancel()
                await self.sessions.close(session, reason[0])
        finally:
            if held:
                self.sessions.admitted(welcomed=False)

    async def _hello(self, it: AsyncIterator[agent_pb2.AgentMessage]) -> agent_pb2.AgentMessage:
        """The session's first message, within the controller's ``hello_timeout_s`` of its start: an admitted session
        that sends nothing would otherwise hold its admission place for as long as its connection lives
        (StopAsyncIteration when the agent closes its side first). After a timeout the stream must not be read again
        (the cancelled read ends gRPC's request iterator): the session is ended at once."""
        wait_s = self.hello_timeout_s
        try:
            return await asyncio.wait_for(it.__anext__(), wait_s)
        except asyncio.TimeoutError:
            raise DeadlineExceeded(f"no hello within {wait_s:g} s of the session's start (the controller's "
                                   "--hello-timeout)", field="hello") from None

    async def _refuse(self, it: AsyncIterator[agent_pb2.AgentMessage], context: grpc.aio.ServicerContext,
                      e: ResourceExhausted) -> None:
        """Turn a session away once its hello has arrived (or the hello timeout passed without one), not before: an
        agent whose write of the hello crosses the refusal is told INTERNAL ("Internal error from Core") by its gRPC
        library, without the status or the wait before dialling again, and backs off as after a failure. The hello
        is not looked at (a few hundred bytes, parsed by gRPC as any message)."""
        try:
            await self._hello(it)
        except (StopAsyncIteration, DeadlineExceeded):
            pass
        except Exception:  # noqa: BLE001 - a first message gRPC cannot parse: it is turned away all the same
            log.debug("a session turned away sent a first message that cannot be read", exc_info=True)
        await abort(context, e)


class OperatorServicer(operator_pb2_grpc.OperatorServicer):
    """The operators' gRPC service: every call checks the caller's role, then runs the operator API."""

    def __init__(self, service: OperatorService, *, tls: bool = False) -> None:
        self.service = service
        self.tls = tls

    def authorize(self, context: grpc.aio.ServicerContext) -> None:
        """Refuse a caller without an operator certificate (under TLS; plaintext callers are not checked)."""
        require(peer_identity_of(context, self.tls), "operator")

    @rpc
    async def ListDevices(self, request: operator_pb2.ListDevicesRequest,  # noqa: N802
                          context: grpc.aio.ServicerContext) -> operator_pb2.ListDevicesResponse:
        """Serve `jetfleet devices ls`: every known board, or those of one model."""
        return self.service.list_devices(request.model)

    @rpc
    async def GetDevice(self, request: operator_pb2.GetDeviceRequest,  # noqa: N802
                        context: grpc.aio.ServicerContext) -> operator_pb2.Device:
        """Serve `jetfleet devices show`: one board in detail, its catalog included."""
        return self.service.get_device(request.device_id)

    @rpc
    async def SetMode(self, request: operator_pb2.SetModeRequest,  # noqa: N802
                      context: grpc.aio.ServicerContext) -> operator_pb2.SetModeResponse:
        """Serve `jetfleet mode set`: set a board's mode and return what it confirmed."""
        return await self.service.set_mode(request)

    @rpc_stream
    async def WatchTelemetry(self, request: operator_pb2.WatchTelemetryRequest,  # noqa: N802
                             context: grpc.aio.ServicerContext) -> AsyncIterator[common_pb2.TelemetrySample]:
        """Serve `jetfleet telemetry watch`: stream a board's samples as they arrive."""
        async for sample in self.service.watch(request.device_id, request.max_samples, request.timeout_s):
            yield sample

    @rpc
    async def ForgetDevice(self, request: operator_pb2.ForgetDeviceRequest,  # noqa: N802
                           context: grpc.aio.ServicerContext) -> operator_pb2.ForgetDeviceResponse:
        """Serve `jetfleet devices forget`: remove an offline board and its history."""
        return await self.service.forget_device(request.device_id)

    @rpc
    async def SetDeviceLabels(self, request: operator_pb2.SetDeviceLabelsRequest,  # noqa: N802
                              context: grpc.aio.ServicerContext) -> operator_pb2.Device:
        """Serve `jetfleet devices label`: add, replace or remove a board's labels."""
        return await self.service.set_labels(request.device_id, dict(request.labels))

    @rpc
    async def SetFleetCap(self, request: operator_pb2.SetFleetCapRequest,  # noqa: N802
                          context: grpc.aio.ServicerContext) -> operator_pb2.FleetPlan:
        """Serve `jetfleet fleet cap set`."""
        return await self.service.set_cap(request.cap_w, request.group)

    @rpc
    async def ClearFleetCap(self, request: operator_pb2.ClearFleetCapRequest,  # noqa: N802
                            context: grpc.aio.ServicerContext) -> operator_pb2.FleetPlan:
        """Serve `jetfleet fleet cap clear`."""
        return await self.service.clear_cap(request.group)

    @rpc
    async def GetFleetPlan(self, request: operator_pb2.GetFleetPlanRequest,  # noqa: N802
                           context: grpc.aio.ServicerContext) -> operator_pb2.FleetPlan:
        """Serve `jetfleet fleet plan` and `fleet cap show`."""
        return await self.service.plan(request.group)

    @rpc
    async def TrainReference(self, request: operator_pb2.TrainReferenceRequest,  # noqa: N802
                             context: grpc.aio.ServicerContext) -> operator_pb2.ModelInfo:
        """Serve `jetfleet model train-reference`: train and store reference time and power models."""
        return await self.service.models.train_reference(request)

    @rpc_stream
    async def TrainReferenceStream(self, request: operator_pb2.TrainReferenceRequest,  # noqa: N802
                                   context: grpc.aio.ServicerContext) -> AsyncIterator[operator_pb2.ModelProgress]:
        """Serve `jetfleet model train-reference`: its epochs as they pass, then the stored model; a cancelled
        call stops the training before anything is stored."""
        async for msg in self.service.models.train_reference_stream(request):
            yield msg

    @rpc_stream
    async def TransferModelStream(self, request: operator_pb2.TransferModelRequest,  # noqa: N802
                                  context: grpc.aio.ServicerContext) -> AsyncIterator[operator_pb2.ModelProgress]:
        """Serve `jetfleet model transfer`: progress of each training pass, then the stored model."""
        async for msg in self.service.models.transfer_stream(request):
            yield msg

    @rpc
    async def TransferModel(self, request: operator_pb2.TransferModelRequest,  # noqa: N802
                            context: grpc.aio.ServicerContext) -> operator_pb2.ModelInfo:
        """Serve `jetfleet model transfer`: transfer a reference to a target's profiled modes."""
        return await self.service.models.transfer(request)

    @rpc
    async def ListModels(self, request: operator_pb2.ListModelsRequest,  # noqa: N802
                         context: grpc.aio.ServicerContext) -> operator_pb2.ListModelsResponse:
        """Serve `jetfleet model ls`: every stored model, in the order they were stored."""
        docs = await asyncio.to_thread(self.service.registry.store.list_docs, "model")
        return operator_pb2.ListModelsResponse(models=[self.service.models.info(d) for d in docs])

    @rpc
    async def GetModel(self, request: operator_pb2.GetModelRequest,  # noqa: N802
                       context: grpc.aio.ServicerContext) -> operator_pb2.ModelInfo:
        """Serve `jetfleet model show`: one stored model's lineage and metrics."""
        return self.service.models.info(await asyncio.to_thread(self.service.models.model_doc, request.model_id))

    @rpc
    async def Predict(self, request: operator_pb2.PredictRequest,  # noqa: N802
                      context: grpc.aio.ServicerContext) -> operator_pb2.PredictResponse:
        """Serve `jetfleet predict` and `jetfleet pareto`: predicted time and power of a grid's modes."""
        return await self.service.models.predict(request)

    @rpc
    async def Optimize(self, request: operator_pb2.OptimizeRequest,  # noqa: N802
                       context: grpc.aio.ServicerContext) -> operator_pb2.OptimizeResponse:
        """Serve `jetfleet optimize`: choose the mode that meets a goal and, if asked, apply and check it."""
        return await self.service.models.optimize(request)

    @rpc
    async def Roofline(self, request: operator_pb2.RooflineRequest,  # noqa: N802
                       context: grpc.aio.ServicerContext) -> operator_pb2.RooflineResponse:
        """Serve `jetfleet roofline`: stored (or freshly measured) rooflines per mode, a workload placed on them."""
        return await self.service.rooflines.roofline(request)

    @rpc
    async def CreateCampaign(self, request: operator_pb2.CreateCampaignRequest,  # noqa: N802
                             context: grpc.aio.ServicerContext) -> operator_pb2.Campaign:
        """Serve `jetfleet profile start`: create a profiling campaign and start it."""
        return await self.service.campaigns.create(request)

    @rpc
    async def ListCampaigns(self, request: operator_pb2.ListCampaignsRequest,  # noqa: N802
                            context: grpc.aio.ServicerContext) -> operator_pb2.ListCampaignsResponse:
        """Serve `jetfleet profile ls`: every campaign with its progress."""
        return self.service.list_campaigns()

    @rpc
    async def GetCampaign(self, request: operator_pb2.GetCampaignRequest,  # noqa: N802
                          context: grpc.aio.ServicerContext) -> operator_pb2.Campaign:
        """Serve `jetfleet profile show`: one campaign's progress, boards, ETA and recent errors."""
        return self.service.get_campaign(request.campaign_id)

    @rpc
    async def ControlCampaign(self, request: operator_pb2.ControlCampaignRequest,  # noqa: N802
                              context: grpc.aio.ServicerContext) -> operator_pb2.Campaign:
        """Serve `jetfleet profile pause`, `resume` and `cancel`: change a campaign's state."""
        return await self.service.campaigns.control(request.campaign_id, request.action)

    @rpc
    async def ExportProfiles(self, request: operator_pb2.ExportProfilesRequest,  # noqa: N802
                             context: grpc.aio.ServicerContext) -> operator_pb2.ExportProfilesResponse:
        """The matching stored profiles as CSV in one message (up to 4 MiB)."""
        return await self.service.export_profiles(request)

    @rpc
    async def ImportProfiles(self, request: operator_pb2.ImportProfilesRequest,  # noqa: N802
                             context: grpc.aio.ServicerContext) -> operator_pb2.ImportProfilesResponse:
        """Store a CSV of profiles of up to 4 MiB, all or nothing."""
        return await self.service.import_profiles(request)

    @rpc
    async def SubmitJob(self, request: operator_pb2.SubmitJobRequest,  # noqa: N802
                        context: grpc.aio.ServicerContext) -> operator_pb2.Job:
        """Serve `jetfleet job submit`: check a training job, store it and start it."""
        return await self.service.jobs.submit(request)

    @rpc
    async def ListJobs(self, request: operator_pb2.ListJobsRequest,  # noqa: N802
                       context: grpc.aio.ServicerContext) -> operator_pb2.ListJobsResponse:
        """Serve `jetfleet job ls`: every job with its state and progress."""
        return self.service.jobs.list()

    @rpc
    async def GetJob(self, request: operator_pb2.GetJobRequest,  # noqa: N802
                     context: grpc.aio.ServicerContext) -> operator_pb2.Job:
        """Serve `jetfleet job show`: one job's progress, mode, steps and summary."""
        return self.service.jobs.get(request.job_id)

    @rpc
    async def CancelJob(self, request: operator_pb2.CancelJobRequest,  # noqa: N802
                        context: grpc.aio.ServicerContext) -> operator_pb2.Job:
        """Serve `jetfleet job cancel`: stop a queued or running job."""
        return await self.service.jobs.cancel(request.job_id)
    @rpc_stream
    async def ExportProfilesStream(self, request: operator_pb2.ExportProfilesRequest,  # noqa: N802
                                   context: grpc.aio.ServicerContext) -> AsyncIterator[operator_pb2.ProfilesChunk]:
        """Serve `jetfleet profiles export`: the matching stored profiles as CSV, in chunks (any size)."""
        async for chunk in self.service.export_stream(request):
            yield chunk

    @rpc
    async def ImportProfilesStream(self, request_iterator: AsyncIterator[operator_pb2.ProfilesChunk],  # noqa: N802
                                   context: grpc.aio.ServicerContext) -> operator_pb2.ImportProfilesResponse:
        """Serve `jetfleet profiles import`: store a CSV of profiles sent in chunks, all or nothing."""
        return await self.service.import_stream(request_iterator)
