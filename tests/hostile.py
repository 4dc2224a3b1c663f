"""A hand-written agent that speaks the wire protocol directly: it says and answers whatever a test
tells it to (a broken or hostile board), on the test lab's event loop."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from jetfleet.shared.catalog import Catalog, get_catalog
from jetfleet.shared.convert import catalog_to_pb, mode_to_pb
from jetfleet.shared.proto import agent_pb2, agent_pb2_grpc, common_pb2


def hello(device_id: str, model: str = "tx2", serial: str = "RAW1", catalog: Catalog | None = None,
          **board: Any) -> agent_pb2.AgentMessage:
    cat = catalog or get_catalog(model)
    return agent_pb2.AgentMessage(hello=agent_pb2.Hello(
        board=common_pb2.BoardInfo(device_id=device_id, model=model, serial=serial, catalog=catalog_to_pb(cat),
                                   **board),
        current_mode=mode_to_pb(cat.maxn), protocol=1))


def sample(catalog: Catalog, t_s: float = 1.0, **fields: Any) -> common_pb2.TelemetrySample:
    """A plausible sample of the board (5 W on each rail) with ``fields`` overridden."""
    rails = {r: 5.0 for r in catalog.rail_labels()}
    base: dict[str, Any] = dict(t_s=t_s, rails_w=rails, total_w=catalog.total_power_w(rails), cpu_mhz=1000.0,
                                gpu_mhz=500.0, mem_mhz=1600.0, cores_online=max(catalog.cores), cpu_util=0.5,
                                gpu_util=0.5, temps_c={"cpu": 40.0})
    base.update(fields)
    return common_pb2.TelemetrySample(**base)


class RawAgent:
    """One agent session driven by the test: ``send`` messages, ``read`` what the controller says."""

    def __init__(self, address: str) -> None:
        self.address = address
        self._out: asyncio.Queue[agent_pb2.AgentMessage | None] = asyncio.Queue()
        self._channel: grpc.aio.Channel | None = None
        self.call: Any = None

    async def open(self, first: agent_pb2.AgentMessage) -> agent_pb2.ControllerMessage:
        """Dial, send ``first`` (a hello) and return the controller's first answer (a welcome)."""
        self._channel = grpc.aio.insecure_channel(self.address)

        async def gen() -> Any:
            while True:
                m = await self._out.get()
                if m is None:
                    return
                yield m

        self.call = agent_pb2_grpc.AgentLinkStub(self._channel).Session(gen())
        self.send(first)
        return await self.read()

    def send(self, msg: agent_pb2.AgentMessage) -> None:
        self._out.put_nowait(msg)

    async def read(self, timeout_s: float = 10.0) -> agent_pb2.ControllerMessage:
        msg = await asyncio.wait_for(self.call.read(), timeout_s)
        if msg is grpc.aio.EOF:  # type: ignore[attr-defined]
            raise EOFError("the controller ended the session")
        return msg

    async def command(self, timeout_s: float = 10.0) -> agent_pb2.Command:
        """The next command, skipping notices and welcomes."""
        while True:
            msg = await self.read(timeout_s)
            if msg.WhichOneof("kind") == "command":
                return msg.command

    async def close(self) -> None:
        self._out.put_nowait(None)
        if self._channel is not None:
            await self._channel.close()
