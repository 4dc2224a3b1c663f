"""A lab in one process: a controller with the embedded store plus emulated agents (the real
agent code on emulated boards). What `jetfleet lab up`, the demo and the tests run."""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from jetfleet.agent.config import AgentConfig
from jetfleet.agent.link import AgentLink
from jetfleet.agent.metrics import AgentMetrics
from jetfleet.controller.config import ControllerConfig
from jetfleet.controller.server import Controller
from jetfleet.shared.catalog import Catalog
from jetfleet.shared.metrics_http import MetricsHttpConfig, MetricsServer
from jetfleet.shared.workloads import WorkloadRegistry
from jetfleet.twin.board import EmulatedBoard

log = logging.getLogger(__name__)


@dataclass
class FakeAgent:
    """An emulated board with the real agent code, that can be stopped and started again."""

    board: EmulatedBoard
    config: AgentConfig
    with_metrics: bool = False
    workloads: WorkloadRegistry | None = None    # the built-ins plus this board's plugins
    link: AgentLink | None = None
    metrics: AgentMetrics | None = None
    metrics_port: int = 0
    metrics_server: MetricsServer | None = None
    stop_event: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    @property
    def device_id(self) -> str:
        """The device id the agent registers with."""
        return self.config.device_id

    def start(self) -> None:
        """Run the agent's link in a task (and, the first time, serve its /metrics on a free port)."""
        if self.with_metrics and self.metrics is None:  # one endpoint per board, kept across restarts
            self.metrics = AgentMetrics(self.board.catalog, self.device_id)
            self.metrics_server = MetricsServer(self.metrics.registry, MetricsHttpConfig()).start()
            self.metrics_port = self.metrics_server.port
        self.stop_event = asyncio.Event()
        self.link = AgentLink(self.board, self.config, metrics=self.metrics, metrics_port=self.metrics_port,
                              workloads=self.workloads)
        self.task = asyncio.create_task(self.link.run(self.stop_event))

    async def stop(self) -> None:
        """Stop the link and wait for its task to end (a crashed one too); ``start`` brings it back."""
        self.stop_event.set()
        if self.task:
            await asyncio.gather(self.task, return_exceptions=True)  # a crashed (cancelled) agent too
            self.task = None

    def close(self) -> None:
        """Stop serving /metrics (after ``stop``; the agent is not started again)."""
        if self.metrics_server is not None:
            self.metrics_server.stop()
            self.metrics_server, self.metrics = None, None


class Lab:
    """A controller and emulated agents in one process; the boards get consecutive seeds from ``seed``."""

    def __init__(self, config: ControllerConfig, boards: list[str], *, agent_config: AgentConfig | None = None,
                 speed: float = math.inf, seed: int = 0, agent_metrics: bool = False,
                 workloads: WorkloadRegistry | None = None, session_dir: str = "") -> None:
        self.agent_metrics = agent_metrics
        self.session_dir = session_dir   # each board's training-session socket: DIR/DEVICE.sock ("" for none)
        self.workloads = workloads   # what every emulated board runs: the built-ins plus installed plugins
        self.config = config
        self.agent_config = agent_config or AgentConfig()
        self.boards = boards
        self.speed = speed
        self.seed = seed
        self.controller: Controller | None = None
        self.agents: list[FakeAgent] = []

    @property
    def address(self) -> str:
        """HOST:PORT of the running controller, the port it actually listens on."""
        assert self.controller is not None
        host = self.config.listen.rpartition(":")[0]
        return f"{host}:{self.controller.port}"

    async def start_controller(self) -> Controller:
        """Start the controller and pin its port, so a restarted controller comes back where the agents dial."""
        self.controller = Controller(self.config)
        await self.controller.start()
        # a restarted controller must come back on the same port for the agents to find it
        self.config = replace(self.config, listen=self.address)
        return self.controller

    async def stop_controller(self, grace_s: float = 0.5) -> None:
        """Stop the controller (the agents keep trying to reconnect)."""
        if self.controller:
            await self.controller.stop(grace_s)
            self.controller = None

    def add_agent(self, model: str, seed: int | None = None, device_id: str | None = None,
                  speed: float | None = None, catalog: Catalog | None = None, controller: str = "") -> FakeAgent:
        """Start an agent on a new emulated board of ``model`` (at the lab's ``speed`` unless given; offering only
        ``catalog``'s modes, if given); its device id defaults to MODEL-SEED. It dials ``controller`` if given (a
        proxy in front of the lab's controller, say), else the lab's controller."""
        seed = self.seed + len(self.agents) if seed is None else seed
        board = EmulatedBoard(model, seed, speed=self.speed if speed is None else speed, workloads=self.workloads,
                              catalog=catalog)
        cfg = replace(self.agent_config, controller=controller or self.address, device_id=device_id or f"{model}-{seed}")
        if self.session_dir:
            cfg = replace(cfg, session_socket=str(Path(self.session_dir) / f"{cfg.device_id}.sock"))
        agent = FakeAgent(board, cfg, with_metrics=self.agent_metrics, workloads=self.workloads)
        agent.start()
        self.agents.append(agent)
        return agent

    async def start(self) -> None:
        """Start the controller, then one agent per entry of ``boards``."""
        await self.start_controller()
        for model in self.boards:
            self.add_agent(model)

    async def wait_online(self, n: int | None = None, timeout_s: float = 10.0) -> None:
        """Wait until ``n`` boards (default: one per agent) are online at the controller, for at most ``timeout_s``."""
        want = len(self.agents) if n is None else n

        async def ready() -> None:
            while True:
                if self.controller and sum(d.online for d in self.controller.registry.devices.values()) >= want:
                    return
                await asyncio.sleep(0.02)

        await asyncio.wait_for(ready(), timeout_s)

    async def stop(self) -> None:
        """Stop every agent and its /metrics endpoint, then the controller."""
        for a in self.agents:
            await a.stop()
            a.close()
        await self.stop_controller()
