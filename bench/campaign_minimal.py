"""The leanest campaign over the same wire, for bench/campaign.py: what a campaign costs per mode on this machine
with jetfleet's own work taken out and its pipelining kept.

A minimal agent (a process of its own, like `jetfleet agent run`): one grpc.aio stream of the same AgentLink
service; each run_profile command goes to one worker thread (an agent's event loop must stay free while a board
trains), which runs the queued profiles back to back with the same profiler on the same twin and builds each
CommandResult (the window as one columns block); it wakes the event loop after HELD results or when none is
queued, and the results finished by then go back in one message (a ResultBatch when several). No
acknowledgements, heartbeats, telemetry, checks or command memory.

A minimal controller (a thread of the benchmark's process, where jetfleet's controller runs too): the same
service and the same commands (`profile_command`), ``depth`` modes on the board (jetfleet keeps up to
MAX_PIPELINE_DEPTH, 32, on a board as quick as an instant twin), the next modes written (one CommandBatch) before
the results that freed their places are stored; each result stored on the event loop with the limit's minimal
commit: one SQLite transaction (WAL, synchronous=FULL) or one MULTI/EXEC (Redis) a mode of the same rows
(the result with its raw samples, the mode's state, the command's log entry). No result checks, retries, leases
or metrics; jetfleet's group commits are not used (the limit's commit is one a mode).

    python bench/campaign_minimal.py agent HOST:PORT     # the minimal agent (bench/campaign.py starts it)
"""

from __future__ import annotations

import asyncio
import json
import queue
import sqlite3
import statistics
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jetfleet.controller.campaigns.manager import MAX_PIPELINE_DEPTH  # noqa: E402
from jetfleet.controller.campaigns.results import profile_command  # noqa: E402
from jetfleet.shared import defaults  # noqa: E402
from jetfleet.shared.catalog import PowerMode  # noqa: E402
from jetfleet.shared.columns import profile_power_w  # noqa: E402
from jetfleet.shared.proto import agent_pb2  # noqa: E402

SERVICE = "jetfleet.v1.AgentLink"
MODEL = "agx-orin"
HELD = 8   # results a worker finishes before it wakes the event loop while more are queued (jetfleet's MAX_HELD)


def run_agent(target: str) -> None:
    """The minimal agent: profiles each command's mode on an instant twin in one worker thread and writes the
    results back as they finish, until the stream ends."""
    from jetfleet.agent.profiler import ProfileRequest, profile, profile_result_pb
    from jetfleet.shared.convert import mode_from_pb
    from jetfleet.twin.board import EmulatedBoard

    board = EmulatedBoard(MODEL, 0)

    def work(cmd: agent_pb2.Command) -> agent_pb2.CommandResult:
        r = cmd.run_profile
        out = agent_pb2.CommandResult(command_id=cmd.command_id, ok=True)
        try:
            req = ProfileRequest(r.workload, mode_from_pb(r.mode), r.minibatches, r.minibatch_size, r.workers, None,
                                 r.sample_interval_s)
            profile_result_pb(profile(board, req), columns=True, into=out.profile)
        except Exception as e:   # answered, so the controller names it
            out.ok = False
            out.error.message = f"{type(e).__name__}: {e}"
        return out

    async def main() -> None:
        loop = asyncio.get_running_loop()
        todo: queue.SimpleQueue[agent_pb2.Command | None] = queue.SimpleQueue()
        finished: list[agent_pb2.CommandResult] = []
        lock = threading.Lock()
        ready = asyncio.Event()

        def worker() -> None:
            held = 0   # results finished since the event loop was last woken for them
            while (cmd := todo.get()) is not None:
                result = work(cmd)
                with lock:
                    finished.append(result)
                held += 1
                if held >= HELD or todo.empty():   # one wake-up, one message for several results
                    loop.call_soon_threadsafe(ready.set)
                    held = 0

        thread = threading.Thread(target=worker, daemon=True)
        thread.start()
        try:
            async with grpc.aio.insecure_channel(target) as channel:
                call = channel.stream_stream(f"/{SERVICE}/Session",
                                             request_serializer=agent_pb2.AgentMessage.SerializeToString,
                                             response_deserializer=agent_pb2.ControllerMessage.FromString)()

                async def writer() -> None:
                    while True:
                        await ready.wait()
                        ready.clear()
                        with lock:
                            batch = finished[:]
                            finished.clear()
                        if not batch:   # taken by the write before
                            continue
                        await call.write(agent_pb2.AgentMessage(result=batch[0]) if len(batch) == 1 else
                                         agent_pb2.AgentMessage(results=agent_pb2.ResultBatch(results=batch)))

                await call.write(agent_pb2.AgentMessage(hello=agent_pb2.Hello(batches=True)))
                writing = asyncio.create_task(writer())
                try:
                    while (msg := await call.read()) is not grpc.aio.EOF:
                        for cmd in [msg.command] if msg.HasField("command") else msg.commands.commands:
                            todo.put(cmd)
                finally:
                    writing.cancel()
        finally:
            todo.put(None)
            thread.join()

    asyncio.run(main())


def stored_row(mode: str, command_id: str, p: agent_pb2.ProfileResult) -> tuple[str, bytes, str]:
    """What a minimal store keeps of one mode's result: its summary (JSON), the result itself (raw bytes) and the
    command's log entry (JSON); the limit's minimal commit and the leanest campaign store the same."""
    times, power = list(p.minibatch_times_s), profile_power_w(p)
    summary = {"mode": mode, "minibatch_time_ms": statistics.median(times) * 1e3, "power_w": statistics.fmean(power),
               "power_samples": len(power)}
    command = {"command_id": command_id, "kind": "run_profile", "status": "done", "result": {"samples": len(power)}}
    return json.dumps(summary), p.SerializeToString(), json.dumps(command)


