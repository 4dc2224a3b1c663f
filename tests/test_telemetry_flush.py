"""Telemetry checked in blocks: the batches of many boards, deferred and checked together per layout, are kept
or refused exactly as one batch checked alone would be, in the order each board sent them, and a board's
last batches are kept before it goes offline."""

import asyncio
import math
from array import array

import pytest

from jetfleet.controller.config import ControllerConfig
from jetfleet.controller.metrics import ControllerMetrics
from jetfleet.controller.telemetry import TelemetryHub
from jetfleet.shared.catalog import get_catalog
from jetfleet.shared.columns import SCALARS, columns_from_samples
from jetfleet.shared.proto import agent_pb2
from jetfleet.twin.board import EmulatedBoard

from .harness import LabThread
from .hostile import RawAgent, hello, sample


def _trace(model: str, seed: int, n: int = 20):
    board = EmulatedBoard(model, seed)
    board.run_minibatches("resnet18", 30 + seed)
    return board.catalog, board.trace(board.now_s() - n * 0.1, board.now_s(), 0.1)[:n]


def _poison(cols, column: str, i: int, value: float) -> None:
    v = array("d")
    v.frombytes(cols.values)
    v[SCALARS.index(column) * cols.samples + i] = value
    cols.values = v.tobytes()


def test_blocks_of_many_boards_checked_together_keep_the_good_and_refuse_the_bad_by_field(monkeypatch):
    from jetfleet.controller import telemetry

    alone: list[int] = []   # blocks checked on their own: only the three bad ones
    check_alone = telemetry.check_columns
    monkeypatch.setattr(telemetry, "check_columns", lambda cols, cat, *a: alone.append(1) or check_alone(cols, cat, *a))

    async def run() -> None:
        metrics = ControllerMetrics()
        hub = TelemetryHub(ControllerConfig(), metrics, flush_s=3600)   # flushed by hand below
        refused: list[tuple[object, str]] = []
        hub.on_refused = lambda owner, e: refused.append((owner, e.field))
        kept: dict[str, list] = {}
        for k in range(24):                        # three models interleaved, two blocks per board
            model = ("agx-orin", "orin-nano", "agx-xavier")[k % 3]
            catalog, samples = _trace(model, k)
            dev = f"{model}-{k}"
            first, second = columns_from_samples(samples[:10]), columns_from_samples(samples[10:])
            kept[dev] = samples
            if k == 7:
                _poison(second, "total_w", 4, math.nan)
                kept[dev] = samples[:10]
            if k == 11:
                _poison(first, "cores_online", 2, 2.5)
                kept[dev] = samples[10:]
            if k == 16:
                second.rails[0] = "VDD_FAKE"
                kept[dev] = samples[:10]
            for cols in (first, second):
                hub.defer(dev, catalog, agent_pb2.TelemetryBatch(columns=cols), owner=(dev, cols is first))
        assert hub.window("agx-xavier-5") == []    # nothing kept before the flush
        hub.flush()
        assert len(alone) == 3, "the good blocks were not checked together"
        assert refused == [(("orin-nano-7", False), "telemetry.columns.total_w"),
                           (("agx-xavier-11", True), "telemetry.columns.cores_online"),
                           (("orin-nano-16", False), "telemetry.columns.rails_w")]
        for dev, samples in kept.items():
            got = hub.window(dev)
            assert [s.t_s for s in got] == [s.t_s for s in samples], dev
            assert [s.total_w for s in got] == [s.total_w for s in samples], dev
            assert hub.lowest_w(dev) == min(s.total_w for s in samples), dev
            assert hub.last_w(dev) == samples[-1].total_w, dev
            assert metrics.registry.get_sample_value("jetfleet_telemetry_samples_total", {"device": dev}) == len(samples)
            model = dev.rsplit("-", 1)[0]
            assert metrics.registry.get_sample_value("jetfleet_board_power_watts",
                                                     {"device": dev, "board_model": model}) == samples[-1].total_w

    asyncio.run(run())


