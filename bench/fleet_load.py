"""Load for the fleet benchmark, in processes of their own: protocol agents and a minimal server.

``agents``: K agents on one event loop, each on its own gRPC connection, speaking the agent protocol the way the
real agent does: a hello, then every second a telemetry batch of 10 samples (10 Hz sampling; the samples are the
twin's, recorded once per board model) with the heartbeat folded in when the welcome allows it (as columns when it
says so), or a batch of sample messages and a heartbeat of its own (protocol 1, an older controller); set_mode
commands are answered at once with the mode confirmed (no separate ack: the real agent acknowledges only a command
still running after 50 ms). Messages are serialised once and sent as bytes, so a load process spends its time in
gRPC, not in building messages. An agent whose session ends dials again after a jittered backoff, as the real agent
does; one turned away by a controller admitting agents waits what it was told, with the real agent's jitter on top.
Each process answers ``count`` on stdin with the messages it has sent, the agents welcomed at least once, the
sessions that failed and the sessions turned away.

``real``: the real agent (AgentLink on emulated boards, 10 Hz sampling, 1 s batches) instead, for a
figure with everything a board's agent does; its processes spend most of their CPU on the twins.

``minimal``: the smallest grpc.aio server of the same service: it welcomes each stream (saying it
reads columns and folded heartbeats, so it gets the same messages as the controller) and counts what
it receives; ``count`` on stdin prints that count.
"""

from __future__ import annotations

import asyncio
import random
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grpc  # noqa: E402

from jetfleet.shared import defaults  # noqa: E402
from jetfleet.shared.backoff import admission_delay_s  # noqa: E402
from jetfleet.shared.columns import columns_from_samples  # noqa: E402
from jetfleet.shared.convert import catalog_to_pb, mode_to_pb, sample_to_pb  # noqa: E402
from jetfleet.shared.grpc_errors import retry_after_s  # noqa: E402
from jetfleet.shared.proto import agent_pb2, common_pb2  # noqa: E402
from jetfleet.twin.board import EmulatedBoard  # noqa: E402

MODELS = ["agx-orin", "agx-xavier", "orin-nano"]
METHOD = "/jetfleet.v1.AgentLink/Session"
CONNECT_RATE = 100.0   # new agents per second and load process (a fleet coming up, not 5,000 in one instant)


def _answer_counts(get: Any) -> None:
    """A thread: print ``get()`` for every line on stdin until it closes."""
    for _ in sys.stdin:
        print(get(), flush=True)


class Messages:
    """The messages of one board model, serialised once: batches either way, a heartbeat, hellos on demand."""

    def __init__(self, model: str) -> None:
        board = EmulatedBoard(model, 0)
        board.run_minibatches("resnet18", 100)
        samples = board.trace(board.now_s() - 0.95, board.now_s(), 0.1)[:10]
        self.catalog = board.catalog
        self.mode = board.read_mode()
        beat = agent_pb2.Heartbeat(t_s=samples[-1].t_s, current_mode=mode_to_pb(self.mode))
        cols = columns_from_samples(samples)
        self.folded = agent_pb2.AgentMessage(telemetry=agent_pb2.TelemetryBatch(columns=cols, heartbeat=beat))
        self.batch_v1 = agent_pb2.AgentMessage(telemetry=agent_pb2.TelemetryBatch(
            samples=[sample_to_pb(s) for s in samples])).SerializeToString()
        self.heartbeat = agent_pb2.AgentMessage(heartbeat=beat).SerializeToString()
        self.folded_bytes = self.folded.SerializeToString()
        self.catalog_pb = catalog_to_pb(board.catalog)
        self.info = board.describe()

    def hello(self, device_id: str) -> bytes:
        board = common_pb2.BoardInfo(device_id=device_id, model=self.info.model, serial=f"LOAD-{device_id}",
                                     software=dict(self.info.software), catalog=self.catalog_pb, emulated=True,
                                     workloads=["resnet18"])
        return agent_pb2.AgentMessage(hello=agent_pb2.Hello(
            board=board, current_mode=mode_to_pb(self.mode), agent_version="load", protocol=defaults.PROTOCOL_VERSION,
            instance_id=device_id.replace("/", "-"))).SerializeToString()


TICK_S = 0.02                 # the ticker's period: agents are spread over 50 phases of each second
SLOTS = int(round(1.0 / TICK_S))
reasons: dict[str, int] = {}   # why sessions failed ("CODE: details, before/after the welcome"): how many


