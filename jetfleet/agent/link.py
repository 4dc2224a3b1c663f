"""The agent's link to the controller: dial out, say hello, stream telemetry and heartbeats, run
commands; keep a bounded buffer while disconnected and reconnect with jittered backoff."""

from __future__ import annotations

import asyncio
import functools
import logging
import random
import re
from collections import deque
from collections.abc import AsyncIterator, Callable

import grpc

from jetfleet.agent.config import AgentConfig
from jetfleet.agent.device.base import Device, TelemetrySample
from jetfleet.agent.executor import Checked, CommandExecutor
from jetfleet.agent.launcher import Launcher
from jetfleet.agent.metrics import AgentMetrics
from jetfleet.agent.sessions import SessionConfig, SessionServer
from jetfleet.shared import defaults
from jetfleet.shared.address import controller_list
from jetfleet.shared.backoff import admission_delay_s, backoff_delay_s
from jetfleet.shared.bounds import check_id
from jetfleet.shared.columns import columns_from_samples, samples_from_columns
from jetfleet.shared.compat import to_thread
from jetfleet.shared.convert import catalog_to_pb, mode_to_pb, sample_to_pb
from jetfleet.shared.errors import InvalidArgument, JetfleetError, ResourceExhausted
from jetfleet.shared.grpc_errors import error_pb, from_controller, leader_of, retry_after_s
from jetfleet.shared.netutil import channel_credentials, is_loopback
from jetfleet.shared.proto import agent_pb2, agent_pb2_grpc, common_pb2
from jetfleet.shared.queued import NOTHING, take_queued
from jetfleet.shared.workloads import WorkloadRegistry

log = logging.getLogger(__name__)
_EOF = grpc.aio.EOF  # type: ignore[attr-defined]  # exported at run time, missing from the stubs
# What the agent accepts from a controller's welcome; anything else is ignored (its own settings stay).
WELCOME_BOUNDS = {"heartbeat_interval_s": (0.05, 60.0), "telemetry_interval_s": (0.05, 60.0),
                  "max_batch_samples": (1, 10_000)}
MAX_COMMANDS_IN_FLIGHT = 64   # commands running or waiting for the board; more are refused
PART_BYTES = 1024 * 1024   # a result larger than this goes as ResultParts of about this size (the limit is 4 MiB)
MAX_KEPT_WAITS = 100       # the last admission waits kept (told, taken) for tests and logs
# A command still running this long after it arrived is acknowledged; one answered sooner goes without an ack (its
# result says it was accepted): a campaign's mode on a fast board is one message back, not two.
ACK_AFTER_S = 0.05
# Results ready together go in one ResultBatch (to a controller that reads them) of at most this many and bytes.
MAX_BATCH_RESULTS = 64
MAX_BATCH_BYTES = 2 * PART_BYTES


def default_device_id(model: str, serial: str) -> str:
    """MODEL-SERIAL in the identifier character set (lower case, other characters as '-', at most 64)."""
    text = re.sub(r"[^a-z0-9._-]", "-", f"{model}-{serial}".lower()).lstrip("._-")
    return text[:64] or "board"


def registered_id(configured: str, model: str, serial: str) -> str:
    """The device id an agent registers with: the configured one, or MODEL-SERIAL; InvalidArgument if it is no id."""
    return check_id(configured or default_device_id(model, serial), "device_id")


