"""Controller configuration: a frozen dataclass built by the CLI (the composition root)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ControllerConfig:
    """How the controller listens, stores, times out and talks to agents; built once by the CLI."""

    listen: str = "127.0.0.1:50051"
    store: str = "~/.local/share/jetfleet"   # a data directory (SQLite) or redis://HOST:PORT/DB
    store_prefix: str = "jetfleet"           # Redis key prefix: one lab (one leader) per prefix
    lease_ttl_s: float = 3.0                 # Redis: a dead leader's lease expires this long after its last renewal
    lease_renew_s: float = 0.5               # Redis: the leader renews its lease this often (<= ttl / 3)
    lease_try_s: float = 0.5                 # Redis: a standby tries to take the lease this often
    metrics_port: int | None = None          # the /metrics and /sd/agents endpoint; None: not served
    metrics_address: str = ""                # where it binds ("": the gRPC listen address)
    metrics_tls_cert: str = ""               # HTTPS for it: certificate and key
    metrics_tls_key: str = ""
    metrics_auth_file: str = ""              # basic auth: a file holding USER:PASSWORD
    heartbeat_interval_s: float = 1.0        # told to agents in the welcome
    offline_after_missed: int = 3            # heartbeats missed before a board is marked offline
    telemetry_interval_s: float = 1.0        # agents' batch interval, told in the welcome
    max_batch_samples: int = 2000            # larger batches are refused (the session goes on)
    telemetry_window: int = 600              # samples kept per board (60 s at 10 Hz)
    command_timeout_s: float = 30.0
    max_message_bytes: int = 4 * 1024 * 1024
    max_connections: int = 4096              # open TCP connections at once (also bounded by the descriptor limit)
    handshake_timeout_s: float = 10.0        # a connection that has not completed its handshake is closed
    max_hellos_in_flight: int = 64           # agents' hellos handled at once; more are told when to dial again
    hello_timeout_s: float = 30.0            # a session's hello must arrive this soon after it starts
    # A call gRPC has queued this long without the controller's event loop taking it is cancelled (gRPC's
    # grpc.server_max_unrequested_time_in_server, 30 s by default): the loop takes one new call at a time, so a
    # fleet dialling a busy controller waits in that queue, and past the limit its sessions fail and re-dial.
    queued_call_s: float = 300.0
    fleet_period_s: float = 2.0              # wall seconds between windows of the fleet queue's aggregate loop
    idle_connection_s: float = 300.0         # a connection without calls for this long is closed (agents keep a call)
    insecure: bool = False                   # allow plaintext on a non-loopback address
    tls_cert: str = ""                       # controller certificate, key and the lab CA: mutual TLS
    tls_key: str = ""
    tls_ca: str = ""

    @property
    def offline_after_s(self) -> float:
        """Seconds without a heartbeat after which a board is marked offline."""
        return self.heartbeat_interval_s * self.offline_after_missed