def test_a_deferred_batch_is_kept_within_the_flush_interval_with_nothing_else_happening():
    async def run() -> None:
        hub = TelemetryHub(ControllerConfig(), ControllerMetrics(), flush_s=0.05)
        catalog, samples = _trace("orin-nano", 3)
        seen = hub.watch("nano")   # gets every sample kept from now on
        hub.defer("nano", catalog, agent_pb2.TelemetryBatch(columns=columns_from_samples(samples)), owner=None)
        assert (await asyncio.wait_for(seen.get(), 10)).t_s == samples[0].t_s
        assert len(hub.window("nano")) == len(samples)

    asyncio.run(run())


def test_a_protocol_1_batch_after_deferred_columns_keeps_the_boards_order():
    async def run() -> None:
        hub = TelemetryHub(ControllerConfig(), ControllerMetrics(), flush_s=3600)
        cat = get_catalog("tx2")
        hub.defer("tx2", cat, agent_pb2.TelemetryBatch(columns=columns_from_samples([sample(cat, 1.0)])), None)
        hub.defer("tx2", cat, agent_pb2.TelemetryBatch(samples=[sample(cat, 2.0)]), None)
        assert [s.t_s for s in hub.window("tx2")] == [1.0, 2.0]

    asyncio.run(run())


@pytest.mark.parametrize("how", ["closes its stream", "falls silent (the reaper)"])
def test_the_last_batch_a_board_sent_is_kept_before_it_goes_offline(tmp_path, how):
    lt = LabThread(str(tmp_path / "data"), []).start()
    try:
        lt.telemetry.flush_s = 3600   # only going offline can keep the batch in time
        cat = get_catalog("tx2")
        samples = [sample(cat, 1.0 + i / 10, total_w=7.0 + i) for i in range(5)]

        async def run() -> RawAgent:
            agent = RawAgent(lt.address)
            await agent.open(hello("raw-last", "tx2"))
            agent.send(agent_pb2.AgentMessage(telemetry=agent_pb2.TelemetryBatch(
                columns=columns_from_samples(samples))))
            if how == "closes its stream":
                agent.send(None)   # the agent ends its stream; the controller then ends the session
                with pytest.raises(EOFError):
                    while True:
                        await agent.read()
            return agent           # falls silent: the stream stays open, the heartbeats stop

        agent = lt.call(run(), timeout_s=30)
        # read on the lab's loop (lt.online): the board is offline only once its going offline is whole
        lt.wait(lambda: lt.do(lambda: "raw-last" in lt.registry.devices) and not lt.online("raw-last"), 30,
                "the board offline")
        reg = lt.lab.controller.metrics.registry
        assert reg.get_sample_value("jetfleet_telemetry_samples_total", {"device": "raw-last"}) == 5
        assert reg.get_sample_value("jetfleet_board_power_watts", {"device": "raw-last", "board_model": "tx2"}) is None
        assert lt.do(lambda: lt.telemetry.lowest_w("raw-last")) == 7.0
        lt.call(agent.close(), timeout_s=30)
    finally:
        lt.close()


def test_a_block_naming_rails_the_board_lacks_is_refused_alone_even_first_of_its_layout(monkeypatch):
    """Blocks are grouped by catalog, samples and how many rails and sensors they name; the first block of a group
    names its layout. One naming a rail its board lacks, first in the flush, is checked (and refused) alone: it
    neither names the group's layout nor sends the good blocks of the same shape to be checked one by one."""
    from jetfleet.controller import telemetry

    alone: list[int] = []
    check_alone = telemetry.check_columns
    monkeypatch.setattr(telemetry, "check_columns", lambda cols, cat, *a: alone.append(1) or check_alone(cols, cat, *a))

    async def run() -> None:
        hub = TelemetryHub(ControllerConfig(), ControllerMetrics(), flush_s=3600)
        refused: list[tuple[object, str]] = []
        hub.on_refused = lambda owner, e: refused.append((owner, e.field))
        for k in range(6):
            catalog, samples = _trace("agx-orin", k, 10)
            cols = columns_from_samples(samples)
            if k in (0, 3):
                cols.rails[1] = "VDD_FAKE"
            hub.defer(f"agx-orin-{k}", catalog, agent_pb2.TelemetryBatch(columns=cols), owner=k)
        hub.flush()
        assert refused == [(0, "telemetry.columns.rails_w"), (3, "telemetry.columns.rails_w")]
        assert len(alone) == 2
        assert all(len(hub.window(f"agx-orin-{k}")) == 10 for k in (1, 2, 4, 5))

    asyncio.run(run())
