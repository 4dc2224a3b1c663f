"""The agent's link to the controller: dial out, say hello, stream telemetry and heartbeats, run
commands; keep a bounded buffer while disconnected and reconnect with jittered backoff."""

from __future__ import annotations

import asyncio
import logging
import random
from collections import deque
from collections.abc import AsyncIterator, Callable

import grpc

from jetfleet.agent.config import AgentConfig
from jetfleet.agent.device.base import Device, TelemetrySample
from jetfleet.agent.executor import CommandExecutor
from jetfleet.agent.metrics import AgentMetrics
from jetfleet.agent.workloads.registry import WORKLOADS
from jetfleet.shared.backoff import backoff_delay_s
from jetfleet.shared.convert import catalog_to_pb, mode_to_pb, sample_to_pb
from jetfleet.shared.errors import InvalidArgument, JetfleetError
from jetfleet.shared.grpc_errors import error_pb
from jetfleet.shared.netutil import channel_credentials, is_loopback
from jetfleet.shared.proto import agent_pb2, agent_pb2_grpc, common_pb2

log = logging.getLogger(__name__)
PROTOCOL = 1
_EOF = grpc.aio.EOF  # type: ignore[attr-defined]  # exported at run time, missing from the stubs


class AgentLink:
    def __init__(self, device: Device, config: AgentConfig, *, rng: random.Random | None = None,
                 on_sample: Callable[[TelemetrySample], None] | None = None, metrics: AgentMetrics | None = None,
                 metrics_port: int = 0) -> None:
        self.device = device
        self.config = config
        self.info = device.describe()
        self.device_id = config.device_id or f"{self.info.model}-{self.info.serial}"
        self.metrics = metrics
        self.metrics_port = metrics_port
        self.executor = CommandExecutor(device, remembered=config.remembered_results, metrics=metrics)
        self.buffer: deque[TelemetrySample] = deque(maxlen=config.max_buffer_samples)
        self.dropped = 0
        self.rng = rng or random.Random()
        self.on_sample = on_sample
        self.connected = asyncio.Event()
        self.sessions = 0            # sessions that got a welcome (for tests and logs)
        self.notices: list[common_pb2.Error] = []
        self._batch_s = config.batch_interval_s
        self._heartbeat_s = config.heartbeat_interval_s
        self._max_batch = 2000
        self._creds = channel_credentials(config.tls_ca, config.tls_cert, config.tls_key)
        host = config.controller.rpartition(":")[0].strip("[]")
        if self._creds is None and not is_loopback(host):
            if not config.insecure:
                raise InvalidArgument(f"plaintext to controller {config.controller} refused: give --tls-ca, --tls-cert "
                                      "and --tls-key (see `jetfleet certs`), or --insecure on a trusted network",
                                      field="controller")
            log.warning("PLAINTEXT link to %s (--insecure)", config.controller)
        # The twin answers in microseconds; a real board reads sysfs, which may block.
        self._blocking = not getattr(device, "cheap_io", False)

    # --- device calls ---------------------------------------------------------------------------
    async def _call(self, fn: Callable[[], object]) -> object:
        return await asyncio.to_thread(fn) if self._blocking else fn()

    async def _sample_loop(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        next_t = loop.time()
        while not stop.is_set():
            try:
                s = await self._call(self.device.sample)
                assert isinstance(s, TelemetrySample)
                if len(self.buffer) == self.buffer.maxlen:
                    self.dropped += 1
                self.buffer.append(s)
                if self.on_sample:
                    self.on_sample(s)
                if self.metrics:
                    self.metrics.observe(s)
            except JetfleetError as e:
                log.warning("telemetry sample failed: %s", e.message)
            next_t += self.config.sample_interval_s
            await asyncio.sleep(max(0.0, next_t - loop.time()))

    # --- the session ------------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Until ``stop`` is set: connect, serve the session, back off, reconnect."""
        sampler = asyncio.create_task(self._sample_loop(stop))
        attempt = 0
        try:
            while not stop.is_set():
                welcomed_before = self.sessions
                try:
                    await self._session(stop)
                except grpc.aio.AioRpcError as e:
                    refused = e.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
                                               grpc.StatusCode.DEADLINE_EXCEEDED)
                    (log.warning if refused else log.info)("%s: controller %s: %s %s", self.device_id,
                                                           self.config.controller, e.code().name, e.details())
                    if refused:  # the controller refused this agent (bad hello, id taken): keep it visible
                        self.notices.append(common_pb2.Error(code=e.code().name, message=e.details() or ""))
                finally:
                    self.connected.clear()
                if stop.is_set():
                    break
                attempt = 0 if self.sessions > welcomed_before else attempt + 1
                delay = backoff_delay_s(attempt, base_s=self.config.backoff_base_s, max_s=self.config.backoff_max_s,
                                        rng=self.rng)
                try:
                    await asyncio.wait_for(stop.wait(), delay)
                except TimeoutError:
                    pass
        finally:
            sampler.cancel()

    async def _hello(self) -> agent_pb2.AgentMessage:
        mode = await self._call(self.device.read_mode)
        board = common_pb2.BoardInfo(device_id=self.device_id, model=self.info.model, serial=self.info.serial,
                                     software=dict(self.info.software), catalog=catalog_to_pb(self.info.catalog),
                                     emulated=self.info.emulated, workloads=sorted(WORKLOADS))
        return agent_pb2.AgentMessage(hello=agent_pb2.Hello(board=board, current_mode=mode_to_pb(mode),  # type: ignore[arg-type]
                                                            agent_version=self.info.software.get("jetfleet", ""),
                                                            protocol=PROTOCOL, metrics_port=self.metrics_port))

    async def _session(self, stop: asyncio.Event) -> None:
        outq: asyncio.Queue[agent_pb2.AgentMessage | None] = asyncio.Queue()
        outq.put_nowait(await self._hello())

        async def outgoing() -> AsyncIterator[agent_pb2.AgentMessage]:
            while True:
                msg = await outq.get()
                if msg is None:
                    return
                yield msg

        opts = [("grpc.keepalive_time_ms", 20_000), ("grpc.max_receive_message_length", 4 * 1024 * 1024)]
        creds = self._creds
        channel = (grpc.aio.secure_channel(self.config.controller, creds, options=opts) if creds is not None
                   else grpc.aio.insecure_channel(self.config.controller, options=opts))
        async with channel:
            call = agent_pb2_grpc.AgentLinkStub(channel).Session(outgoing())
            tasks: list[asyncio.Task[None]] = []
            try:
                first = await call.read()
                if first is _EOF or first.WhichOneof("kind") != "welcome":
                    return
                w = first.welcome
                self._batch_s = w.telemetry_interval_s or self._batch_s
                self._heartbeat_s = w.heartbeat_interval_s or self._heartbeat_s
                self._max_batch = w.max_batch_samples or self._max_batch
                self.sessions += 1
                self.connected.set()
                log.info("%s: connected to %s (session %s)", self.device_id, self.config.controller, w.session_id)
                tasks = [asyncio.create_task(self._send_loop(outq)), asyncio.create_task(self._heartbeat_loop(outq)),
                         asyncio.create_task(self._stop_watch(stop, call, outq))]
                while True:
                    try:
                        msg = await call.read()
                    except asyncio.CancelledError:
                        if stop.is_set():  # our own cancel after a graceful close timed out
                            return
                        raise
                    if msg is _EOF:
                        return
                    kind = msg.WhichOneof("kind")
                    if kind == "command":
                        tasks.append(asyncio.create_task(self._command(msg.command, outq)))
                    elif kind == "notice":
                        log.warning("%s: controller refused a message: %s", self.device_id, msg.notice.error.message)
                        self.notices.append(msg.notice.error)
            finally:
                for t in tasks:
                    t.cancel()
                outq.put_nowait(None)

    async def _stop_watch(self, stop: asyncio.Event, call: grpc.aio.StreamStreamCall,
                          outq: asyncio.Queue[agent_pb2.AgentMessage | None]) -> None:
        """On stop, half-close so the controller ends the session cleanly; cancel if it does not."""
        await stop.wait()
        outq.put_nowait(None)
        await asyncio.sleep(2.0)
        call.cancel()

    async def _send_loop(self, outq: asyncio.Queue[agent_pb2.AgentMessage | None]) -> None:
        while True:
            await asyncio.sleep(self._batch_s)
            n = min(len(self.buffer), self._max_batch)
            if n == 0 and not self.dropped:
                continue
            samples = [sample_to_pb(self.buffer.popleft()) for _ in range(n)]
            outq.put_nowait(agent_pb2.AgentMessage(telemetry=agent_pb2.TelemetryBatch(samples=samples,
                                                                                      dropped=self.dropped)))
            self.dropped = 0

    async def _heartbeat_loop(self, outq: asyncio.Queue[agent_pb2.AgentMessage | None]) -> None:
        while True:
            mode = await self._call(self.device.read_mode)
            if self.metrics:
                self.metrics.set_mode(mode)  # type: ignore[arg-type]
            outq.put_nowait(agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat(
                t_s=self.device.now_s(), current_mode=mode_to_pb(mode),  # type: ignore[arg-type]
                busy_command_id=self.executor.busy)))
            await asyncio.sleep(self._heartbeat_s)

    async def _command(self, cmd: agent_pb2.Command, outq: asyncio.Queue[agent_pb2.AgentMessage | None]) -> None:
        try:
            self.executor.check(cmd)
            outq.put_nowait(agent_pb2.AgentMessage(ack=agent_pb2.CommandAck(command_id=cmd.command_id,
                                                                             accepted=True)))
        except JetfleetError as e:
            outq.put_nowait(agent_pb2.AgentMessage(ack=agent_pb2.CommandAck(command_id=cmd.command_id,
                                                                             accepted=False, error=error_pb(e))))
        result = await self.executor.execute(cmd)
        outq.put_nowait(agent_pb2.AgentMessage(result=result))
