"""The agent's side of columns and folded heartbeats, on the boards' Pythons too: a block holds the same samples
as messages, and an agent sends what its controller's welcome says it reads (protocol 1 to an older one)."""

from __future__ import annotations

import asyncio

import pytest

from jetfleet.agent.config import AgentConfig
from jetfleet.agent.link import AgentLink
from jetfleet.shared.columns import columns_from_samples, samples_from_columns
from jetfleet.shared.convert import sample_to_pb
from jetfleet.shared.proto import agent_pb2
from jetfleet.twin.board import EmulatedBoard

pytestmark = pytest.mark.boards


def _twin_samples(n: int = 12):
    board = EmulatedBoard("agx-orin", 1)
    board.run_minibatches("resnet18", 60)
    return board, board.trace(board.now_s() - n * 0.1, board.now_s(), 0.1)[:n]


def test_columns_hold_the_same_samples_as_messages():
    board, samples = _twin_samples()
    cols = columns_from_samples(samples)
    assert cols is not None and list(cols.rails) == list(samples[0].rails_w)
    assert samples_from_columns(cols) == [sample_to_pb(s) for s in samples]
    assert samples_from_columns(cols, 10) == [sample_to_pb(s) for s in samples[10:]]
    assert cols.ByteSize() < 0.6 * sum(sample_to_pb(s).ByteSize() for s in samples)   # labels once, not per sample
    # samples that do not share one set of rails are sent one message each
    odd = samples[:2] + [type(samples[0])(**{**samples[2].__dict__, "rails_w": {"VDD_GPU_SOC": 1.0}})]
    assert columns_from_samples(odd) is None


def test_the_agent_sends_samples_and_heartbeats_apart_to_a_controller_that_did_not_say_it_reads_more():
    async def run() -> list[str]:
        board = EmulatedBoard("orin-nano", 2)
        link = AgentLink(board, AgentConfig(device_id="old-ctl"))
        link._welcome(agent_pb2.Welcome(heartbeat_interval_s=0.1, telemetry_interval_s=0.1))   # an older controller
        assert not link._columns and not link._fold and not link.executor.columns
        for _ in range(3):
            link.buffer.append(board.sample())
        outq: asyncio.Queue = asyncio.Queue()
        tasks = [asyncio.create_task(link._send_loop(outq)), asyncio.create_task(link._heartbeat_loop(outq))]
        got = []
        while len(got) < 4:
            got.append(await asyncio.wait_for(outq.get(), 5))
        for t in tasks:
            t.cancel()
        batches = [m.telemetry for m in got if m.WhichOneof("kind") == "telemetry"]
        assert batches and len(batches[0].samples) == 3 and not batches[0].HasField("columns")
        assert not any(b.HasField("heartbeat") for b in batches)
        return [m.WhichOneof("kind") for m in got]

    loop = asyncio.new_event_loop()   # not asyncio.run: it leaves 3.8's main thread without a current loop
    try:
        kinds = loop.run_until_complete(run())
    finally:
        loop.close()
    assert kinds.count("heartbeat") >= 2
