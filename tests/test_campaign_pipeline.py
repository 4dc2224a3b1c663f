"""Campaigns pipelined (issue 28, target 3): the next mode is on the board while the last is measured and stored,
every mode is still stored exactly once, and a cancel or pause with modes on the board stops cleanly. What the
board did is read from the agent's own executor (what it holds, what it answered), not from the controller. A mode the
board answers within ``link.ACK_AFTER_S`` goes back as its result alone (one message, not an ack and a result); a
longer one is acknowledged first (the agent's own count of acks says which)."""

from __future__ import annotations

import math
import threading

import pytest

from jetfleet.client import OperatorClient
from jetfleet.controller.campaigns import manager

from .harness import LabThread, wait_until
from .test_campaigns import SLOW, exactly_once, wait_done

MODES = 8
ON_BOARD = 2   # manager.PIPELINE_DEPTH (modes taking ~0.1 s): the mode running and the next one


def _lab(store_spec: str) -> LabThread:
    lt = LabThread(store_spec, [])
    lt.lab.speed = SLOW   # a resnet18 profile takes ~0.1 s of wall time: modes are on the board long enough to see
    lt.start()
    lt.do(lambda: lt.lab.add_agent("agx-orin"))
    lt.call(lt.lab.wait_online(1))
    return lt


def _executor(lab: LabThread):   # type: ignore[no-untyped-def]
    return lab.lab.agents[0].link.executor


def test_the_next_mode_waits_on_the_board_while_the_last_is_stored_and_each_is_stored_once(store_spec, monkeypatch):
    # no periodic wake-up of the driver: the board's pipeline is filled when a mode is handed out or answered, not
    # by the tick (a driver that sent one mode per wake-up had the second there only after the last was stored)
    monkeypatch.setattr(manager, "TICK_S", 3600.0)
    lab = _lab(store_spec)
    store = lab.lab.controller.store
    gate, storing = threading.Event(), threading.Event()
    record = store.record_results   # the campaign stores the results that arrive together in one write

    def gated(*args, **kwargs):   # type: ignore[no-untyped-def]
        storing.set()
        gate.wait(30)   # the real store's write, held back until the test has looked at the board
        return record(*args, **kwargs)

    store.record_results = gated
    try:
        with OperatorClient(lab.address) as c:
            camp = c.create_campaign(workload="resnet18", device_id="agx-orin-0", modes=f"random:{MODES}")
            wait_until(storing.is_set, 30, "the first result to be stored")
            ex = _executor(lab)
            # the board has the next modes in hand while the first one's write has not returned
            wait_until(lambda: len(ex.in_hand) == ON_BOARD, 30, "the next modes on the board")
            assert c.get_campaign(camp.campaign_id).done == 0
            gate.set()
            done = wait_done(c, camp.campaign_id)
        assert (done.status, done.done, done.failed) == ("done", MODES, 0)
        exactly_once(lab, camp.campaign_id, MODES)
        assert lab.lab.controller.leases.holder("agx-orin-0") is None   # the lease goes with the last mode
    finally:
        gate.set()
        lab.close()


