"""The fleet end to end: controller + fake agents (real agent code, emulated boards) on port 0,
driven through the real operator client."""

import asyncio
import math
import random

import grpc
import pytest

from jetfleet.client import OperatorClient
from jetfleet.lab import FakeAgent
from jetfleet.shared.backoff import backoff_delay_s
from jetfleet.shared.catalog import get_catalog
from jetfleet.shared.errors import FailedPrecondition, InvalidArgument, NotFound, Unavailable
from jetfleet.shared.proto import agent_pb2, agent_pb2_grpc, common_pb2
from jetfleet.twin.board import EmulatedBoard

from .harness import FAST_AGENT, LabThread

BOARDS = ["agx-orin", "agx-xavier", "orin-nano"]


@pytest.fixture
def lab(store_spec):
    lt = LabThread(store_spec, BOARDS).start()
    yield lt
    lt.close()


def client(lab: LabThread) -> OperatorClient:
    return OperatorClient(lab.address, timeout_s=10)


def test_devices_modes_and_telemetry(lab):
    with client(lab) as c:
        devices = c.list_devices()
        assert [(d.device_id, d.model, d.online) for d in devices] == [
            ("agx-orin-0", "agx-orin", True), ("agx-xavier-1", "agx-xavier", True), ("orin-nano-2", "orin-nano", True)]
        assert [d.device_id for d in c.list_devices("orin-nano")] == ["orin-nano-2"]
        r = c.set_mode("agx-xavier-1", "MODE_15W")
        assert (r.confirmed.cores, r.confirmed.cpu_mhz, r.confirmed.mem_mhz) == (4, 1190.4, 1331.2)
        board = lab.lab.agents[1].board
        assert board.read_mode() == get_catalog("agx-xavier").presets["MODE_15W"]
        d = c.get_device("agx-xavier-1")
        assert d.current_mode_name == "MODE_15W" and len(d.catalog.cpu_mhz) == 29
        samples = list(c.watch("agx-orin-0", 4))
        assert len(samples) == 4 and set(samples[0].rails_w) == set(get_catalog("agx-orin").rail_labels())
    # the mode change is in the store
    rec = lab.do(lambda: lab.lab.controller.store.get_device("agx-xavier-1"))
    assert rec.current_mode == "4/1190.4/675.75/1331.2"
    window = lab.do(lambda: len(lab.telemetry.window("agx-orin-0")))
    assert 0 < window <= lab.lab.config.telemetry_window


def test_mode_outside_the_catalog_is_refused_and_the_board_is_unchanged(lab):
    board = lab.lab.agents[0].board
    before = board.read_mode()
    with client(lab) as c:
        with pytest.raises(InvalidArgument) as e:
            c.set_mode("agx-orin-0", "12/2201.6/1400/3199")
        assert "gpu_mhz=1400" in e.value.message and "1300.5" in e.value.message
        with pytest.raises(InvalidArgument, match="cores=13 .* nearest allowed: 11, 12"):
            c.set_mode("agx-orin-0", "13/2201.6/1300.5/3199")
        with pytest.raises(NotFound, match="unknown device 'tk1'"):
            c.set_mode("tk1", "MAXN")
        with pytest.raises(NotFound):
            c.get_device("tk1")
    assert board.read_mode() == before


def test_the_agent_refuses_a_mode_outside_its_own_catalog(lab):
    """Even if a controller sends one (trust nothing): the board is not touched."""
    agent = lab.lab.agents[0]
    cmd = agent_pb2.Command(command_id="x1", set_mode=agent_pb2.SetMode(
        mode=common_pb2.PowerMode(cores=12, cpu_mhz=9999, gpu_mhz=1300.5, mem_mhz=3199)))
    result = lab.call(agent.link.executor.execute(cmd))
    assert not result.ok and result.error.code == "INVALID_ARGUMENT" and result.error.field == "cpu_mhz"
    assert agent.board.read_mode() == get_catalog("agx-orin").maxn


