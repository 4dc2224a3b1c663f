"""The controller process: store, registry, command router, gRPC server, metrics endpoint."""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import gc
import json
import logging
import resource
import time
from pathlib import Path

import grpc

from jetfleet.controller.campaigns import CampaignManager
from jetfleet.controller.commands import CommandRouter
from jetfleet.controller.config import ControllerConfig
from jetfleet.controller.fleet.caps import GROUP_LABEL, FleetCaps
from jetfleet.controller.fleet.queue import FleetQueue
from jetfleet.controller.health import HealthAndReflection
from jetfleet.controller.jobs import JobManager, JobsConfig
from jetfleet.controller.leader.dirlock import DataDirLock
from jetfleet.controller.leader.gate import StandbyGate
from jetfleet.controller.leader.identity import ControllerIdentity
from jetfleet.controller.leader.lease import LeaseConfig, RedisLease
from jetfleet.controller.leader.role import Role
from jetfleet.controller.leases import BoardLeases
from jetfleet.controller.metrics import ControllerMetrics
from jetfleet.controller.powertrain.cache import PredictionCache
from jetfleet.controller.powertrain.service import ModelService
from jetfleet.controller.registry import Registry
from jetfleet.controller.service import OperatorService
from jetfleet.controller.servicers import AgentLinkServicer, OperatorServicer
from jetfleet.controller.sessions import AgentSessions
from jetfleet.controller.store import Store, open_store
from jetfleet.controller.store.redis import RedisStore
from jetfleet.controller.store.sqlite import SqliteStore
from jetfleet.controller.telemetry import TelemetryHub
from jetfleet.shared.errors import FailedPrecondition, InvalidArgument, Unavailable
from jetfleet.shared.metrics_http import MetricsHttpConfig, MetricsServer
from jetfleet.shared.netutil import is_loopback
from jetfleet.shared.proto import agent_pb2_grpc, operator_pb2_grpc
from jetfleet.shared.sd import SdAgent, sd_groups
from jetfleet.shared.tls import TlsFiles

log = logging.getLogger(__name__)
RESERVED_FDS = 256   # descriptors kept for the store, files, metrics and agents' streams beyond client connections