def test_cancel_with_modes_on_the_board_stops_them_and_the_waiting_one_never_starts(store_spec):
    lab = _lab(store_spec)
    try:
        with OperatorClient(lab.address) as c:
            camp = c.create_campaign(workload="resnet18", device_id="agx-orin-0", modes="random:30")
            ex = _executor(lab)
            wait_until(lambda: len(ex.in_hand) == ON_BOARD, 30, "two modes on the board")
            held = ex.in_hand
            assert c.control_campaign(camp.campaign_id, "cancel").status == "cancelled"
            wait_until(lambda: not ex.in_hand, 30, "the board to let go of every mode")
            # What the board answered for each mode (its own memory). The cancel came with the two modes seen in
            # hand, or, the board having moved on meanwhile, one running and the next sent after it or not sent yet
            # (the pipeline is refilled as each mode ends): the one running is stopped mid-way, a waiting one never
            # starts, nothing is sent after the cancel.
            last = int(held[-1].split("-")[1])   # the board answers every mode it held
            answers = {pos: ex.remembered(f"{camp.campaign_id}-{pos}-agx-orin-0") for pos in range(30)}
            stopped = [p for p, a in answers.items() if a is not None and "cancelled after" in a.error.message]
            waiting = [p for p, a in answers.items() if a is not None and "before it started" in a.error.message]
            assert len(stopped) <= 1 and len(waiting) <= 1, answers   # a second mode stopped mid-way had started
            assert all(not answers[p].ok and answers[p].error.code == "CANCELLED" for p in waiting), answers
            answered = max(p for p, a in answers.items() if a is not None)
            assert answered >= last and answered <= max(stopped + waiting, default=answered), answers
            wait_until(lambda: c.get_campaign(camp.campaign_id).in_flight == 0, 10, "nothing in flight")
            final = c.get_campaign(camp.campaign_id)
        assert final.status == "cancelled" and final.done < 30
        rows = lab.do(lambda: lab.lab.controller.store.query_profiles(source=camp.campaign_id))
        assert len(rows) == final.done == len({r.mode for r in rows})
        assert lab.lab.controller.leases.holder("agx-orin-0") is None
    finally:
        lab.close()


def test_pause_with_modes_on_the_board_stores_what_they_measured_once_and_resume_finishes(store_spec):
    lab = _lab(store_spec)
    try:
        with OperatorClient(lab.address) as c:
            camp = c.create_campaign(workload="resnet18", device_id="agx-orin-0", modes=f"random:{MODES}")
            ex = _executor(lab)
            wait_until(lambda: len(ex.in_hand) == ON_BOARD, 30, "two modes on the board")
            assert c.control_campaign(camp.campaign_id, "pause").status == "paused"
            wait_until(lambda: not ex.in_hand and c.get_campaign(camp.campaign_id).in_flight == 0, 30, "the pause")
            paused = c.get_campaign(camp.campaign_id)
            assert paused.status == "paused" and paused.done < MODES
            assert lab.lab.controller.leases.holder("agx-orin-0") is None   # a paused campaign holds no board
            c.control_campaign(camp.campaign_id, "resume")
            done = wait_done(c, camp.campaign_id)
        assert (done.status, done.done, done.failed) == ("done", MODES, 0)
        exactly_once(lab, camp.campaign_id, MODES)
    finally:
        lab.close()


def test_a_mode_answered_within_ack_after_s_goes_back_without_an_ack_and_a_longer_one_is_acknowledged(tmp_path):
    lab = LabThread(str(tmp_path / "data"), [])
    lab.lab.speed = math.inf   # an instant board: each mode's result is there in about a millisecond
    lab.start()
    try:
        fast = lab.do(lambda: lab.lab.add_agent("agx-orin", seed=0))
        slow = lab.do(lambda: lab.lab.add_agent("agx-orin", seed=1, speed=SLOW))   # ~0.1 s of wall time a mode
        lab.call(lab.lab.wait_online(2))
        with OperatorClient(lab.address) as c:
            quick = c.create_campaign(workload="resnet18", device_id=fast.device_id, modes="random:20")
            assert wait_done(c, quick.campaign_id).done == 20
            exactly_once(lab, quick.campaign_id, 20)
            # a mode waits at most for the one before it: only a stall of this machine past ACK_AFTER_S makes an ack
            assert fast.link.acks_sent < 10, fast.link.acks_sent
            longer = c.create_campaign(workload="resnet18", device_id=slow.device_id, modes="random:3")
            assert wait_done(c, longer.campaign_id).done == 3
            exactly_once(lab, longer.campaign_id, 3)
        assert slow.link.acks_sent == 3   # each ran past link.ACK_AFTER_S: acknowledged before its result
    finally:
        lab.close()


