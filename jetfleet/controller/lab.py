"""A lab in one process: a controller with the embedded store plus emulated agents (the real
agent code on emulated boards). What `jetfleet lab up`, the demo and the tests run."""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass, field, replace

from jetfleet.agent.config import AgentConfig
from jetfleet.agent.device.emulated import EmulatedBoard
from jetfleet.agent.link import AgentLink
from jetfleet.agent.metrics import AgentMetrics, serve
from jetfleet.controller.config import ControllerConfig
from jetfleet.controller.server import Controller

log = logging.getLogger(__name__)


@dataclass
class FakeAgent:
    """An emulated board with the real agent code, that can be stopped and started again."""

    board: EmulatedBoard
    config: AgentConfig
    with_metrics: bool = False
    link: AgentLink | None = None
    metrics: AgentMetrics | None = None
    metrics_port: int = 0
    stop_event: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    @property
    def device_id(self) -> str:
        return self.config.device_id

    def start(self) -> None:
        if self.with_metrics and self.metrics is None:  # one endpoint per board, kept across restarts
            self.metrics = AgentMetrics(self.board.catalog)
            server, _ = serve(self.metrics, 0)
            self.metrics_port = int(server.server_address[1])
        self.stop_event = asyncio.Event()
        self.link = AgentLink(self.board, self.config, metrics=self.metrics, metrics_port=self.metrics_port)
        self.task = asyncio.create_task(self.link.run(self.stop_event))

    async def stop(self) -> None:
        self.stop_event.set()
        if self.task:
            await asyncio.gather(self.task, return_exceptions=True)  # a crashed (cancelled) agent too
            self.task = None


class Lab:
    def __init__(self, config: ControllerConfig, boards: list[str], *, agent_config: AgentConfig | None = None,
                 speed: float = math.inf, seed: int = 0, agent_metrics: bool = False) -> None:
        self.agent_metrics = agent_metrics
        self.config = config
        self.agent_config = agent_config or AgentConfig()
        self.boards = boards
        self.speed = speed
        self.seed = seed
        self.controller: Controller | None = None
        self.agents: list[FakeAgent] = []

    @property
    def address(self) -> str:
        assert self.controller is not None
        host = self.config.listen.rpartition(":")[0]
        return f"{host}:{self.controller.port}"

    async def start_controller(self) -> Controller:
        self.controller = Controller(self.config)
        await self.controller.start()
        # a restarted controller must come back on the same port for the agents to find it
        self.config = replace(self.config, listen=self.address)
        return self.controller

    async def stop_controller(self, grace_s: float = 0.5) -> None:
        if self.controller:
            await self.controller.stop(grace_s)
            self.controller = None

    def add_agent(self, model: str, seed: int | None = None, device_id: str | None = None) -> FakeAgent:
        seed = self.seed + len(self.agents) if seed is None else seed
        board = EmulatedBoard(model, seed, speed=self.speed)
        cfg = replace(self.agent_config, controller=self.address, device_id=device_id or f"{model}-{seed}")
        agent = FakeAgent(board, cfg, with_metrics=self.agent_metrics)
        agent.start()
        self.agents.append(agent)
        return agent

    async def start(self) -> None:
        await self.start_controller()
        for model in self.boards:
            self.add_agent(model)

    async def wait_online(self, n: int | None = None, timeout_s: float = 10.0) -> None:
        want = len(self.agents) if n is None else n

        async def ready() -> None:
            while True:
                if self.controller and sum(d.online for d in self.controller.fleet.devices.values()) >= want:
                    return
                await asyncio.sleep(0.02)

        await asyncio.wait_for(ready(), timeout_s)

    async def stop(self) -> None:
        for a in self.agents:
            await a.stop()
        await self.stop_controller()
