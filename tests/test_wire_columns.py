"""Samples as columns and heartbeats folded into batches: what a controller that reads them gets, checked
per batch with the same bounds as one sample; agents and controllers of protocol 1 without them still work."""

import asyncio
import math

import pytest
from google.protobuf.message import Message

from jetfleet.controller.campaigns.results import BadResult, check_profile_result, profile_record
from jetfleet.controller.columns_check import check_columns
from jetfleet.shared.catalog import get_catalog
from jetfleet.shared.columns import columns_from_samples
from jetfleet.shared.convert import check_sample, mode_to_pb, sample_to_pb
from jetfleet.shared.errors import InvalidArgument
from jetfleet.shared.proto import agent_pb2
from jetfleet.twin.board import EmulatedBoard

from .harness import LabThread
from .hostile import RawAgent, hello, sample


def _twin_samples(n: int = 12):
    board = EmulatedBoard("agx-orin", 1)
    board.run_minibatches("resnet18", 60)
    return board, board.trace(board.now_s() - n * 0.1, board.now_s(), 0.1)[:n]


def test_a_block_from_the_twin_passes_the_controllers_check():
    board, samples = _twin_samples()
    assert check_columns(columns_from_samples(samples), board.catalog) == len(samples)


def _set(cols, name: str, i: int, value: float) -> None:
    """Change the ``i``-th number of a column of a block (``name``: a scalar, 'rails_w' or 'temps_c')."""
    from array import array

    from jetfleet.shared.columns import SCALARS

    v = array("d")
    v.frombytes(cols.values)
    n = cols.samples
    base = {**{k: j * n for j, k in enumerate(SCALARS)}, "rails_w": len(SCALARS) * n,
            "temps_c": (len(SCALARS) + len(cols.rails)) * n}[name]
    v[base + i] = value
    cols.values = v.tobytes()


@pytest.mark.parametrize(("change", "field"), [
    (lambda c: _set(c, "total_w", 3, math.nan), "telemetry.columns.total_w"),
    (lambda c: _set(c, "rails_w", 5, 1e6), "telemetry.columns.rails_w[VDD_CPU_CV]"),
    (lambda c: _set(c, "cores_online", 0, 99), "telemetry.columns.cores_online"),
    (lambda c: _set(c, "cores_online", 1, 2.5), "telemetry.columns.cores_online"),
    (lambda c: _set(c, "temps_c", 1, -1e308), "telemetry.columns.temps_c[gpu]"),
    (lambda c: _set(c, "t_s", 0, -1.0), "telemetry.columns.t_s"),
    (lambda c: c.rails.__setitem__(0, "VDD_FAKE"), "telemetry.columns.rails_w"),
    (lambda c: setattr(c, "values", c.values[:-8]), "telemetry.columns.values"),
    (lambda c: c.rails.__setitem__(1, c.rails[0]), "telemetry.columns.rails"),
])
def test_a_bad_value_in_columns_is_refused_naming_the_field_a_sample_would(change, field):
    board, samples = _twin_samples()
    cols = columns_from_samples(samples)
    change(cols)
    with pytest.raises(InvalidArgument) as e:
        check_columns(cols, board.catalog)
    assert e.value.field == field


def _result(columns: bool, board: EmulatedBoard, samples) -> agent_pb2.ProfileResult:
    p = agent_pb2.ProfileResult(workload="resnet18", mode=mode_to_pb(board.read_mode()), minibatch_times_s=[0.058] * 40,
                                steady_state_found=True, window_start_s=samples[0].t_s, window_end_s=samples[-1].t_s)
    if columns:
        p.power_columns.CopyFrom(columns_from_samples(samples))
    else:
        p.power.extend(sample_to_pb(s) for s in samples)
    return p


def test_a_profile_result_reads_the_same_either_way_and_a_bad_one_is_refused():
    board, samples = _twin_samples()
    mode = str(board.read_mode())
    records = []
    for columns in (False, True):
        p = _result(columns, board, samples)
        check_profile_result(p, board.catalog, mode, "resnet18", 40)
        records.append(profile_record("c", "resnet18", "d", "agx-orin", mode, p))
    assert records[0].power_w == records[1].power_w and records[1].power_samples == len(samples)
    p = _result(True, board, samples)
    _set(p.power_columns, "gpu_util", 2, 2.0)
    with pytest.raises(BadResult) as e:
        check_profile_result(p, board.catalog, mode, "resnet18", 40)
    assert e.value.field == "result.profile.power_columns.gpu_util"
    check_sample(sample_to_pb(samples[2]), board.catalog)  # the sample itself was fine


@pytest.fixture
def lab(tmp_path):
    lt = LabThread(str(tmp_path / "data"), ["agx-orin"]).start()
    yield lt
    lt.close()


def test_the_real_agent_sends_columns_with_folded_heartbeats(lab):
    live = lab.registry.devices["agx-orin-0"]
    link = next(a.link for a in lab.lab.agents if a.link.device_id == "agx-orin-0")
    lab.wait(lambda: link.sessions >= 1, what="the agent welcomed")   # online is seen before the welcome is read
    assert link._columns and link._fold
    lab.wait(lambda: lab.telemetry.last("agx-orin-0") is not None, what="telemetry")
    chunks = lab.do(lambda: list(lab.telemetry._boards["agx-orin-0"].chunks))
    # kept as the columns that came, their numbers and names only (a parsed message would hold its whole arena)
    assert chunks and all(not isinstance(c, Message) and type(c.values) is bytes and type(c.rails) is tuple
                          and type(c.temps) is tuple for c, _ in chunks)
    assert lab.telemetry.window("agx-orin-0")[-1] == lab.telemetry.last("agx-orin-0")
    assert live.online


def test_folded_heartbeats_alone_keep_a_board_online_and_report_its_mode(lab):
    cat = get_catalog("tx2")
    low = cat.grid("full")[0]

    async def run() -> None:
        agent = RawAgent(lab.address)
        welcome = await agent.open(hello("raw-fold", "tx2"))
        assert welcome.welcome.columns and welcome.welcome.folded_heartbeats
        end = asyncio.get_running_loop().time() + 3 * lab.lab.controller.config.offline_after_s
        while asyncio.get_running_loop().time() < end:   # batches only, each carrying the heartbeat
            batch = agent_pb2.TelemetryBatch(columns=columns_from_samples([sample(cat, 2.0)]))
            batch.heartbeat.current_mode.CopyFrom(mode_to_pb(low))
            agent.send(agent_pb2.AgentMessage(telemetry=batch))
            await asyncio.sleep(0.1)
        assert lab.online("raw-fold")
        assert lab.registry.devices["raw-fold"].record.current_mode == str(low)
        await agent.close()

    lab.call(run(), timeout_s=60)


def test_an_agent_of_protocol_1_without_columns_or_folding_still_works(lab):
    cat = get_catalog("tx2")

    async def run() -> None:
        agent = RawAgent(lab.address)
        await agent.open(hello("raw-old", "tx2"))
        end = asyncio.get_running_loop().time() + 3 * lab.lab.controller.config.offline_after_s
        while asyncio.get_running_loop().time() < end:
            agent.send(agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat(t_s=1.0)))
            agent.send(agent_pb2.AgentMessage(telemetry=agent_pb2.TelemetryBatch(samples=[sample(cat, 3.0)])))
            await asyncio.sleep(0.1)
        assert lab.online("raw-old") and lab.telemetry.last("raw-old").t_s == 3.0
        await agent.close()

    lab.call(run(), timeout_s=60)
