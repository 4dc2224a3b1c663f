"""Agent configuration: a frozen dataclass built by the CLI (the composition root)."""

from __future__ import annotations

from dataclasses import dataclass

from jetfleet.agent.templates import TemplatesConfig
from jetfleet.shared import defaults


@dataclass(frozen=True)
class AgentConfig:
    """How the agent links to its controller and samples its board."""

    controller: str = "127.0.0.1:50051"
    device_id: str = ""
    sample_interval_s: float = defaults.SAMPLE_INTERVAL_S  # telemetry sampling
    batch_interval_s: float = 1.0       # until the controller's welcome says otherwise
    heartbeat_interval_s: float = 1.0   # until the controller's welcome says otherwise
    max_buffer_samples: int = 6000      # kept while disconnected (10 min at 10 Hz); oldest dropped first
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    remembered_results: int = 512       # command results kept for idempotent replies
    metrics_port: int | None = None
    tls_ca: str = ""                    # the lab CA, this agent's certificate and key: mutual TLS
    tls_cert: str = ""
    tls_key: str = ""
    insecure: bool = False              # allow plaintext to a non-loopback controller
    session_socket: str = ""            # training sessions (jetfleet.session) on this Unix socket; "" for none
    session_socket_mode: int = 0o660    # 0o600: the agent's user only; 0o660: and its group (the board's users)
    templates: TemplatesConfig | None = None   # the job templates it may launch (``templates.py``); needs the socket
