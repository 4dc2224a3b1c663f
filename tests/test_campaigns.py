"""Profiling campaigns end to end on fake agents: failures never lose or repeat a measurement."""

from collections import Counter
from dataclasses import replace

import pytest

from jetfleet.agent.profiler import ProfileRequest, find_steady_state, profile
from jetfleet.client import OperatorClient
from jetfleet.shared.catalog import get_catalog
from jetfleet.shared.errors import FailedPrecondition, InvalidArgument, NotFound
from jetfleet.twin.board import EmulatedBoard

from .harness import FAST_AGENT, LabThread, wait_until

SLOW = 60.0  # board-time acceleration: a resnet18 profile takes ~0.1 s of wall time, so failures land mid-run


@pytest.fixture
def lab3(store_spec):
    lt = LabThread(store_spec, [])
    lt.lab.speed = SLOW
    lt.start()
    for _ in range(3):
        lt.do(lambda: lt.lab.add_agent("agx-orin"))
    lt.call(lt.lab.wait_online(3))
    yield lt
    lt.close()


def wait_done(c: OperatorClient, cid: str, timeout_s: float = 90):
    wait_until(lambda: c.get_campaign(cid).status in ("done", "cancelled"), timeout_s, f"campaign {cid} to finish")
    return c.get_campaign(cid)


def exactly_once(lab: LabThread, cid: str, modes: int) -> None:
    store = lab.lab.controller.store
    rows = lab.do(lambda: store.query_profiles(source=cid, with_raw=True))
    assert len(rows) == modes
    assert Counter(r.mode for r in rows).most_common(1)[0][1] == 1
    for r in rows:
        assert len(r.raw["minibatch_times_s"]) == 40 and r.raw["power"] and r.power_samples == len(r.raw["power"])
    states = lab.do(lambda: store.campaign_modes(cid))
    assert {s.status for s in states} == {"done"}
    # the command that measured each mode is in the log, done, written with its result (in the same write)
    position = {s.mode: i for i, s in enumerate(states)}
    for r in rows:
        ids = [f"{cid}-{position[r.mode]}-{r.device_id}"] + [f"{cid}-{position[r.mode]}-{r.device_id}-r{k}"
                                                              for k in range(1, 4)]
        logged = [c for c in (lab.do(lambda i=i: store.get_command(i)) for i in ids) if c is not None]
        assert any(c.status == "done" and c.result.get("samples") == r.power_samples and c.result.get("compacted")
                   for c in logged), (r.mode, [(c.command_id, c.status) for c in logged])


def test_profiler_protocol_on_the_twin():
    board = EmulatedBoard("agx-orin", 3)
    p = profile(board, ProfileRequest("resnet18", get_catalog("agx-orin").maxn))
    assert p.steady_state_found and len(p.minibatch_times_s) == 40
    assert all(p.window_start_s <= s.t_s <= p.window_end_s for s in p.power) and len(p.power) >= 20
    assert 50 < p.summary.minibatch_time_median_ms < 62 and 42 < p.summary.power_mean_w < 56
    assert find_steady_state([5.0] * 10 + [6.0, 7.0]) == 11
    assert find_steady_state([5.0] * 30) is None
    with pytest.raises(InvalidArgument, match="warmup_s"):
        profile(board, ProfileRequest("resnet18", board.catalog.maxn, warmup_s=-1))


def test_board_model_campaign_shared_by_three_boards_survives_losing_one(lab3):
    with OperatorClient(lab3.address) as c:
        camp = c.create_campaign(workload="resnet18", board_model="agx-orin", modes="random:45", seed=4)
        lab3.wait(lambda: lab3.lab.controller.campaigns.runs[camp.campaign_id].count("done") >= 6, 30, "progress")
        lab3.do(lambda: lab3.lab.agents[1].task.cancel())  # a board dies mid-run
        done = wait_done(c, camp.campaign_id)
    assert (done.status, done.done, done.failed) == ("done", 45, 0)
    exactly_once(lab3, camp.campaign_id, 45)
    boards = Counter(r.device_id for r in lab3.do(lambda: lab3.lab.controller.store.query_profiles(
        source=camp.campaign_id)))
    assert set(boards) == {"agx-orin-0", "agx-orin-1", "agx-orin-2"} and boards["agx-orin-1"] < 15


def test_agent_killed_mid_campaign_and_brought_back(lab3):
    with OperatorClient(lab3.address) as c:
        camp = c.create_campaign(workload="lstm", device_id="agx-orin-2", modes="random:25", seed=1)
        lab3.wait(lambda: lab3.lab.controller.campaigns.runs[camp.campaign_id].count("done") >= 3, 30, "progress")
        agent = lab3.lab.agents[2]
        lab3.do(lambda: agent.task.cancel())
        lab3.wait(lambda: not lab3.online("agx-orin-2"), 5, "offline")
        lab3.do(agent.start)
        done = wait_done(c, camp.campaign_id)
    assert (done.done, done.failed) == (25, 0) and done.retries >= 1
    exactly_once(lab3, camp.campaign_id, 25)


def test_controller_restarted_mid_campaign(lab3):
    with OperatorClient(lab3.address) as c:
        camp = c.create_campaign(workload="resnet18", board_model="agx-orin", modes="random:40", seed=2)
        lab3.wait(lambda: lab3.lab.controller.campaigns.runs[camp.campaign_id].count("done") >= 5, 30, "progress")
    lab3.call(lab3.lab.stop_controller())
    lab3.call(lab3.lab.start_controller())
    with OperatorClient(lab3.address) as c:
        done = wait_done(c, camp.campaign_id)
    assert (done.status, done.done, done.failed) == ("done", 40, 0)
    exactly_once(lab3, camp.campaign_id, 40)