def _instant_campaign(tmp_path, modes: int, prepare=None):   # type: ignore[no-untyped-def]
    """A campaign of ``modes`` modes on an instant board: (the lab, its agent, the campaign as it ended); ``prepare``
    is called with the started lab before its board comes online."""
    lab = LabThread(str(tmp_path / "data"), [])
    lab.lab.speed = math.inf   # each mode's result is there in about a millisecond
    lab.start()
    try:
        if prepare is not None:
            prepare(lab)
        agent = lab.do(lambda: lab.lab.add_agent("agx-orin", seed=0))
        lab.call(lab.lab.wait_online(1))
        with OperatorClient(lab.address) as c:
            camp = c.create_campaign(workload="resnet18", device_id=agent.device_id, modes=f"random:{modes}")
            done = wait_done(c, camp.campaign_id)
    except BaseException:   # what it started ends with it
        lab.close()
        raise
    return lab, agent, done


def test_quick_modes_go_down_together_run_back_to_back_and_are_stored_together_each_once(tmp_path):
    lab, agent, done = _instant_campaign(tmp_path, 120)
    try:
        assert (done.status, done.done, done.failed) == ("done", 120, 0)
        exactly_once(lab, done.campaign_id, 120)
        link, ex = agent.link, agent.link.executor
        assert ex.profiles_run == 120   # the board's own count: each mode measured once
        # Commands queued together went as one message, the board ran the queued modes in a few worker-thread hops
        # (not one a mode), and results that were ready together went back, and were stored, together.
        assert link.command_batches > 0
        assert ex.profile_hops < 120 / 2, ex.profile_hops
        assert link.result_batches > 0
        writes = lab.lab.controller.campaigns.store_writes
        assert writes < 120 / 2, writes
        run = lab.lab.controller.campaigns.runs[done.campaign_id]
        assert manager.CampaignManager._depth(run, agent.device_id) > manager.PIPELINE_DEPTH   # its modes are quick
    finally:
        lab.close()


@pytest.mark.parametrize("old", ["agent", "controller"])
def test_an_older_agent_or_controller_gets_one_command_and_one_result_a_message(tmp_path, monkeypatch, old):
    from jetfleet.agent.link import AgentLink
    from jetfleet.controller.sessions import AgentSessions

    if old == "agent":   # its hello does not say it reads CommandBatch
        hello = AgentLink._hello

        async def old_hello(self):   # type: ignore[no-untyped-def]
            msg = await hello(self)
            msg.hello.ClearField("batches")
            return msg

        monkeypatch.setattr(AgentLink, "_hello", old_hello)
    else:                # its welcome does not say it reads ResultBatch
        welcome = AgentSessions.welcome

        def old_welcome(self, session):   # type: ignore[no-untyped-def]
            msg = welcome(self, session)
            msg.welcome.ClearField("batches")
            return msg

        monkeypatch.setattr(AgentSessions, "welcome", old_welcome)
    lab, agent, done = _instant_campaign(tmp_path, 60)
    try:
        assert (done.status, done.done, done.failed) == ("done", 60, 0)
        exactly_once(lab, done.campaign_id, 60)
        assert agent.link.executor.profiles_run == 60
        if old == "agent":
            assert agent.link.command_batches == 0
            assert agent.link.result_batches > 0
        else:
            assert agent.link.command_batches > 0
            assert agent.link.result_batches == 0
    finally:
        lab.close()


def test_a_group_write_the_store_refuses_is_stored_result_by_result_and_no_mode_is_measured_again(tmp_path):
    """A transaction of several results that fails for one of them (not the store being away: a refused write)
    falls back to one write each: the others are stored, and the board measures nothing twice."""
    refused = []

    def refuse_one_group(lab):   # type: ignore[no-untyped-def]
        store = lab.lab.controller.store
        together = store.record_results

        def once(items):   # type: ignore[no-untyped-def]
            if len(items) > 1 and not refused:
                refused.append(len(items))
                raise RuntimeError("the store refused one write of the group")
            return together(items)

        store.record_results = once

    lab, agent, done = _instant_campaign(tmp_path, 60, refuse_one_group)
    try:
        assert refused, "no group of several results was written"
        assert (done.status, done.done, done.failed) == ("done", 60, 0)
        exactly_once(lab, done.campaign_id, 60)
        assert agent.link.executor.profiles_run == 60   # no mode measured again
    finally:
        lab.close()