def split_address(address: str, field: str = "listen") -> tuple[str, int]:
    """HOST:PORT (or [v6]:PORT) as (host, port); InvalidArgument naming ``field`` otherwise."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise InvalidArgument(f"{field} {address!r}: expected HOST:PORT with a port 0..65535", field=field)
    return host.strip("[]"), int(port)


GC_GEN0 = 50_000   # allocations between collections of the youngest generation (CPython's default: 700)


def tune_gc() -> None:
    """Garbage collection for a long-running controller process (called once it has started, not by embedders).

    What start-up built (modules, catalogs, the boards read from the store) is frozen out of the collector's
    sight, and the youngest generation is collected every GC_GEN0 allocations instead of every 700: with
    thousands of agents every batch allocates, and at 5,000 agents collections took ~10 % of a core
    (bench/fleet.py: 84.5 % -> 74.5 % of one core). Cycles are still collected, in fewer, larger passes."""
    gc.collect()
    gc.freeze()
    gen0, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(max(gen0, GC_GEN0), gen1, gen2)


class Controller:
    """The controller process: composes the store, registry, telemetry hub, router, campaigns and models."""

    def __init__(self, config: ControllerConfig, store: Store | None = None, jobs: JobsConfig | None = None) -> None:
        self.config = config
        self.store = store or open_store(config.store, prefix=config.store_prefix)
        self.metrics = ControllerMetrics()
        self.registry = Registry(self.store, config, self.metrics)
        self.telemetry = TelemetryHub(config, self.metrics)
        self.router = CommandRouter(self.registry, self.metrics)
        self.sessions = AgentSessions(self.registry, self.telemetry, self.router)
        self.leases = BoardLeases()   # who holds each board: jobs, campaigns, rooflines, operators' mode changes
        self.campaigns = CampaignManager(self.registry, self.router, self.metrics, self.leases)
        self.models = ModelService(self.registry, self.router, self.campaigns, self.metrics)
        self.cache = PredictionCache(self.models.repo)
        self.fleet = FleetCaps(self.registry, self.telemetry)
        self.metrics.registry.register(self.fleet)   # type: ignore[arg-type]  # a collector: computed per scrape
        self.fleet_queue = FleetQueue(self.registry, self.fleet, self.leases, self.models.repo,
                                      self.campaigns.catalog_for, self.cache, period_s=config.fleet_period_s)
        self.jobs = JobManager(self.registry, self.router, self.campaigns, self.models, self.metrics, self.leases,
                               self.cache, fleet=self.fleet_queue, config=jobs or JobsConfig())
        self.service = OperatorService(self.registry, self.telemetry, self.router, self.campaigns, self.models,
                                       self.jobs, self.leases, self.fleet, self.fleet_queue,
                                       max_message_bytes=config.max_message_bytes)
        self._fleet_stop = asyncio.Event()
        self._fleet_task: asyncio.Task[None] | None = None
        self.port = 0
        self._server: grpc.aio.Server | None = None
        self._health: HealthAndReflection | None = None
        self._reaper: asyncio.Task[None] | None = None
        self._metrics_server: MetricsServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.identity = ControllerIdentity.here("", time.time())
        # SQLite serves one controller: its data directory is locked for this controller's life
        self._dir_lock = DataDirLock(self.store.path.parent) if isinstance(self.store, SqliteStore) else None
        # Redis serves a lab of controllers: one leads (a lease), the others stand by; every write is fenced
        self.role = Role(self._lease(), self.metrics, self._lead, self._lost)
        self._role_stop = asyncio.Event()
        self._role_task: asyncio.Task[None] | None = None

    def _lease(self) -> RedisLease | None:
        if not isinstance(self.store, RedisStore):
            return None
        c = self.config
        # under Sentinel a new term's fencing token must reach the replica before the term acts (docs/standby.md)
        lease = LeaseConfig(ttl_s=c.lease_ttl_s, renew_every_s=c.lease_renew_s, try_every_s=c.lease_try_s,
                            replica_acks=1 if c.store.startswith("redis+sentinel://") else 0).check()
        self.store.fence(0)   # nothing is written until this controller leads
        # a renewal that hangs is given up within a renewal period, so a cut-off leader learns it early
        timeout_s = max(0.25, min(1.0, lease.renew_every_s))
        return RedisLease(self.store.client(timeout_s=timeout_s), self.store.p, self.identity, lease)

    async def start(self) -> int:
        """Load the boards, serve gRPC (plaintext off loopback only if ``insecure``), resume campaigns; returns the port."""
        host, port = split_address(self.config.listen)
        metrics_http = self.metrics_http_config(host) if self.config.metrics_port is not None else None
        if metrics_http is not None:
            metrics_http.check()  # a bad metrics option is refused before anything listens
        creds = self._credentials()
        if creds is None and not is_loopback(host):
            if not self.config.insecure:
                raise InvalidArgument(f"plaintext gRPC on {self.config.listen} refused: give --tls-cert, --tls-key and "
                                      "--tls-ca (see `jetfleet certs`), or --insecure on a trusted network",
                                      field="listen")
            log.warning("PLAINTEXT gRPC on %s (--insecure): anyone who can reach it can drive these boards and "
                        "read their data", self.config.listen)
        if self._dir_lock is not None:
            self._dir_lock.acquire(self.identity)   # before anything is read or written: a second one is refused
        try:
            return await self._start(host, port, creds, metrics_http)
        except BaseException:
            if self._dir_lock is not None:
                self._dir_lock.release()
            raise

    async def _start(self, host: str, port: int, creds: grpc.ServerCredentials | None,
                     metrics_http: MetricsHttpConfig | None) -> int:
        await self.registry.load()
        log.info("store %s: %s", self.store.url, self.store.durability())
        self._server = grpc.aio.server(options=self.grpc_options(), interceptors=[StandbyGate(self.role)])
        agents = AgentLinkServicer(self.sessions, tls=self.tls, hello_timeout_s=self.config.hello_timeout_s)
        agent_pb2_grpc.add_AgentLinkServicer_to_server(agents, self._server)
        operator_pb2_grpc.add_OperatorServicer_to_server(OperatorServicer(self.service, tls=self.tls), self._server)
        health = self._health = HealthAndReflection(self._server)
        address = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
        try:
            self.port = (self._server.add_secure_port(address, creds) if creds is not None
                         else self._server.add_insecure_port(address))
        except RuntimeError:
            self.port = 0
        if self.port == 0:
            raise FailedPrecondition(f"cannot listen on {self.config.listen}: the address is in use (another "
                                     "controller?) or not this host's", field="listen")
        await self._server.start()
        self.identity = dataclasses.replace(self.identity, address=self.advertised_address(host))
        if self._dir_lock is not None:
            self._dir_lock.announce(self.identity)
        await self.role.first_try(self.identity)
        self._role_stop.clear()
        self._role_task = asyncio.create_task(self.role.run(self._role_stop))
        await health.serving()
        self._reaper = asyncio.create_task(self._reap_loop())
        if metrics_http is not None:
            self._loop = asyncio.get_running_loop()
            self._metrics_server = MetricsServer(self.metrics.registry, metrics_http,
                                                 routes={"/sd/agents": self._sd_agents}).start()
        log.info("controller listening on %s:%d (%s, store %s, %s)", host, self.port,
                 "mutual TLS" if self.tls else "plaintext", self.store.url,
                 "leader" if self.role.leading else "standby")
        return self.port

    async def _lead(self, token: int) -> None:
        """Act: this controller leads (``token`` its Redis term; 0 on SQLite). A standby taking over loads what the
        leader left (boards, fleet caps and labels, campaigns, jobs) and resumes it; commands are idempotent by id,
        so a board's run the old leader started is joined, not repeated."""
        if isinstance(self.store, RedisStore):
            self.store.fence(token)
            (log.warning if token > 1 else log.info)("%s %s (fencing token %d)", "taking over as leader of"
                                                     if token > 1 else "leading", self.store.p, token)
            await self.registry.load()
            await asyncio.to_thread(self.fleet.load)
        await self.campaigns.start()
        await self.jobs.start()
        self._fleet_stop.clear()
        self._fleet_task = asyncio.create_task(self.fleet_queue.run(self._fleet_stop))

    async def _lost(self) -> None:
        """Stop acting: the lease is gone, another controller may lead (its writes are fenced from now on)."""
        if isinstance(self.store, RedisStore):
            self.store.fence(0)
        await self._stop_acting()
        self.registry.close_all()   # agents dial again and find the leader
        log.error("this controller lost the lead and stopped acting; restart it to stand by again")

    async def _stop_acting(self) -> None:
        self._fleet_stop.set()
        if self._fleet_task is not None:
            await self._fleet_task
            self._fleet_task = None
        await self.jobs.stop()
        await self.campaigns.stop()

    def advertised_address(self, host: str) -> str:
        """HOST:PORT where this controller is reached (its bound port; a wildcard host becomes this host's name)."""
        if host in ("0.0.0.0", "::", ""):
            host = self.identity.host
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    def grpc_options(self) -> list[tuple[str, int]]:
        """gRPC server options: message limits, keepalive, an exclusive port, bounded connections and the calls
        queued for the event loop."""
        c = self.config
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        limit = c.max_connections if soft == resource.RLIM_INFINITY else min(c.max_connections, soft - RESERVED_FDS)
        return [("grpc.max_receive_message_length", c.max_message_bytes),
                ("grpc.max_send_message_length", c.max_message_bytes),
                ("grpc.keepalive_time_ms", 20_000), ("grpc.keepalive_permit_without_calls", 1),
                ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
                ("grpc.so_reuseport", 0),   # a second controller on a busy port fails instead of sharing it
                ("grpc.max_allowed_incoming_connections", max(16, limit)),
                ("grpc.server_handshake_timeout_ms", int(c.handshake_timeout_s * 1000)),
                ("grpc.server_max_unrequested_time_in_server", max(1, int(c.queued_call_s))),
                # gRPC drops calls waiting for the event loop to take them beyond a backlog (at random from 1,000,
                # all from 3,000, by default: CANCELLED to the client): a fleet dialling at once would be dropped
                # before admission control sees it, and dial again. One session per agent connection: room for all.
                ("grpc.server.max_pending_requests", max(1000, c.max_connections)),
                ("grpc.server.max_pending_requests_hard_limit", 2 * max(1000, c.max_connections)),
                ("grpc.max_connection_idle_ms", int(c.idle_connection_s * 1000))]

    @property
    def tls(self) -> bool:
        """True when the controller speaks mutual TLS: it was given a certificate, its key and the lab CA."""
        c = self.config
        return bool(c.tls_cert and c.tls_key and c.tls_ca)

    def metrics_http_config(self, grpc_host: str = "") -> MetricsHttpConfig:
        """The metrics endpoint's settings (bound to the gRPC host unless ``metrics_address`` says otherwise)."""
        c = self.config
        return MetricsHttpConfig(address=c.metrics_address or grpc_host or split_address(c.listen)[0],
                                 port=c.metrics_port or 0, tls_cert=c.metrics_tls_cert, tls_key=c.metrics_tls_key,
                                 auth_file=c.metrics_auth_file)

    def _sd_agents(self) -> tuple[str, bytes]:
        """Prometheus http_sd: the online agents' metrics endpoints, read on the event loop (called by HTTP threads)."""
        async def snapshot() -> list[SdAgent]:
            return [SdAgent(d.record.device_id, d.record.model, self.fleet.labels(d.record.device_id).get(GROUP_LABEL, ""),
                            d.metrics_address) for d in self.registry.list() if d.online]

        loop = self._loop
        assert loop is not None
        try:
            agents = asyncio.run_coroutine_threadsafe(snapshot(), loop).result(5.0)
        except (RuntimeError, concurrent.futures.TimeoutError):
            raise Unavailable("the controller is stopping", field="sd") from None
        return "application/json", json.dumps(sd_groups(agents)).encode()

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
        """The port of the /metrics endpoint, or None when it is not served."""
        return None if self._metrics_server is None else self._metrics_server.port

    @property
    def metrics_url(self) -> str | None:
        """``http(s)://HOST:PORT/metrics``, or None when metrics are not served."""
        return None if self._metrics_server is None else self._metrics_server.url

    async def _reap_loop(self) -> None:
        loop = asyncio.get_running_loop()
        tick_s = self.config.heartbeat_interval_s / 2
        while True:
            asked = loop.time()
            await asyncio.sleep(tick_s)
            # A controller that falls behind (a connection storm) reads heartbeats late: it must not take its own
            # lag for silent boards, or it drops sessions whose agents dial again and make the storm worse.
            lag_s = loop.time() - asked - tick_s
            try:
                await self.sessions.reap(lag_s)
            except Exception:
                log.exception("reaper failed")

    async def stop(self, grace_s: float = 2.0) -> None:
        """Stop campaigns and sessions, stop serving (``grace_s`` for calls in flight), and close the store."""
        if self._health is not None:
            await self._health.stopping()
        if self._reaper:
            self._reaper.cancel()
        self._role_stop.set()
        if self._role_task is not None:
            await self._role_task
        await self._stop_acting()
        await self.router.close()
        self.registry.close_all()
        if self._server:
            await self._server.stop(grace_s)
        if self._metrics_server is not None:
            self._metrics_server.stop()
            self._metrics_server = None
        await self.role.release()
        self.store.close()
        if self._dir_lock is not None:
            self._dir_lock.release()
        log.info("controller stopped")