class SqliteRows:
    """One transaction per mode: the result with its raw samples, the mode's state, the command's log entry."""

    def __init__(self, path: Path, modes: Sequence[str]) -> None:
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


class RedisRows:
    """One MULTI/EXEC pipeline per mode: the result, its raw samples, the mode's state, the command's log entry and
    the index sets jetfleet keeps (a fresh redis-server each run: the keys need no prefix of their own)."""

    def __init__(self, url: str, modes: Sequence[str]) -> None:
        import redis

        self.r = redis.Redis.from_url(url)
        self.r.hset("min:modes", mapping={m: "pending" for m in modes})

    def store(self, mode: str, summary: str, raw: bytes, command: str) -> None:
        pipe = self.r.pipeline(transaction=True)
        pipe.set(f"min:profile:{mode}", summary)
        pipe.set(f"min:raw:{mode}", raw)
        pipe.hset("min:modes", mode, "done")
        pipe.set(f"min:command:{mode}", command)
        for idx in ("model", "workload", "device", "source", "all"):
            pipe.sadd(f"min:idx:{idx}", mode)
        pipe.execute()

    def close(self) -> None:
        self.r.close()


def minimal_campaign(store: str, picks: Sequence[PowerMode], spawn: Callable[[list[str]], Any], *,
                     depth: int = MAX_PIPELINE_DEPTH, minibatches: int = defaults.MINIBATCHES,
                     workload: str = "resnet18") -> float:
    """Modes per second of the minimal campaign over ``picks`` (modes of the agx-orin twin's catalog), ``depth``
    on the board at a time, each result stored as it comes back in a SQLite file under ``store`` (a directory) or
    on Redis (``store`` a redis:// URL); timed from the agent's hello to the last commit. ``spawn(argv)`` starts
    the minimal agent and returns a handle with ``poll()`` and ``end()``."""
    keys = [str(m) for m in picks]
    n = len(picks)
    if store.startswith("redis://"):
        rows: SqliteRows | RedisRows = RedisRows(store, keys)
    else:
        Path(store).mkdir(parents=True, exist_ok=True)
        rows = SqliteRows(Path(store) / "minimal-campaign.db", keys)
    span: dict[str, float] = {}
    finished = threading.Event()
    failed: list[str] = []

    async def session(requests: AsyncIterator[agent_pb2.AgentMessage], context: Any) -> None:
        sent = done = 0

        async def send(k: int) -> None:
            nonlocal sent
            cmds = [profile_command(workload, picks[i], minibatches, f"mc-{i}") for i in range(sent, min(n, sent + k))]
            sent += len(cmds)
            if cmds:
                await context.write(agent_pb2.ControllerMessage(command=cmds[0]) if len(cmds) == 1 else
                                    agent_pb2.ControllerMessage(commands=agent_pb2.CommandBatch(commands=cmds)))

        try:
            async for msg in requests:
                kind = msg.WhichOneof("kind")
                if kind == "hello":
                    span["start"] = time.perf_counter()
                    await send(depth)
                    continue
                results = [msg.result] if kind == "result" else list(msg.results.results)
                await send(len(results))   # the next modes go to the board before these are stored
                for res in results:
                    if not res.ok:
                        raise RuntimeError(f"{res.command_id}: {res.error.message}")
                    key = keys[int(res.command_id.rsplit("-", 1)[1])]
                    rows.store(key, *stored_row(key, res.command_id, res.profile))
                    done += 1
                if done == n:
                    span["end"] = time.perf_counter()
                    return
        except asyncio.CancelledError:   # the stream was cut (the agent died) or the server stops
            failed.append(f"the stream was cut after {done} of {n} modes")
            raise
        except Exception as e:   # a failed result, or a store that refused
            failed.append(f"{type(e).__name__}: {e}")
            raise
        finally:
            if done < n and not failed:
                failed.append(f"the stream ended after {done} of {n} modes")
            finished.set()

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    server: grpc.aio.Server | None = None
    agent: Any = None
    try:
        async def serve() -> tuple[grpc.aio.Server, int]:
            s = grpc.aio.server()
            handler = grpc.stream_stream_rpc_method_handler(
                session, request_deserializer=agent_pb2.AgentMessage.FromString,
                response_serializer=agent_pb2.ControllerMessage.SerializeToString)
            s.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, {"Session": handler})])
            port = s.add_insecure_port("127.0.0.1:0")
            await s.start()
            return s, port

        server, port = asyncio.run_coroutine_threadsafe(serve(), loop).result(30)
        agent = spawn([sys.executable, str(Path(__file__).resolve()), "agent", f"127.0.0.1:{port}"])
        deadline = time.monotonic() + max(60.0, n * 0.05)
        while not finished.wait(0.2):
            if agent.poll() is not None:
                finished.wait(1.0)   # its stream's end reaches the handler
                if not finished.is_set():
                    failed.append(f"the minimal agent exited with {agent.poll()} before its stream began")
                break
            if time.monotonic() > deadline:
                failed.append(f"no end after {max(60.0, n * 0.05):.0f} s")
                break
        if failed:
            raise RuntimeError(f"the minimal campaign failed: {failed[0]}")
        return n / (span["end"] - span["start"])
    finally:
        if agent is not None:
            agent.end()
        if server is not None:
            asyncio.run_coroutine_threadsafe(server.stop(None), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        if not thread.is_alive():
            loop.close()
        rows.close()


if __name__ == "__main__":
    if sys.argv[1:2] != ["agent"] or len(sys.argv) != 3:
        sys.exit("usage: campaign_minimal.py agent HOST:PORT")
    run_agent(sys.argv[2])
