"""Redis under Sentinel for the tests: a master, a replica and three Sentinels (``redis-server --sentinel``, what the
Debian redis-sentinel package runs), real processes on free ports, each in a process group of its own (tests/procs.py)
and ended by ``end`` (or with the test that started them)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from . import procs
from .harness import free_port, wait_until

MASTER_NAME = "lab"


def answers(port: int, password: str = "") -> bool:
    import redis

    try:
        return bool(redis.Redis(port=port, password=password or None, socket_timeout=0.5,
                                socket_connect_timeout=0.5).ping())
    except redis.RedisError:
        return False


@dataclass
class SentinelLab:
    """``down_after_ms``/``failover_timeout_ms``: Sentinel's settings for the master (how long it must not answer
    before it is down; how long one failover attempt may take); ``password``: all of them require it."""

    base: Path
    down_after_ms: int = 500
    failover_timeout_ms: int = 2000
    password: str = ""    # requirepass and masterauth of the servers, requirepass and auth-pass of the Sentinels
    ports: dict[str, int] = field(default_factory=dict)      # "master", "replica"
    sentinel_ports: list[int] = field(default_factory=list)
    children: dict[str, procs.Child] = field(default_factory=dict)

    @staticmethod
    def missing() -> str:
        """Why this machine cannot run it ('' if it can)."""
        return "" if shutil.which("redis-server") else "redis-server is not installed (make test installs it)"

    def _redis(self, name: str, args: list[str]) -> None:
        self.children[name] = procs.spawn([shutil.which("redis-server") or "redis-server", *args],
                                          stdout=procs.DEVNULL, stderr=procs.DEVNULL)

    def start(self) -> SentinelLab:
        m, r = free_port(), free_port()
        self.ports = {"master": m, "replica": r}
        for name, port in self.ports.items():
            self._redis(name, ["--port", str(port), "--bind", "127.0.0.1", "--dir", str(self.base), "--save", "",
                               "--appendonly", "yes", "--appendfilename", f"{name}.aof", "--appenddirname", name,
                               *(["--replicaof", "127.0.0.1", str(m)] if name == "replica" else []),
                               *(["--requirepass", self.password, "--masterauth", self.password] if self.password else [])])
        for i in range(3):
            port = free_port()
            conf = self.base / f"sentinel-{i}.conf"   # Sentinel rewrites its own configuration: one file each
            conf.write_text(f"port {port}\nbind 127.0.0.1\nsentinel monitor {MASTER_NAME} 127.0.0.1 {m} 2\n"
                            f"sentinel down-after-milliseconds {MASTER_NAME} {self.down_after_ms}\n"
                            f"sentinel failover-timeout {MASTER_NAME} {self.failover_timeout_ms}\n"
                            + (f"requirepass {self.password}\nsentinel auth-pass {MASTER_NAME} {self.password}\n"
                               if self.password else ""))
            self._redis(f"sentinel-{i}", [str(conf), "--sentinel"])
            self.sentinel_ports.append(port)
        wait_until(lambda: all(answers(p, self.password) for p in (m, r, *self.sentinel_ports)), 20, "the Redis servers")
        wait_until(lambda: self.replication("replica").get("master_link_status") == "up", 20, "the replica in sync")
        wait_until(self._sentinels_ready, 60, "the Sentinels to know the replica and each other")
        return self

    def _sentinels_ready(self) -> bool:   # each knows the replica (from the master's INFO) and the two other Sentinels
        import redis

        for p in self.sentinel_ports:
            s = redis.Redis(port=p, password=self.password or None, decode_responses=True)
            replicas = s.execute_command("SENTINEL", "REPLICAS", MASTER_NAME)
            others = s.execute_command("SENTINEL", "SENTINELS", MASTER_NAME)
            if not any(str(self.ports["replica"]) in str(x) for x in replicas) or len(others) < 2:
                return False
        return True

    def replication(self, name: str) -> dict:
        import redis

        try:
            return dict(redis.Redis(port=self.ports[name], password=self.password or None,
                                    socket_timeout=1).info("replication"))
        except redis.RedisError:
            return {}

    @property
    def url(self) -> str:
        """The store URL: the Sentinels' addresses and the master's name."""
        auth = f":{self.password}@" if self.password else ""
        return f"redis+sentinel://{auth}" + ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports) + f"/{MASTER_NAME}"

    def kill(self, name: str) -> None:
        """SIGKILL one server ("master", "replica", "sentinel-N")."""
        child = self.children[name]
        child.kill()
        child.wait(10)

    def end(self) -> None:
        for child in reversed(list(self.children.values())):
            child.end()