def test_commands_are_idempotent_by_request_id(lab):
    agent = lab.lab.agents[2]
    calls = []
    original = agent.board._write_mode
    agent.board._write_mode = lambda m: (calls.append(m), original(m))[1]
    with client(lab) as c:
        a = c.set_mode("orin-nano-2", "7W", request_id="req-42")
        b = c.set_mode("orin-nano-2", "7W", request_id="req-42")
        assert a.command_id == b.command_id == "req-42"
        with pytest.raises(FailedPrecondition, match="already used for a different request: set_mode 4/960/408/2133 on "
                                                     "orin-nano-2; this one is set_mode 12/2201.6/1300.5/3199 on agx-orin-0"):
            c.set_mode("agx-orin-0", "MAXN", request_id="req-42")
        with pytest.raises(FailedPrecondition, match="set_mode 6/1510.4/624.75/2133 on orin-nano-2"):
            c.set_mode("orin-nano-2", "MAXN", request_id="req-42")  # same board, another mode
    assert len(calls) == 1
    # the agent also answers a repeated id from memory without touching the board
    cmd = agent_pb2.Command(command_id="req-42", set_mode=agent_pb2.SetMode(
        mode=common_pb2.PowerMode(cores=6, cpu_mhz=1510.4, gpu_mhz=624.75, mem_mhz=2133)))
    assert lab.call(agent.link.executor.execute(cmd)).confirmed_mode.cores == 4
    assert len(calls) == 1


def test_controller_restart_agents_reconnect_and_state_survives(lab):
    with client(lab) as c:
        c.set_mode("agx-orin-0", "30W")
    lab.call(lab.lab.stop_controller())
    lab.call(lab.lab.start_controller())
    lab.wait(lambda: all(d.online for d in lab.registry.devices.values()) and len(lab.registry.devices) == 3,
             timeout_s=10, what="agents to reconnect")
    with client(lab) as c:
        d = c.get_device("agx-orin-0")
        assert d.online and d.current_mode_name == "MODE_30W"   # NVIDIA's name for what 30W asked
        assert c.set_mode("agx-orin-0", "MAXN").confirmed.cores == 12
    events = lab.do(lambda: lab.lab.controller.store.list_events("agx-orin-0"))
    assert [e.kind for e in events][:2] == ["mode", "online"] and "offline" in [e.kind for e in events]


def test_a_crashed_agents_broken_stream_takes_its_board_offline_and_back_online(lab):
    agent = lab.lab.agents[1]
    # a crash, not a clean shutdown: cancel the task, the stream breaks without a goodbye
    lab.do(lambda: agent.task.cancel())
    lab.wait(lambda: not lab.registry.devices["agx-xavier-1"].online, timeout_s=5, what="offline")
    with client(lab) as c:
        assert not c.get_device("agx-xavier-1").online
        with pytest.raises(Unavailable, match="offline"):
            c.set_mode("agx-xavier-1", "MAXN")
    lab.do(agent.start)
    lab.wait(lambda: lab.registry.devices["agx-xavier-1"].online, timeout_s=5, what="back online")


def test_missed_heartbeats_alone_mark_a_board_offline(lab):
    """A board whose stream stays open but which stops talking (a hung agent, a half-open TCP connection):
    the agent says hello and then nothing; its stream is never closed."""
    from .hostile import RawAgent, hello

    a = RawAgent(lab.address)
    lab.call(a.open(hello("hung-1")))
    assert lab.online("hung-1")
    lab.wait(lambda: not lab.online("hung-1"), timeout_s=5, what="reaped")
    events = lambda: lab.do(lambda: lab.lab.controller.store.list_events("hung-1"))  # noqa: E731
    lab.wait(lambda: events()[0].kind == "offline", timeout_s=5, what="the offline event")
    assert events()[0].detail == "no heartbeat for 0.6 s"  # not "stream closed"
    lab.call(a.close())


