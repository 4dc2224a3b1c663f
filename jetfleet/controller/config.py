"""Controller configuration: a frozen dataclass built by the CLI (the composition root)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ControllerConfig:
    listen: str = "127.0.0.1:50051"
    store: str = "~/.local/share/jetfleet"   # a data directory (SQLite) or redis://HOST:PORT/DB
    metrics_port: int | None = None
    heartbeat_interval_s: float = 1.0        # told to agents in the welcome
    offline_after_missed: int = 3            # heartbeats missed before a board is marked offline
    telemetry_interval_s: float = 1.0        # agents' batch interval, told in the welcome
    max_batch_samples: int = 2000            # larger batches are refused (the session goes on)
    telemetry_window: int = 600              # samples kept per board (60 s at 10 Hz)
    command_timeout_s: float = 30.0
    max_message_bytes: int = 4 * 1024 * 1024
    insecure: bool = False                   # allow plaintext on a non-loopback address
    tls_cert: str = ""                       # controller certificate, key and the lab CA: mutual TLS
    tls_key: str = ""
    tls_ca: str = ""

    @property
    def offline_after_s(self) -> float:
        return self.heartbeat_interval_s * self.offline_after_missed