def result_messages(result: agent_pb2.CommandResult, part_bytes: int = PART_BYTES) -> list[agent_pb2.AgentMessage]:
    """A command result as the messages that carry it: itself if it is small, else ResultParts of at most
    about ``part_bytes`` each followed by the CommandResult with the rest and the number of parts."""
    if result.ByteSize() <= part_bytes or result.WhichOneof("kind") != "profile":
        return [agent_pb2.AgentMessage(result=result)]
    # Parts carry samples one message each (every controller reads those); columns are for whole results.
    times = list(result.profile.minibatch_times_s)
    power = list(result.profile.power) + samples_from_columns(result.profile.power_columns)
    per_sample = max(1, max((s.ByteSize() for s in power[:64]), default=1) + 4)
    n_power, n_times = max(1, part_bytes // per_sample), max(1, part_bytes // 10)
    out: list[agent_pb2.AgentMessage] = []
    while len(power) > n_power or len(times) > n_times:
        part = agent_pb2.ResultPart(command_id=result.command_id, index=len(out),
                                    minibatch_times_s=times[:n_times], power=power[:n_power])
        times, power = times[n_times:], power[n_power:]
        out.append(agent_pb2.AgentMessage(result_part=part))
    tail = agent_pb2.CommandResult()
    tail.CopyFrom(result)
    del tail.profile.minibatch_times_s[:]
    tail.profile.minibatch_times_s.extend(times)
    del tail.profile.power[:]
    tail.profile.power.extend(power)
    tail.profile.ClearField("power_columns")
    tail.parts = len(out)
    out.append(agent_pb2.AgentMessage(result=tail))
    return out


class _Acks:
    """The accepted commands of one session not answered yet, acknowledged once they have run ACK_AFTER_S: one timer
    for all of them (a campaign keeps dozens of quick modes in hand; a timer each cost the agent's event loop more
    than the rest of a mode's command path)."""

    def __init__(self, send: Callable[[str], None]) -> None:
        self._send = send
        self._since: dict[str, float] = {}   # command id -> when it was accepted, oldest first
        self._timer: asyncio.TimerHandle | None = None

    def accepted(self, command_id: str) -> None:
        loop = asyncio.get_running_loop()
        self._since.pop(command_id, None)   # the same id again: in order of the latest
        self._since[command_id] = loop.time()
        if self._timer is None:
            self._timer = loop.call_later(ACK_AFTER_S, self._sweep)

    def answered(self, command_id: str) -> None:
        self._since.pop(command_id, None)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._since.clear()

    def _sweep(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        for cid, since in list(self._since.items()):
            if now - since < ACK_AFTER_S:   # this one and those after it: not yet
                self._timer = loop.call_later(since + ACK_AFTER_S - now, self._sweep)
                return
            del self._since[cid]
            self._send(cid)


class _InHand:
    """One session's commands handed to the executor (``AgentLink._start``): how many wait for their result, and
    whether the session is over (a result that comes after it is not sent: the board remembers it by id, for the
    command sent again)."""

    __slots__ = ("closed", "count")

    def __init__(self) -> None:
        self.count = 0
        self.closed = False


class AgentLink:
    """Dials the controller, keeps one session at a time, streams telemetry and heartbeats, and runs commands."""

    def __init__(self, device: Device, config: AgentConfig, *, rng: random.Random | None = None,
                 on_sample: Callable[[TelemetrySample], None] | None = None, metrics: AgentMetrics | None = None,
                 metrics_port: int = 0, workloads: WorkloadRegistry | None = None) -> None:
        self.device = device
        self.config = config
        self.info = device.describe()
        self.device_id = registered_id(config.device_id, self.info.model, self.info.serial)
        self.metrics = metrics
        self.metrics_port = metrics_port
        self.workloads = workloads or WorkloadRegistry.builtin()
        # The operator's own training processes join through this socket (``sessions.py``); while one holds the
        # board the executor refuses other work, and a session is refused while a command runs.
        self.training_sessions: SessionServer | None = None
        if config.session_socket:
            self.training_sessions = SessionServer(
                device, SessionConfig(path=config.session_socket, mode=config.session_socket_mode), busy=self._busy)
        launcher = None
        if config.templates is not None:   # what it launches joins as a training session: the socket is needed
            if not config.session_socket:
                raise InvalidArgument("job templates need training sessions: give --session-socket too",
                                      field="templates")
            launcher = Launcher(config.templates, config.session_socket)
        self.executor = CommandExecutor(device, remembered=config.remembered_results, metrics=metrics,
                                        workloads=self.workloads, sessions=self.training_sessions, launcher=launcher)
        self._outq: asyncio.Queue[agent_pb2.AgentMessage | None] | None = None   # the current session's
        self._loop: asyncio.AbstractEventLoop | None = None
        self.buffer: deque[TelemetrySample] = deque(maxlen=config.max_buffer_samples)
        self.dropped = 0
        self.rng = rng or random.Random()
        self.on_sample = on_sample
        self.connected = asyncio.Event()
        self.sessions = 0            # sessions that got a welcome (for tests and logs)
        self.acks_sent = 0           # accepted commands acknowledged before their result (for tests and logs)
        self.command_batches = 0     # CommandBatch messages received (for tests and logs)
        self.result_batches = 0      # ResultBatch messages sent (for tests and logs)
        self._parting: set[asyncio.Task[None]] = set()   # long results being cut into parts (``_send_result``)
        self.attempts = 0            # times it dialled the controller
        self.admission_waits: list[tuple[float, float]] = []   # (wait the controller told, wait taken), newest last
        self.notices: list[common_pb2.Error] = []
        self._batch_s = config.batch_interval_s
        self._heartbeat_s = config.heartbeat_interval_s
        self._max_batch = 2000
        # What the controller's welcome says it reads: samples as columns, heartbeats folded into batches.
        self._columns = False
        self._fold = False
        self._batches = False    # and several results in one message
        self._last_beat = -1e9   # event-loop time the last heartbeat (alone or in a batch) was queued
        self._creds = channel_credentials(config.tls_ca, config.tls_cert, config.tls_key)
        # a lab's controllers (its leader and standbys): dialled in turn, and the one that leads is kept
        self.addresses = controller_list(config.controller)
        self._at = 0
        remote = [a for a in self.addresses if not is_loopback(a.rpartition(":")[0].strip("[]"))]
        if self._creds is None and remote:
            if not config.insecure:
                raise InvalidArgument(f"plaintext to controller {remote[0]} refused: give --tls-ca, --tls-cert "
                                      "and --tls-key (see `jetfleet certs`), or --insecure on a trusted network",
                                      field="controller")
            log.warning("PLAINTEXT link to %s (--insecure)", ", ".join(remote))
        # The twin answers in microseconds; a real board reads sysfs, which may block.
        self._blocking = not device.capabilities.cheap_io

    def _busy(self) -> str:
        """What keeps a new training session off the board: a command running for the controller."""
        busy = self.executor.busy_with_own_work
        return f"running command {busy} for the controller" if busy else ""

    # --- device calls ---------------------------------------------------------------------------
    async def _call(self, fn: Callable[[], object]) -> object:
        return await to_thread(fn) if self._blocking else fn()

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
        """Until ``stop`` is set: connect, serve the session, back off, reconnect. When it ends, runs in flight stop."""
        self._loop = asyncio.get_running_loop()
        self.executor.on_progress = self._progress_from_thread
        if self.training_sessions is not None:
            await self.training_sessions.start()
        sampler = asyncio.create_task(self._sample_loop(stop))
        attempt = 0
        try:
            while not stop.is_set():
                welcomed_before = self.sessions
                self.attempts += 1
                told: float | None = None
                quick = False
                try:
                    await self._session(stop)
                except grpc.aio.AioRpcError as e:
                    if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                        told = retry_after_s(e)
                    if told is not None:
                        # The controller is admitting other agents and said when to come back: not this agent's
                        # fault, nothing to keep as a notice.
                        log.info("%s: controller %s is busy admitting agents: dialling again in %.1f s or a little "
                                 "more", self.device_id, self.controller, told)
                    else:
                        refused = e.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
                                                   grpc.StatusCode.DEADLINE_EXCEEDED)
                        # An unreachable controller is worth a warning at the first failure and every 20th after it
                        # (a TLS handshake the controller refuses looks the same from here); the rest is info.
                        loud = refused or attempt % 20 == 0
                        (log.warning if loud else log.info)("%s: controller %s: %s %s", self.device_id,
                                                            self.controller, e.code().name, e.details())
                        if refused:  # the controller refused this agent (bad hello, id taken): keep it visible
                            self.notices.append(common_pb2.Error(code=e.code().name, message=e.details() or ""))
                        quick = self._follow(e)
                finally:
                    self.connected.clear()
                if stop.is_set():
                    break
                if told is not None:   # honoured, with jitter on top: those told alike come back spread out
                    delay = admission_delay_s(told, self.rng)
                    self.admission_waits.append((told, delay))
                    del self.admission_waits[:-MAX_KEPT_WAITS]
                elif quick:   # off to the leader, or to the next address of the list: no backoff growth
                    delay = self.rng.uniform(0.5, 1.0) * self.config.backoff_base_s
                else:
                    attempt = 0 if self.sessions > welcomed_before else attempt + 1
                    delay = backoff_delay_s(attempt, base_s=self.config.backoff_base_s,
                                            max_s=self.config.backoff_max_s, rng=self.rng)
                try:
                    await asyncio.wait_for(stop.wait(), delay)
                except asyncio.TimeoutError:
                    pass
        finally:
            sampler.cancel()
            self.executor.close()
            if self.executor.launcher is not None:   # what it launched dies with it
                await self.executor.launcher.stop_all("the agent stopped")
            if self.training_sessions is not None:
                await self.training_sessions.stop()

    @property
    def controller(self) -> str:
        """The controller address this agent dials now (of ``addresses``)."""
        return self.addresses[self._at]

    def _follow(self, e: grpc.aio.AioRpcError) -> bool:
        """After a failed dial: go to the leader a standby named, or to the next address of the list. True when
        the next dial should come soon: a standby answered (the lab is alive, a takeover is under way or the
        leader is elsewhere), or an address of the list is still untried in this round."""
        if e.code() != grpc.StatusCode.UNAVAILABLE or len(self.addresses) < 2:
            return False
        standby = from_controller(e)
        leader = leader_of(e) if standby else ""
        if leader in self.addresses and leader != self.controller:
            self._at = self.addresses.index(leader)
            log.info("%s: a standby named the leader %s: dialling it", self.device_id, leader)
            return True
        self._at = (self._at + 1) % len(self.addresses)
        return standby or self._at != 0

    def _progress_from_thread(self, msg: agent_pb2.TrainingProgress) -> None:
        """A training's progress report, from its worker thread: onto the current session, if there is one."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._send_progress, msg)

    def _send_progress(self, msg: agent_pb2.TrainingProgress) -> None:
        q = self._outq   # while disconnected a report is dropped: the next one is cumulative
        if q is not None and self.connected.is_set():
            q.put_nowait(agent_pb2.AgentMessage(progress=msg))

    async def _hello(self) -> agent_pb2.AgentMessage:
        mode = await self._call(self.device.read_mode)
        board = common_pb2.BoardInfo(device_id=self.device_id, model=self.info.model, serial=self.info.serial,
                                     software=dict(self.info.software), catalog=catalog_to_pb(self.info.catalog),
                                     emulated=self.info.emulated, workloads=self.workloads.names(),
                                     broken_workloads=self.workloads.broken, speed=self.info.speed,
                                     templates=self.executor.launcher.templates() if self.executor.launcher else [])
        return agent_pb2.AgentMessage(hello=agent_pb2.Hello(board=board, current_mode=mode_to_pb(mode),  # type: ignore[arg-type]
                                                            agent_version=self.info.software.get("jetfleet", ""),
                                                            protocol=defaults.PROTOCOL_VERSION, metrics_port=self.metrics_port,
                                                            instance_id=self.executor.instance_id, batches=True))

    async def _session(self, stop: asyncio.Event) -> None:
        outq: asyncio.Queue[agent_pb2.AgentMessage | None] = asyncio.Queue()
        outq.put_nowait(await self._hello())

        async def outgoing() -> AsyncIterator[agent_pb2.AgentMessage]:
            carry: object = NOTHING
            while True:
                msg = await outq.get() if carry is NOTHING else carry
                carry = NOTHING
                if msg is None:
                    return
                assert isinstance(msg, agent_pb2.AgentMessage)
                if self._batches and not outq.empty() and msg.WhichOneof("kind") == "result" and not msg.result.parts:
                    msg, carry = self._result_batch(msg, outq)
                yield msg

        opts = [("grpc.keepalive_time_ms", 20_000), ("grpc.max_receive_message_length", 4 * 1024 * 1024)]
        creds = self._creds
        target = self.controller
        channel = (grpc.aio.secure_channel(target, creds, options=opts) if creds is not None
                   else grpc.aio.insecure_channel(target, options=opts))
        async with channel:
            call = agent_pb2_grpc.AgentLinkStub(channel).Session(outgoing())
            tasks: list[asyncio.Task[None]] = []
            acks: _Acks | None = None
            in_hand = _InHand()
            try:
                first = await call.read()
                if first is _EOF or first.WhichOneof("kind") != "welcome":
                    return
                self._welcome(first.welcome)
                w = first.welcome
                self.sessions += 1
                self._outq = outq
                self.connected.set()
                log.info("%s: connected to %s (session %s)", self.device_id, target, w.session_id)
                acks = _Acks(functools.partial(self._ack, outq=outq))
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
                    if kind == "command" or kind == "commands":
                        if kind == "commands":
                            self.command_batches += 1
                        for cmd in ([msg.command] if kind == "command" else msg.commands.commands):
                            if in_hand.count + len(self._parting) >= MAX_COMMANDS_IN_FLIGHT:
                                outq.put_nowait(agent_pb2.AgentMessage(result=agent_pb2.CommandResult(
                                    command_id=cmd.command_id[:160], ok=False, error=error_pb(ResourceExhausted(
                                        f"{MAX_COMMANDS_IN_FLIGHT} commands are waiting already", field="command")))))
                                continue
                            self._start(cmd, outq, acks, in_hand)
                    elif kind == "notice":
                        log.warning("%s: controller refused a message: %s", self.device_id, msg.notice.error.message)
                        self.notices.append(msg.notice.error)
            finally:
                self._outq = None
                in_hand.closed = True
                for t in [*tasks, *self._parting]:
                    t.cancel()
                if acks is not None:
                    acks.close()
                outq.put_nowait(None)

    def _result_batch(self, first: agent_pb2.AgentMessage, outq: asyncio.Queue[agent_pb2.AgentMessage | None]
                      ) -> tuple[agent_pb2.AgentMessage, object]:
        """``first`` (a whole result) and the whole results queued right behind it as one message (up to
        MAX_BATCH_RESULTS, MAX_BATCH_BYTES), and the next queued message taken that is not one of them."""
        size = [first.result.ByteSize()]

        def fits(msg: agent_pb2.AgentMessage | None) -> bool:   # a whole result that keeps the batch within bounds
            if msg is None or msg.WhichOneof("kind") != "result" or msg.result.parts:
                return False
            size[0] += msg.result.ByteSize()
            return size[0] <= MAX_BATCH_BYTES

        more, carry = take_queued(outq, fits, MAX_BATCH_RESULTS - 1)
        if not any(m is not None for m in more):
            return first, carry
        self.result_batches += 1
        batch = agent_pb2.AgentMessage()
        # extend, not AgentMessage(results=ResultBatch(results=...)), which copies each result twice (with
        # serialising, 15 -> 11 us a 40 KB profile result)
        batch.results.results.extend([first.result] + [m.result for m in more if m is not None])
        return batch, carry

    def _welcome(self, w: agent_pb2.Welcome) -> None:
        """Take the controller's intervals and batch size where they are within WELCOME_BOUNDS; keep our own otherwise."""
        current = {"heartbeat_interval_s": self._heartbeat_s, "telemetry_interval_s": self._batch_s,
                   "max_batch_samples": self._max_batch}
        for name, (lo, hi) in WELCOME_BOUNDS.items():
            value = getattr(w, name)
            if value and lo <= value <= hi:  # NaN fails both comparisons
                current[name] = value
            elif value:
                log.warning("%s: controller's welcome has %s=%r outside %s..%s; keeping %s", self.device_id, name,
                            value, lo, hi, current[name])
        self._heartbeat_s = float(current["heartbeat_interval_s"])
        self._batch_s = float(current["telemetry_interval_s"])
        self._max_batch = int(current["max_batch_samples"])
        self._columns, self._fold, self._batches = w.columns, w.folded_heartbeats, w.batches
        self._last_beat = -1e9   # a new session: its first heartbeat goes at once
        self.executor.columns = w.columns

    async def _stop_watch(self, stop: asyncio.Event, call: grpc.aio.StreamStreamCall,
                          outq: asyncio.Queue[agent_pb2.AgentMessage | None]) -> None:
        """On stop, half-close so the controller ends the session cleanly; cancel if it does not."""
        await stop.wait()
        outq.put_nowait(None)
        await asyncio.sleep(2.0)
        call.cancel()

    async def _send_loop(self, outq: asyncio.Queue[agent_pb2.AgentMessage | None]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self._batch_s)
            n = min(len(self.buffer), self._max_batch)
            if n == 0 and not self.dropped:
                continue
            taken = [self.buffer.popleft() for _ in range(n)]
            cols = columns_from_samples(taken) if self._columns else None
            if cols is not None:
                batch = agent_pb2.TelemetryBatch(columns=cols, dropped=self.dropped)
            else:
                batch = agent_pb2.TelemetryBatch(samples=[sample_to_pb(s) for s in taken], dropped=self.dropped)
            if self._fold:   # a batch is due anyway: it carries the heartbeat, the heartbeat loop skips one
                batch.heartbeat.CopyFrom(await self._beat())
                self._last_beat = loop.time()
            outq.put_nowait(agent_pb2.AgentMessage(telemetry=batch))
            self.dropped = 0

    async def _beat(self) -> agent_pb2.Heartbeat:
        mode = await self._call(self.device.read_mode)
        if self.metrics:
            self.metrics.set_mode(mode)  # type: ignore[arg-type]
        return agent_pb2.Heartbeat(t_s=self.device.now_s(), current_mode=mode_to_pb(mode),  # type: ignore[arg-type]
                                   busy_command_id=self.executor.busy, launch_ids=self.executor.launches)

    async def _heartbeat_loop(self, outq: asyncio.Queue[agent_pb2.AgentMessage | None]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            # A heartbeat of its own only when none went out in a batch for most of an interval.
            if loop.time() - self._last_beat >= 0.75 * self._heartbeat_s:
                outq.put_nowait(agent_pb2.AgentMessage(heartbeat=await self._beat()))
                self._last_beat = loop.time()
            await asyncio.sleep(max(0.0, self._last_beat + self._heartbeat_s - loop.time()))

    def _ack(self, command_id: str, outq: asyncio.Queue[agent_pb2.AgentMessage | None]) -> None:
        self.acks_sent += 1
        outq.put_nowait(agent_pb2.AgentMessage(ack=agent_pb2.CommandAck(command_id=command_id, accepted=True)))

    def _start(self, cmd: agent_pb2.Command, outq: asyncio.Queue[agent_pb2.AgentMessage | None], acks: _Acks,
               in_hand: _InHand) -> None:
        """Start a command the controller sent, in the order they came: checked once (a refusal acknowledged at once,
        its failed result to follow), then handed to the executor, whose run of it (a campaign's profile queued for
        the board, anything else a task that keeps its place in line) is answered when it ends (``_answer``); an
        accepted command is acknowledged only if it runs ACK_AFTER_S without a result (``acks``)."""
        cid = cmd.command_id
        checked: Checked | None = None
        try:
            checked = self.executor.check(cmd)
        except Exception as e:   # refused (an unexpected failure too: INTERNAL, logged; its run answers it the same)
            outq.put_nowait(agent_pb2.AgentMessage(ack=agent_pb2.CommandAck(command_id=cid, accepted=False,
                                                                             error=error_pb(e))))
        try:
            run = self.executor.submit(cmd, checked)
        except Exception as e:   # a fault of ours, not the board's answer: this command fails, the rest go on
            self._send_result(agent_pb2.CommandResult(command_id=cid, ok=False, error=error_pb(e)), outq, in_hand)
            return
        if isinstance(run, agent_pb2.CommandResult):   # this id ran already: its result again
            self._send_result(run, outq, in_hand)
            return
        if checked is not None:
            acks.accepted(cid)
        in_hand.count += 1
        run.add_done_callback(functools.partial(self._answer, cid, outq, acks, in_hand))

    def _answer(self, cid: str, outq: asyncio.Queue[agent_pb2.AgentMessage | None], acks: _Acks, in_hand: _InHand,
                run: asyncio.Future[agent_pb2.CommandResult]) -> None:
        """A command started by ``_start`` ended: its result goes to the controller, unless the session is over."""
        in_hand.count -= 1
        acks.answered(cid)
        if not run.cancelled() and not in_hand.closed:   # (cancelled: the event loop is closing under it)
            self._send_result(run.result(), outq, in_hand)

    def _send_result(self, result: agent_pb2.CommandResult, outq: asyncio.Queue[agent_pb2.AgentMessage | None],
                     in_hand: _InHand) -> None:
        if result.ByteSize() <= PART_BYTES:
            msg = agent_pb2.AgentMessage()
            msg.result.CopyFrom(result)   # half of what AgentMessage(result=result) costs (upb)
            outq.put_nowait(msg)
            return

        async def in_parts() -> None:   # a long window: cut in a worker thread
            parts = await to_thread(result_messages, result)
            if not in_hand.closed:
                for part in parts:
                    outq.put_nowait(part)

        task = asyncio.create_task(in_parts())
        self._parting.add(task)
        task.add_done_callback(self._parting.discard)
