"""The smallest campaign over the same wire, for bench/campaign.py: what a campaign costs per mode on this machine
with nothing of jetfleet's own but the twin, the messages and the profiler.

A minimal agent (a process of its own, like `jetfleet agent run`): one grpc.aio stream of the same AgentLink
service, each run_profile command's profile run by the twin's profiler in one worker thread (an agent's event loop
must stay free while a board trains) and its CommandResult (the window as one columns block) written back. No
acknowledgements, heartbeats, telemetry, checks or command memory.

A minimal controller (a thread of the benchmark's process, where jetfleet's controller runs too): the same
service, the same commands, the next mode sent as each result comes back with ``depth`` modes on the board at
a time (jetfleet's pipeline), each result stored on the event loop in one SQLite transaction (WAL,
synchronous=FULL: the result with its raw samples, the mode's state, the command's log entry) or one
MULTI/EXEC pipeline (Redis) of the same rows as the minimal commits of bench/campaign.py. No result checks, no
retries, no leases, no metrics.

    python bench/campaign_minimal.py agent HOST:PORT     # the minimal agent (bench/campaign.py starts it)
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import statistics
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jetfleet.shared import defaults  # noqa: E402
from jetfleet.shared.columns import profile_power_w  # noqa: E402
from jetfleet.shared.convert import mode_from_pb, mode_to_pb  # noqa: E402
from jetfleet.shared.proto import agent_pb2  # noqa: E402

SERVICE = "jetfleet.v1.AgentLink"
MODEL = "agx-orin"


def run_agent(target: str) -> None:
    """The minimal agent: profiles each command's mode on an instant twin and writes the result back, until the
    stream ends."""
    from jetfleet.agent.executor import profile_result_pb
    from jetfleet.agent.profiler import ProfileRequest, profile
    from jetfleet.twin.board import EmulatedBoard

    board = EmulatedBoard(MODEL, 0)
    pool = ThreadPoolExecutor(1)

    def work(cmd: agent_pb2.Command) -> agent_pb2.AgentMessage:
        r = cmd.run_profile
        req = ProfileRequest(r.workload, mode_from_pb(r.mode), r.minibatches, r.minibatch_size, r.workers, None,
                             r.sample_interval_s)
        out = agent_pb2.AgentMessage(result=agent_pb2.CommandResult(command_id=cmd.command_id, ok=True))
        profile_result_pb(profile(board, req), columns=True, into=out.result.profile)
        return out

    async def main() -> None:
        loop = asyncio.get_running_loop()
        async with grpc.aio.insecure_channel(target) as channel:
            call = channel.stream_stream(f"/{SERVICE}/Session",
                                         request_serializer=agent_pb2.AgentMessage.SerializeToString,
                                         response_deserializer=agent_pb2.ControllerMessage.FromString)()
            await call.write(agent_pb2.AgentMessage(hello=agent_pb2.Hello()))
            while True:
                msg = await call.read()
                if msg is grpc.aio.EOF:
                    return
                for cmd in ([msg.command] if msg.HasField("command") else msg.commands.commands):
                    await call.write(await loop.run_in_executor(pool, work, cmd))

    asyncio.run(main())


class _SqliteRows:
    """One transaction per mode: the result with its raw samples, the mode's state, the command's log entry."""

    def __init__(self, path: Path, modes: list[str]) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript("CREATE TABLE p (mode TEXT PRIMARY KEY, summary TEXT, raw BLOB);"
                              "CREATE TABLE m (mode TEXT PRIMARY KEY, status TEXT);"
                              "CREATE TABLE c (id TEXT PRIMARY KEY, doc TEXT);")
        self.db.executemany("INSERT INTO m VALUES (?, 'pending')", [(m,) for m in modes])

    def store(self, mode: str, summary: str, raw: bytes, command: str) -> None:
        db = self.db
        db.execute("BEGIN")
        db.execute("INSERT INTO p VALUES (?,?,?)", (mode, summary, raw))
        db.execute("UPDATE m SET status='done' WHERE mode=?", (mode,))
        db.execute("INSERT INTO c VALUES (?,?)", (mode, command))
        db.execute("COMMIT")

    def close(self) -> None:
        self.db.close()


class _RedisRows:
    """One MULTI/EXEC pipeline per mode, the keys bench/campaign.py's minimal Redis commit writes."""

    def __init__(self, url: str, modes: list[str]) -> None:
        import redis

        self.r = redis.Redis.from_url(url)
        self.r.hset("mc:modes", mapping={m: "pending" for m in modes})

    def store(self, mode: str, summary: str, raw: bytes, command: str) -> None:
        pipe = self.r.pipeline(transaction=True)
        pipe.set(f"mc:profile:{mode}", summary)
        pipe.set(f"mc:raw:{mode}", raw)
        pipe.hset("mc:modes", mode, "done")
        pipe.set(f"mc:command:{mode}", command)
        for idx in ("model", "workload", "device", "source", "all"):
            pipe.sadd(f"mc:idx:{idx}", mode)
        pipe.execute()

    def close(self) -> None:
        self.r.close()