def test_pause_resume_cancel_and_progress(lab3):
    registry = lab3.lab.controller.metrics.registry

    def moved_on() -> float | None:   # what the stalled-campaign alert reads: set while the campaign runs
        return registry.get_sample_value("jetfleet_campaign_last_progress_timestamp_seconds",
                                         {"campaign": camp.campaign_id, "workload": "resnet18"})

    with OperatorClient(lab3.address) as c:
        camp = c.create_campaign(workload="resnet18", device_id="agx-orin-0", modes="random:30")
        lab3.wait(lambda: c.get_campaign(camp.campaign_id).done >= 2, 30, "progress")
        first = moved_on()
        assert first is not None and first >= camp.created_s
        lab3.wait(lambda: (moved_on() or 0) > first, 20, "the progress timestamp to move with the next mode")
        paused = c.control_campaign(camp.campaign_id, "pause")
        assert paused.status == "paused" and moved_on() is None   # a paused campaign is not stalled
        with pytest.raises(FailedPrecondition, match="paused; cannot pause"):
            c.control_campaign(camp.campaign_id, "pause")
        run = lab3.lab.controller.campaigns.runs[camp.campaign_id]
        # nothing is in flight and the driver has stopped: nothing can progress until a resume
        lab3.wait(lambda: c.get_campaign(camp.campaign_id).in_flight == 0 and run.task.done(), 10, "the pause")
        frozen = c.get_campaign(camp.campaign_id).done
        assert frozen < 30 and not run.tasks
        assert c.control_campaign(camp.campaign_id, "resume").status == "running"
        assert moved_on() is not None
        lab3.wait(lambda: c.get_campaign(camp.campaign_id).done > frozen, 20, "resumed progress")
        shown = c.get_campaign(camp.campaign_id)
        assert shown.eta_s >= 0 and shown.total == 30
        cancelled = c.control_campaign(camp.campaign_id, "cancel")
        assert cancelled.status == "cancelled" and moved_on() is None
        assert [x.campaign_id for x in c.list_campaigns()] == [camp.campaign_id]


def test_bad_campaigns_are_refused_and_nothing_is_stored(lab3):
    store = lab3.lab.controller.store
    with OperatorClient(lab3.address) as c:
        cases = [
            (dict(workload="gpt", board_model="agx-orin", modes="presets"), NotFound, "unknown workload"),
            (dict(workload="resnet18", board_model="agx-orin", modes="most"), InvalidArgument, "random:K"),
            (dict(workload="resnet18", board_model="agx-orin", modes="random:0"), InvalidArgument, "K must be"),
            (dict(workload="resnet18", board_model="agx-orin", modes="file:x", mode_list=["12/2201.6/1300.5/3000"]),
             InvalidArgument, "mem_mhz=3000"),
            (dict(workload="resnet18", modes="presets"), InvalidArgument, "exactly one target"),
            (dict(workload="resnet18", board_model="jetson-nano-2gb", modes="presets"), NotFound,
             "unknown board model"),
            (dict(workload="resnet18", device_id="ghost", modes="presets"), NotFound, "unknown device"),
            (dict(workload="resnet18", device_id="agx-orin-0", modes="presets", minibatches=0), None, None),
        ]
        for fields, err, needle in cases:
            if err is None:  # minibatches 0 means the default (40)
                assert c.create_campaign(**fields).minibatches == 40
                continue
            with pytest.raises(err, match=needle):
                c.create_campaign(**fields)
        with pytest.raises(NotFound, match="unknown campaign"):
            c.get_campaign("nope")
        with pytest.raises(InvalidArgument, match="pause, resume or cancel"):
            c.control_campaign(c.list_campaigns()[0].campaign_id, "explode")
    assert len(lab3.do(store.list_campaigns)) == 1


def test_a_result_for_an_unknown_command_is_refused(lab3):
    from jetfleet.shared.proto import agent_pb2

    from .test_fleet import _hello, _raw_session

    bogus = agent_pb2.AgentMessage(result=agent_pb2.CommandResult(command_id="campaign-that-never-was-0-x", ok=True))
    got, _ = lab3.call(_raw_session(lab3.address, [_hello("raw-9"), bogus], read=2))
    assert got[1].notice.error.field == "result.command_id"
    assert lab3.do(lambda: lab3.lab.controller.store.query_profiles()) == []


def test_fast_full_grid_campaign_with_an_instant_board(store_spec):
    lt = LabThread(store_spec, ["orin-nano"], agent=replace(FAST_AGENT)).start()
    try:
        with OperatorClient(lt.address) as c:
            camp = c.create_campaign(workload="mobilenet_v3", device_id="orin-nano-0", modes="powertrain",
                                     minibatches=10)
            done = wait_done(c, camp.campaign_id, 120)
        assert done.done == 900
        rows = lt.do(lambda: lt.lab.controller.store.query_profiles(board_model="orin-nano", workload="mobilenet_v3"))
        assert len(rows) == 900 and len({r.mode for r in rows}) == 900
    finally:
        lt.close()


def test_fake_agent_helper_stops_and_restarts_with_a_new_link(lab3):
    agent = lab3.lab.agents[0]
    first = agent.link
    lab3.call(agent.stop())
    assert agent.task is None
    lab3.wait(lambda: not lab3.online(agent.device_id), 5, "offline")
    lab3.do(agent.start)
    lab3.wait(lambda: lab3.online(agent.device_id) and agent.link.sessions == 1, 5, "online again, welcomed")
    assert agent.link is not first and first.sessions == 1