def test_a_controller_behind_on_its_own_work_does_not_take_its_lag_for_silent_boards(lab):
    """A heartbeat the controller read late because it was busy (its reaper ran late by lag_s) is not a silent
    board: each board gets that much longer; without the lag the same board is reaped."""
    registry = lab.registry
    live = registry.devices["agx-orin-0"]
    offline_after = lab.lab.controller.config.offline_after_s

    async def stale_by(extra_s: float, lag_s: float) -> list[str]:
        live.session.last_seen = registry.clock() - offline_after - extra_s
        return await registry.reap(lag_s)

    assert lab.call(stale_by(1.0, lag_s=2.0)) == [] and lab.online("agx-orin-0")
    assert lab.call(stale_by(1.0, lag_s=0.0)) == ["agx-orin-0"] and not lab.online("agx-orin-0")
    lab.wait(lambda: lab.online("agx-orin-0"), timeout_s=10, what="the agent back")


def test_two_agents_claiming_one_id(lab):
    impostor = FakeAgent(EmulatedBoard("agx-orin", 99), lab.lab.agents[0].config)
    lab.do(impostor.start)
    lab.wait(lambda: any("already connected" in n.message for n in impostor.link.notices), timeout_s=5,
             what="ALREADY_EXISTS")
    assert lab.online("agx-orin-0")
    assert lab.do(lambda: lab.registry.devices["agx-orin-0"].record.serial) == "EMU-agx-orin-0000"
    lab.call(impostor.stop())


async def _raw_session(address: str, messages, read: int = 2):
    async with grpc.aio.insecure_channel(address) as ch:
        q: asyncio.Queue = asyncio.Queue()
        for m in messages:
            q.put_nowait(m)

        async def gen():
            while True:
                m = await q.get()
                if m is None:
                    return
                yield m

        call = agent_pb2_grpc.AgentLinkStub(ch).Session(gen())
        got = []
        for _ in range(read):
            got.append(await asyncio.wait_for(call.read(), 5))
        q.put_nowait(None)
        return got, call


def _hello(device_id: str, model: str = "tx2", serial: str = "RAW1") -> agent_pb2.AgentMessage:
    from jetfleet.shared.convert import catalog_to_pb

    cat = get_catalog(model)
    return agent_pb2.AgentMessage(hello=agent_pb2.Hello(
        board=common_pb2.BoardInfo(device_id=device_id, model=model, serial=serial, catalog=catalog_to_pb(cat)),
        protocol=1))


def _batch(n: int, rails=None, value: float = 5.0) -> agent_pb2.AgentMessage:
    rails = rails or {"VDD_IN": value}
    s = common_pb2.TelemetrySample(t_s=1.0, rails_w=rails, total_w=value)
    return agent_pb2.AgentMessage(telemetry=agent_pb2.TelemetryBatch(samples=[s] * n))


def test_oversized_and_malformed_messages_are_refused_and_the_session_survives(lab):
    msgs = [_hello("raw-1"), _batch(5000), _batch(1, {"VDD_FAKE": 1.0}), _batch(1, value=math.nan),
            agent_pb2.AgentMessage(), _hello("raw-1"), _batch(3)]
    got, _ = lab.call(_raw_session(lab.address, msgs, read=6))
    assert got[0].WhichOneof("kind") == "welcome"
    notices = [g.notice.error for g in got[1:]]
    assert [n.field for n in notices] == ["telemetry.samples", "telemetry.samples.rails_w", "telemetry.samples.total_w",
                                          "kind", "hello"]
    assert "5000 samples exceeds the limit of 2000" in notices[0].message
    assert all(n.code == "INVALID_ARGUMENT" for n in notices)
    lab.wait(lambda: lab.telemetry.last("raw-1") is not None, what="the good batch after the bad")


