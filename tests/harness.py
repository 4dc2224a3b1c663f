"""Test harness: a lab (controller + fake agents: the real agent code on emulated boards) on its own
event-loop thread, bound to port 0, so tests drive it with the real blocking clients; and a real
redis-server on a free port."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from jetfleet.agent.config import AgentConfig
from jetfleet.controller.config import ControllerConfig
from jetfleet.controller.lab import Lab

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
    def fleet(self) -> Any:
        assert self.lab.controller is not None
        return self.lab.controller.fleet

    def wait(self, predicate: Callable[[], bool], timeout_s: float = 10.0, what: str = "condition") -> None:
        """Poll ``predicate`` from the test's thread (it may call the blocking clients)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.02)
        raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")

    def online(self, device_id: str) -> bool:
        devices = self.fleet.devices
        return device_id in devices and devices[device_id].online

    def close(self) -> None:
        try:
            self.call(self.lab.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """A real redis-server with append-only persistence (fsync on every write), on a free port."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        exe = shutil.which("redis-server")
        assert exe, "redis-server not installed"
        self.proc = subprocess.Popen([exe, "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
                                      str(self.data_dir), "--appendonly", "yes", "--appendfsync", "always",
                                      "--save", "", "--protected-mode", "no"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), 0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def kill(self) -> None:
        """SIGKILL: no shutdown save, only what was fsynced survives."""
        if self.proc:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None

    def flush(self) -> None:
        import redis

        redis.Redis.from_url(self.url).flushall()
