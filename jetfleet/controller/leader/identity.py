"""Who a controller is, as other controllers and operators are told: its pid, host and gRPC address."""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class ControllerIdentity:
    """One controller process: written beside the SQLite lock and into the Redis lease, shown by `controller status`."""

    pid: int
    host: str
    address: str       # where operators and agents reach it (HOST:PORT), "" before it listens
    started_s: float   # wall-clock time it started (Unix seconds)

    @classmethod
    def here(cls, address: str, started_s: float) -> ControllerIdentity:
        """This process on this host."""
        return cls(pid=os.getpid(), host=socket.gethostname(), address=address, started_s=started_s)

    def to_json(self) -> str:
        """One line of JSON (the holder file, the lease's value)."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ControllerIdentity | None:
        """The identity written by ``to_json``, or None for text that is not one (a torn or foreign file)."""
        try:
            d = json.loads(text)
            return cls(pid=int(d["pid"]), host=str(d["host"]), address=str(d["address"]),
                       started_s=float(d["started_s"]))
        except (ValueError, KeyError, TypeError):
            return None

    def describe(self) -> str:
        """``ADDRESS (pid PID on HOST)``: how errors and the CLI name a controller."""
        return f"{self.address or 'no address yet'} (pid {self.pid} on {self.host})"