def test_a_session_must_start_with_a_valid_hello(lab):
    with pytest.raises(grpc.aio.AioRpcError) as e:
        lab.call(_raw_session(lab.address, [_batch(1)], read=1))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "first message" in e.value.details()
    bad = _hello("has space")
    with pytest.raises(grpc.aio.AioRpcError) as e:
        lab.call(_raw_session(lab.address, [bad], read=1))
    assert "device_id" in e.value.details()


def test_a_message_over_the_transport_limit_ends_only_that_stream(lab):
    big = _hello("raw-2")
    big.hello.board.software["blob"] = "x" * (5 * 1024 * 1024)
    with pytest.raises(grpc.aio.AioRpcError) as e:
        lab.call(_raw_session(lab.address, [big], read=1))
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert all(lab.online(d) for d in ("agx-orin-0", "agx-xavier-1", "orin-nano-2"))


def test_run_training_and_cancel_through_the_executor(lab):
    agent = lab.lab.agents[0]
    train = agent_pb2.Command(command_id="t1", run_training=agent_pb2.RunTraining(
        workload="resnet18", minibatches=25, minibatch_size=16, workers=4))
    r = lab.call(agent.link.executor.execute(train))
    assert r.ok and len(r.training.minibatch_times_s) == 25 and r.training.end_s > r.training.start_s
    bad = agent_pb2.Command(command_id="t2", run_training=agent_pb2.RunTraining(workload="bash", minibatches=1))
    r = lab.call(agent.link.executor.execute(bad))
    assert not r.ok and r.error.code == "NOT_FOUND" and "registered" in r.error.message


def test_cancel_stops_a_running_training():
    async def scenario():
        from jetfleet.agent.executor import CommandExecutor

        board = EmulatedBoard("agx-orin", 0, speed=20.0)  # 400 minibatches x 55 ms / 20 = ~1 s of wall time
        ex = CommandExecutor(board)
        train = agent_pb2.Command(command_id="long", run_training=agent_pb2.RunTraining(
            workload="resnet18", minibatches=400, minibatch_size=16, workers=4))
        task = asyncio.create_task(ex.execute(train))
        while "long" not in ex._cancel:  # the training has started
            await asyncio.sleep(0)
        cancel = agent_pb2.Command(command_id="c", cancel=agent_pb2.Cancel(target_command_id="long"))
        cancelled = await ex.execute(cancel)
        result = await task
        return cancelled, result

    cancelled, result = asyncio.run(scenario())
    assert cancelled.ok and cancelled.cancelled
    assert not result.ok and result.error.code == "CANCELLED"


def test_backoff_is_jittered_exponential_and_capped():
    rng = random.Random(1)
    delays = [[backoff_delay_s(a, base_s=0.5, max_s=30, rng=rng) for _ in range(200)] for a in range(10)]
    assert all(0 <= d <= min(30, 0.5 * 2**a) for a, ds in enumerate(delays) for d in ds)
    assert max(delays[9]) > 20 and len({round(d, 6) for d in delays[3]}) > 150


def test_agents_buffer_while_disconnected_and_bound_the_buffer(tmp_path):
    """No controller at all: the agent keeps sampling into a bounded buffer and keeps retrying."""
    async def scenario():
        from dataclasses import replace

        from jetfleet.agent.link import AgentLink

        cfg = replace(FAST_AGENT, controller="127.0.0.1:9", max_buffer_samples=10, sample_interval_s=0.01)
        taken = []
        enough = asyncio.Event()

        def on_sample(s):
            taken.append(s)
            if len(taken) >= 25 and link.attempts >= 2:
                enough.set()

        link = AgentLink(EmulatedBoard("tx2", 0), cfg, on_sample=on_sample)
        stop = asyncio.Event()
        task = asyncio.create_task(link.run(stop))
        await asyncio.wait_for(enough.wait(), 10)
        stop.set()
        await task
        return link

    link = asyncio.run(scenario())
    assert len(link.buffer) == 10 and link.dropped >= 15 and link.sessions == 0 and link.attempts >= 2