def minimal_campaign(store: str, modes: int, spawn: Callable[[list[str]], Any], *, depth: int = 2,
                     minibatches: int = 40, workload: str = "resnet18") -> float:
    """Modes per second of the minimal campaign: ``modes`` modes of the twin's PowerTrain grid (all of them, or
    an even spread), ``depth`` on the board at a time, each result stored as it comes back in a SQLite file under
    ``store`` (a directory) or on Redis (``store`` a redis:// URL). ``spawn(argv)`` starts the minimal agent and
    returns a handle with ``end()``."""
    from jetfleet.twin.board import EmulatedBoard

    grid = EmulatedBoard(MODEL, 0).catalog.grid("powertrain")
    picks = grid if modes >= len(grid) else [grid[i * len(grid) // modes] for i in range(modes)]
    keys = [str(m) for m in picks]
    if store.startswith("redis://"):
        rows: _SqliteRows | _RedisRows = _RedisRows(store, keys)
    else:
        Path(store).mkdir(parents=True, exist_ok=True)
        rows = _SqliteRows(Path(store) / "minimal-campaign.db", keys)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    started: dict[str, float] = {}
    finished = threading.Event()
    failed: list[Exception] = []

    async def session(requests: AsyncIterator[agent_pb2.AgentMessage], context: Any) -> AsyncIterator[Any]:
        out: asyncio.Queue[agent_pb2.ControllerMessage | None] = asyncio.Queue()
        sent = [0]

        def send_next() -> None:
            i = sent[0]
            if i < len(picks):
                out.put_nowait(agent_pb2.ControllerMessage(command=agent_pb2.Command(
                    command_id=f"mc-{i}", run_profile=agent_pb2.RunProfile(
                        workload=workload, mode=mode_to_pb(picks[i]), minibatches=minibatches,
                        minibatch_size=defaults.MINIBATCH_SIZE, workers=defaults.WORKERS,
                        sample_interval_s=defaults.SAMPLE_INTERVAL_S))))
                sent[0] += 1

        async def results() -> None:
            done = 0
            async for msg in requests:
                if msg.HasField("hello"):
                    started["t"] = time.perf_counter()
                    for _ in range(depth):
                        send_next()
                    continue
                send_next()   # the next mode goes to the board before this one is stored
                res = msg.result
                i = int(res.command_id.rsplit("-", 1)[1])
                p = res.profile
                times, power = list(p.minibatch_times_s), profile_power_w(p)
                summary = json.dumps({"mode": keys[i], "minibatch_time_ms": statistics.median(times) * 1e3,
                                      "power_w": statistics.fmean(power), "power_samples": len(power)})
                command = json.dumps({"command_id": res.command_id, "kind": "run_profile", "status": "done",
                                      "result": {"samples": len(power)}})
                rows.store(keys[i], summary, p.SerializeToString(), command)
                done += 1
                if done == len(picks):
                    started["end"] = time.perf_counter()
                    finished.set()
                    out.put_nowait(None)
                    return

        async def reading() -> None:
            try:
                await results()
            except Exception as e:   # a result that could not be stored: the campaign fails with it
                failed.append(e)
                finished.set()
                out.put_nowait(None)

        reader = asyncio.ensure_future(reading())
        try:
            while (msg := await out.get()) is not None:
                yield msg
        finally:
            reader.cancel()

    async def serve() -> tuple[grpc.aio.Server, int]:
        server = grpc.aio.server()
        handler = grpc.stream_stream_rpc_method_handler(
            session, request_deserializer=agent_pb2.AgentMessage.FromString,
            response_serializer=agent_pb2.ControllerMessage.SerializeToString)
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, {"Session": handler})])
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        return server, port

    server, port = asyncio.run_coroutine_threadsafe(serve(), loop).result(30)
    agent = spawn([sys.executable, str(Path(__file__).resolve()), "agent", f"127.0.0.1:{port}"])
    try:
        if not finished.wait(max(60.0, modes * 0.05)):
            raise RuntimeError(f"the minimal campaign did not finish {len(picks)} modes")
        if failed:
            raise RuntimeError(f"the minimal campaign failed: {failed[0]!r}") from failed[0]
        return len(picks) / (started["end"] - started["t"])
    finally:
        agent.end()
        asyncio.run_coroutine_threadsafe(server.stop(None), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()
        rows.close()


if __name__ == "__main__":
    if sys.argv[1:2] != ["agent"] or len(sys.argv) != 3:
        sys.exit("usage: campaign_minimal.py agent HOST:PORT")
    run_agent(sys.argv[2])