class Ticker:
    """One task per load process sends every welcomed agent's batch once a second, in the agent's phase of
    the second: a timer per agent (5,000 wake-ups and tasks a second) would cost the load more than it
    costs the server to receive the messages."""

    def __init__(self) -> None:
        self.slots: list[dict[asyncio.Queue[bytes | None], tuple[bytes, ...]]] = [{} for _ in range(SLOTS)]

    def add(self, phase_s: float, outq: asyncio.Queue[bytes | None], messages: tuple[bytes, ...]) -> int:
        slot = int(phase_s / TICK_S) % SLOTS
        self.slots[slot][outq] = messages
        return slot

    def remove(self, slot: int, outq: asyncio.Queue[bytes | None]) -> None:
        self.slots[slot].pop(outq, None)

    async def run(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        start, k = loop.time(), 0
        while not stop.is_set():
            k += 1
            await asyncio.sleep(max(0.0, start + k * TICK_S - loop.time()))
            for outq, messages in list(self.slots[k % SLOTS].items()):
                for m in messages:
                    outq.put_nowait(m)


async def _agent(target: str, device_id: str, msgs: Messages, phase_s: float, stop: asyncio.Event,
                 counts: dict[str, int], welcomed: set[str], ticker: Ticker) -> None:
    """One agent: a session, and another after a jittered backoff whenever one ends (as the real agent does)."""
    attempt = 0
    rng = random.Random(device_id)
    while not stop.is_set():
        told = None
        at = ["before the welcome"]
        try:
            await _session(target, device_id, msgs, phase_s, stop, counts, welcomed, ticker, at)
            attempt = 0
        except grpc.aio.AioRpcError as e:
            told = retry_after_s(e) if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED else None
            if told is not None:
                counts["turned_away"] += 1
            else:
                attempt += 1
                counts["failed"] += 1
                why = f"{e.code().name}: {e.details()}, {at[0]}"
                reasons[why] = reasons.get(why, 0) + 1
        if not stop.is_set():
            if told is not None:
                delay = admission_delay_s(told, rng)
            else:
                delay = min(10.0, 0.5 * 2 ** min(attempt, 5))
                delay = delay / 2 + rng.random() * delay / 2
            try:
                await asyncio.wait_for(stop.wait(), delay)
            except asyncio.TimeoutError:
                pass


async def _session(target: str, device_id: str, msgs: Messages, phase_s: float, stop: asyncio.Event,
                   counts: dict[str, int], welcomed: set[str], ticker: Ticker, at: list[str]) -> None:
    outq: asyncio.Queue[bytes | None] = asyncio.Queue()

    async def out() -> Any:
        while True:
            m = await outq.get()
            if m is None:
                return
            counts["sent"] += 1
            yield m

    opts = [("grpc.use_local_subchannel_pool", 1), ("grpc.keepalive_time_ms", 20_000)]
    async with grpc.aio.insecure_channel(target, options=opts) as channel:
        call = channel.stream_stream(METHOD, request_serializer=lambda b: b,
                                     response_deserializer=agent_pb2.ControllerMessage.FromString)(out())
        outq.put_nowait(msgs.hello(device_id))
        first = await call.read()
        if first is grpc.aio.EOF or first.WhichOneof("kind") != "welcome":  # type: ignore[attr-defined]
            return
        welcomed.add(device_id)
        at[0] = "after the welcome"
        w = first.welcome
        beat_in_batch = w.folded_heartbeats and w.columns
        slot = ticker.add(phase_s, outq, (msgs.folded_bytes,) if beat_in_batch else (msgs.batch_v1, msgs.heartbeat))
        ended = asyncio.ensure_future(stop.wait())
        try:
            while True:   # answer set_mode commands until the session or the load ends
                read = asyncio.ensure_future(call.read())
                await asyncio.wait({read, ended}, return_when=asyncio.FIRST_COMPLETED)
                if not read.done():
                    read.cancel()
                    return
                msg = read.result()
                if msg is grpc.aio.EOF:  # type: ignore[attr-defined]
                    return
                if msg.WhichOneof("kind") != "command" or msg.command.WhichOneof("kind") != "set_mode":
                    continue
                cid = msg.command.command_id   # answered at once: no ack, as the real agent (link.ACK_AFTER_S)
                outq.put_nowait(agent_pb2.AgentMessage(result=agent_pb2.CommandResult(
                    command_id=cid, ok=True, confirmed_mode=msg.command.set_mode.mode)).SerializeToString())
        finally:
            ticker.remove(slot, outq)
            ended.cancel()
            outq.put_nowait(None)


def run_agents(target: str, first: int, n: int, connect_rate: float = CONNECT_RATE) -> None:
    """Agents bench-FIRST .. bench-(FIRST+n-1) until stdin closes; answers 'count' lines with 'sent welcomed failed
    turned-away'."""
    msgs = {m: Messages(m) for m in MODELS}
    counts = {"sent": 0, "failed": 0, "turned_away": 0}
    welcomed: set[str] = set()

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        ticker = Ticker()
        tasks = [asyncio.create_task(ticker.run(stop))]
        for i in range(first, first + n):
            tasks.append(asyncio.create_task(_agent(target, f"bench-{i:05d}", msgs[MODELS[i % 3]],
                                                    (i * 0.618) % 1.0, stop, counts, welcomed, ticker)))
            if i % 10 == 9:
                await asyncio.sleep(10 / connect_rate)   # dial in waves: connect_rate agents a second per process
        done = asyncio.Event()

        def lines() -> None:
            for _ in sys.stdin:
                print(counts["sent"], len(welcomed), counts["failed"], counts["turned_away"], flush=True)
            loop.call_soon_threadsafe(done.set)

        threading.Thread(target=lines, daemon=True).start()
        try:
            await done.wait()
            stop.set()
            await asyncio.wait(tasks, timeout=10)
        finally:
            for why, k in sorted(reasons.items()):   # on stderr, read back by bench/fleet.py
                print(f"session failed: {k} {why}", file=sys.stderr, flush=True)

    asyncio.run(main())


def run_real_agents(target: str, first: int, n: int) -> None:
    """The real agent code (AgentLink, 10 Hz sampling) on n emulated boards on one event loop, until stdin closes;
    answers 'count' lines with '0 welcomed 0 turned-away' (the messages are the agent's own business)."""
    from jetfleet.agent.config import AgentConfig
    from jetfleet.agent.link import AgentLink

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        links = [AgentLink(EmulatedBoard(MODELS[i % 3], i), AgentConfig(controller=target, device_id=f"bench-{i:05d}"))
                 for i in range(first, first + n)]
        tasks = [asyncio.create_task(link.run(stop)) for link in links]
        done = asyncio.Event()

        def lines() -> None:
            for _ in sys.stdin:
                print(0, sum(1 for link in links if link.sessions), 0,
                      sum(len(link.admission_waits) for link in links), flush=True)
            loop.call_soon_threadsafe(done.set)

        threading.Thread(target=lines, daemon=True).start()
        await done.wait()
        stop.set()
        await asyncio.wait(tasks, timeout=10)

    asyncio.run(main())


def run_minimal() -> None:
    """The minimal server: prints its port, then answers 'count' lines with the messages received."""
    received = [0]
    welcome = agent_pb2.ControllerMessage(welcome=agent_pb2.Welcome(
        session_id="minimal", heartbeat_interval_s=1.0, telemetry_interval_s=1.0, max_batch_samples=2000,
        columns=True, folded_heartbeats=True))

    async def session(request_iterator: Any, context: Any) -> Any:
        yield welcome
        async for _ in request_iterator:
            received[0] += 1

    async def main() -> None:
        server = grpc.aio.server(options=[("grpc.max_concurrent_streams", 100_000)])
        handler = grpc.stream_stream_rpc_method_handler(session, request_deserializer=agent_pb2.AgentMessage.FromString,
                                                        response_serializer=agent_pb2.ControllerMessage.SerializeToString)
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("jetfleet.v1.AgentLink",
                                                                              {"Session": handler})])
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        print(port, flush=True)
        threading.Thread(target=_answer_counts, args=(lambda: received[0],), daemon=True).start()
        await server.wait_for_termination()

    asyncio.run(main())


if __name__ == "__main__":
    if sys.argv[1] == "agents":
        run_agents(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                   float(sys.argv[5]) if len(sys.argv) > 5 else CONNECT_RATE)
    elif sys.argv[1] == "real":
        run_real_agents(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        run_minimal()
