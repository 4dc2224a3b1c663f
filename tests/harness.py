"""Test harness: a lab (controller + fake agents: the real agent code on emulated boards) on its own
event-loop thread, bound to port 0, so tests drive it with the real blocking clients; and a real
redis-server on a free port."""

from __future__ import annotations

import asyncio
import shutil
import socket
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from jetfleet.agent.config import AgentConfig
from jetfleet.controller.config import ControllerConfig
from jetfleet.lab import Lab

from . import procs
from .waiting import wait_until  # noqa: F401 - the tests' one wait, re-exported

T = TypeVar("T")

FAST_CONTROLLER = ControllerConfig(listen="127.0.0.1:0", heartbeat_interval_s=0.2, offline_after_missed=3,
                                   telemetry_interval_s=0.2, command_timeout_s=10.0)
FAST_AGENT = AgentConfig(sample_interval_s=0.05, backoff_base_s=0.05, backoff_max_s=0.5)


class LabThread:
    def __init__(self, store: str, boards: list[str], *, config: ControllerConfig = FAST_CONTROLLER,
                 agent: AgentConfig = FAST_AGENT) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.lab = Lab(replace(config, store=store), boards, agent_config=agent)

    def call(self, coro: Coroutine[Any, Any, T], timeout_s: float = 30.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def do(self, fn: Callable[[], T]) -> T:
        async def wrap() -> T:
            return fn()

        return self.call(wrap())

    def start(self) -> LabThread:
        self.call(self.lab.start())
        self.call(self.lab.wait_online())
        return self

    @property
    def address(self) -> str:
        return self.lab.address

    @property
    def registry(self) -> Any:
        assert self.lab.controller is not None
        return self.lab.controller.registry

    @property
    def telemetry(self) -> Any:
        assert self.lab.controller is not None
        return self.lab.controller.telemetry

    def wait(self, predicate: Callable[[], bool], timeout_s: float = 10.0, what: str = "condition") -> None:
        """Poll ``predicate`` from the test's thread (it may call the blocking clients)."""
        wait_until(predicate, timeout_s, what)

    def online(self, device_id: str) -> bool:
        """Whether the board is online, read on the lab's event loop: a board goes offline in several steps (its
        session closed, what it sent kept, its metrics moved) with no await between them, and a read from the test's
        thread can fall between two of them (it saw the board offline before its last batch was kept)."""
        def read() -> bool:
            devices = self.registry.devices
            return device_id in devices and devices[device_id].online

        if threading.current_thread() is self.thread:   # called by a coroutine on the loop: read where it is
            return read()
        return self.do(read)

    def close(self) -> None:
        try:
            self.call(self.lab.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)


async def until(predicate: Callable[[], bool], timeout_s: float = 10.0, what: str = "condition") -> None:
    """``wait_until`` for a test running on an event loop: polls without blocking the loop."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """A real redis-server with append-only persistence (fsync on every write unless told otherwise).

    redis-server cannot listen on port 0 and report it, so it gets a free port and, if another
    process takes that port first (the bind fails and the server exits), another one."""

    def __init__(self, data_dir: Path, password: str = "", *, appendfsync: str = "always", scope: str = "test") -> None:
        self.data_dir = data_dir
        self.scope = scope             # "session": a session fixture's server, ended by it (see tests/procs.py)
        self.appendfsync = appendfsync
        self.port = 0
        self.password = password       # requirepass; the URL then carries it (redis://:PASSWORD@HOST:PORT/0)
        self.proc: procs.Child | None = None

    @property
    def url(self) -> str:
        return f"redis://{f':{self.password}@' if self.password else ''}127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        """Start on a free port; after ``kill`` it comes back on the same port (the clients' URL)."""
        for _ in range(20):
            if self.port == 0:
                self.port = free_port()
            if self._try_start():
                return self
            if self.proc is None or self.proc.poll() is not None:  # the bind failed
                self.proc = None
                if not self._keep_port:
                    self.port = 0
        raise RuntimeError("redis-server did not start")

    _keep_port = False

    def _try_start(self) -> bool:
        exe = shutil.which("redis-server")
        assert exe, "redis-server not installed"
        self.proc = procs.spawn([exe, "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
                                 str(self.data_dir), "--appendonly", "yes", "--appendfsync", self.appendfsync,
                                 "--save", "", "--protected-mode", "no",
                                 *(["--requirepass", self.password] if self.password else [])],
                                stdout=procs.DEVNULL, stderr=procs.DEVNULL, scope=self.scope)
        hello = (f"AUTH {self.password}\r\n" if self.password else "").encode() + b"PING\r\n"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", self.port), 0.2) as s:
                    s.sendall(hello)
                    reply = b""
                    while b"PONG" not in reply and b"-" not in reply[:1]:
                        chunk = s.recv(64)
                        if not chunk:
                            break
                        reply += chunk
                    if b"+PONG" in reply:
                        self._keep_port = True
                        return True
            except OSError:
                try:  # wait for the server to exit (a failed bind), or try again
                    self.proc.wait(0.05)
                except procs.subprocess.TimeoutExpired:
                    pass
        self.proc.end()
        return False

    def kill(self) -> None:
        """SIGKILL: no shutdown save, only what was fsynced survives."""
        if self.proc:
            self.proc.end()        # SIGKILL to its group, reaped
            self.proc = None

    def flush(self) -> None:
        import redis

        redis.Redis.from_url(self.url).flushall()
