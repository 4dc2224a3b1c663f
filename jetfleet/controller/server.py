"""The controller process: store, registry, command router, gRPC server, metrics endpoint."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import grpc

from jetfleet.controller.campaigns import CampaignManager
from jetfleet.controller.commands import CommandRouter
from jetfleet.controller.config import ControllerConfig
from jetfleet.controller.metrics import ControllerMetrics
from jetfleet.controller.powertrain.service import ModelService
from jetfleet.controller.registry import Fleet
from jetfleet.controller.service import OperatorService
from jetfleet.controller.servicers import AgentLinkServicer, OperatorServicer
from jetfleet.controller.sessions import AgentSessions
from jetfleet.controller.store import Store, open_store
from jetfleet.shared.errors import InvalidArgument
from jetfleet.shared.netutil import is_loopback
from jetfleet.shared.proto import agent_pb2_grpc, operator_pb2_grpc
from jetfleet.shared.tls import TlsFiles

log = logging.getLogger(__name__)


def split_address(address: str, field: str = "listen") -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise InvalidArgument(f"{field} {address!r}: expected HOST:PORT with a port 0..65535", field=field)
    return host.strip("[]"), int(port)


class Controller:
    def __init__(self, config: ControllerConfig, store: Store | None = None) -> None:
        self.config = config
        self.store = store or open_store(config.store)
        self.metrics = ControllerMetrics()
        self.fleet = Fleet(self.store, config, self.metrics)
        self.router = CommandRouter(self.fleet, self.metrics)
        self.sessions = AgentSessions(self.fleet, self.router)
        self.campaigns = CampaignManager(self.fleet, self.router, self.metrics)
        self.models = ModelService(self.fleet, self.router, self.campaigns, self.metrics)
        self.service = OperatorService(self.fleet, self.router, self.campaigns, self.models)
        self.port = 0
        self._server: grpc.aio.Server | None = None
        self._reaper: asyncio.Task[None] | None = None
        self._metrics_server: Any = None

    async def start(self) -> int:
        host, port = split_address(self.config.listen)
        creds = self._credentials()
        if creds is None and not is_loopback(host):
            if not self.config.insecure:
                raise InvalidArgument(f"plaintext gRPC on {self.config.listen} refused: give --tls-cert, --tls-key and "
                                      "--tls-ca (see `jetfleet certs`), or --insecure on a trusted network",
                                      field="listen")
            log.warning("PLAINTEXT gRPC on %s (--insecure): anyone who can reach it can drive these boards and "
                        "read their data", self.config.listen)
        await self.fleet.load()
        opts = [("grpc.max_receive_message_length", self.config.max_message_bytes),
                ("grpc.max_send_message_length", self.config.max_message_bytes),
                ("grpc.keepalive_time_ms", 20_000), ("grpc.keepalive_permit_without_calls", 1),
                ("grpc.http2.min_ping_interval_without_data_ms", 5_000)]
        self._server = grpc.aio.server(options=opts)
        agent_pb2_grpc.add_AgentLinkServicer_to_server(AgentLinkServicer(self.sessions, tls=creds is not None),
                                                       self._server)
        operator_pb2_grpc.add_OperatorServicer_to_server(OperatorServicer(self.service, tls=creds is not None),
                                                         self._server)
        address = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
        self.port = (self._server.add_secure_port(address, creds) if creds is not None
                     else self._server.add_insecure_port(address))
        if self.port == 0:
            raise InvalidArgument(f"cannot listen on {self.config.listen}", field="listen")
        await self._server.start()
        await self.campaigns.start()
        self._reaper = asyncio.create_task(self._reap_loop())
        if self.config.metrics_port is not None:
            from prometheus_client import start_http_server

            self._metrics_server = start_http_server(self.config.metrics_port, addr=host,
                                                     registry=self.metrics.registry)
        log.info("controller listening on %s:%d (store %s)", host, self.port, self.store.url)
        return self.port

    @property
    def tls(self) -> bool:
        return bool(self.config.tls_cert)

    def _credentials(self) -> grpc.ServerCredentials | None:
        c = self.config
        if not (c.tls_cert or c.tls_key or c.tls_ca):
            return None
        if not (c.tls_cert and c.tls_key and c.tls_ca):
            raise InvalidArgument("mutual TLS needs all three of --tls-cert, --tls-key and --tls-ca", field="tls")
        ca, cert, key = TlsFiles(Path(c.tls_ca), Path(c.tls_cert), Path(c.tls_key)).read()
        assert cert is not None and key is not None
        return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=True)

    @property
    def metrics_port(self) -> int | None:
        if self._metrics_server is None:
            return None
        return int(self._metrics_server[0].server_address[1])

    async def _reap_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.heartbeat_interval_s / 2)
            try:
                await self.sessions.reap()
            except Exception:
                log.exception("reaper failed")

    async def stop(self, grace_s: float = 2.0) -> None:
        if self._reaper:
            self._reaper.cancel()
        await self.campaigns.stop()
        self.fleet.close_all()
        if self._server:
            await self._server.stop(grace_s)
        if self._metrics_server is not None:
            self._metrics_server[0].shutdown()
            self._metrics_server = None
        self.store.close()
        log.info("controller stopped")
