"""Issue 12, adversarially: every number jetfleet keeps can be trusted. Each case was a defect on an
earlier main (a careless operator or a hostile agent lost, mixed up or corrupted data); each test
fails there. The store cases run on SQLite and on a real redis-server."""

import asyncio
import csv
import gc
import io
import logging
import math
import threading
from collections import Counter
from dataclasses import replace

import pytest

from jetfleet.agent.executor import CommandExecutor
from jetfleet.agent.profiler import MIN_WINDOW_SAMPLES, ProfileRequest, profile
from jetfleet.client import OperatorClient
from jetfleet.controller import profiles_csv
from jetfleet.controller.campaigns.manager import MAX_TRANSIENT_ATTEMPTS
from jetfleet.controller.config import ControllerConfig
from jetfleet.controller.server import Controller
from jetfleet.controller.store import CampaignRecord, ModeState, ProfileRecord, open_store
from jetfleet.shared.catalog import get_catalog
from jetfleet.shared.convert import mode_to_pb
from jetfleet.shared.errors import DeviceError, FailedPrecondition, InvalidArgument, Unavailable
from jetfleet.shared.proto import agent_pb2
from jetfleet.shared.summary import summarise
from jetfleet.twin.board import EmulatedBoard

from .harness import FAST_CONTROLLER, LabThread, RedisServer, wait_until
from .hostile import RawAgent, hello, sample

HEADER = "board_model,workload,cpu_cores,cpu_mhz,gpu_mhz,mem_mhz,minibatch_time_ms,power_w"
PATIENT = replace(FAST_CONTROLLER, offline_after_missed=1000)  # a hand-driven agent sends no heartbeats


def wait_campaign(c: OperatorClient, cid: str, timeout_s: float = 60.0):
    wait_until(lambda: c.get_campaign(cid).status in ("done", "cancelled"), timeout_s, f"campaign {cid}")
    return c.get_campaign(cid)


def stored(lab: LabThread, **query) -> list[ProfileRecord]:
    return lab.do(lambda: lab.lab.controller.store.query_profiles(**query))


# --- 1. no NaN, no silent drop; done is what is stored ---------------------------------------------
def test_a_one_minibatch_profile_has_measured_power():
    """An LSTM minibatch lasts ~11 ms: the window grows until it holds power samples, never NaN."""
    board = EmulatedBoard("agx-orin", 5)
    cat = board.catalog
    for mode in cat.sample(12, seed=3):
        p = profile(board, ProfileRequest("lstm", mode, minibatches=1))
        assert len(p.power) >= MIN_WINDOW_SAMPLES - 1 and math.isfinite(p.summary.power_mean_w)
        assert p.summary.minibatches >= 1 and p.window_end_s - p.window_start_s >= 0.2


def test_short_windows_campaign_stores_every_mode(store_spec):
    lab = LabThread(store_spec, ["agx-orin"]).start()
    try:
        with OperatorClient(lab.address) as c:
            camp = c.create_campaign(workload="lstm", device_id="agx-orin-0", modes="random:40", minibatches=1, seed=9)
            done = wait_campaign(c, camp.campaign_id)
        rows = stored(lab, source=camp.campaign_id)
        assert (done.done, done.failed, len(rows)) == (40, 0, 40)
        assert all(math.isfinite(r.power_w) and r.power_samples > 0 for r in rows)
    finally:
        lab.close()


def test_done_after_a_restart_is_what_the_store_holds(store_spec):
    """A campaign marked done whose modes have no stored results (an earlier main's silent drop) is
    measured again after a controller restart, not reported done forever."""
    modes = [str(m) for m in get_catalog("orin-nano").sample(6, seed=1)]
    s = open_store(store_spec)
    s.create_campaign(CampaignRecord("c-old", "lstm", "orin-nano-0", "orin-nano", "file", 10, 1.0), modes)
    for m in modes:
        s.set_mode_state("c-old", ModeState(m, "done", 1, "orin-nano-0"))
    s.set_campaign_status("c-old", "done", 2.0)
    s.close()
    lab = LabThread(store_spec, ["orin-nano"]).start()
    try:
        with OperatorClient(lab.address) as c:
            done = wait_campaign(c, "c-old")
        assert (done.status, done.done) == ("done", 6)
        assert sorted(r.mode for r in stored(lab, source="c-old")) == sorted(modes)
    finally:
        lab.close()


# --- 2. imports never collide, never double ----------------------------------------------------------
def test_two_workloads_at_one_mode_import_without_collision(store_spec):
    lab = LabThread(store_spec, []).start()
    text = "\n".join([HEADER, "agx-orin,resnet18,12,2201.6,1300.5,3199,55.0,48.0",
                      "agx-orin,mobilenet_v3,12,2201.6,1300.5,3199,96.0,39.0",
                      "agx-xavier,resnet18,8,2265.6,1377,2133,70.0,30.0"]) + "\n"
    try:
        with OperatorClient(lab.address) as c:
            r = c.import_profiles(text, "two.csv")
            assert (r.rows, r.already_stored) == (3, 0)
            again = c.import_profiles(text.replace("\n", "\r\n"), "two-again.csv")  # the same rows, other line ends
            assert (again.rows, again.already_stored, again.source) == (0, 3, r.source)
        resnet = stored(lab, board_model="agx-orin", workload="resnet18")
        assert [(x.minibatch_time_ms, x.power_w) for x in resnet] == [(55.0, 48.0)]
        assert [x.power_w for x in stored(lab, workload="mobilenet_v3")] == [39.0]
        assert len(stored(lab)) == 3
    finally:
        lab.close()


# --- 3. impossible values are refused --------------------------------------------------------------
@pytest.mark.parametrize("row,needle", [
    ("agx-orin,resnet18,12,2201.6,1300.5,3199,55,1e308", "power_w=1e308 is impossible; allowed (0, 120]"),
    ("agx-orin,resnet18,12,2201.6,1300.5,3199,55,121", "power_w=121 is impossible"),
    ("tx2,resnet18,4,2035.2,1300.5,1866,55,61", "power_w=61 is impossible; allowed (0, 60]"),
    ("agx-orin,resnet18,12,2201.6,1300.5,3199,4000000,40", "minibatch_time_ms=4000000 is impossible"),
    ("agx-orin,resnet18,12,2201.6,1300.5,3199,nan,40", "minibatch_time_ms must be a positive finite number"),
])
def test_impossible_imported_values_are_refused_with_their_line(tmp_path, row, needle):
    lab = LabThread(str(tmp_path / "data"), []).start()
    try:
        with OperatorClient(lab.address) as c, pytest.raises(InvalidArgument) as e:
            c.import_profiles(f"{HEADER}\nagx-orin,resnet18,2,268.8,114.75,204,400,9\n{row}\n", "bad.csv")
        assert "line 3" in e.value.message and needle in e.value.message and "nothing was imported" in e.value.message
        assert stored(lab) == []
    finally:
        lab.close()


def test_exported_text_cells_cannot_run_as_spreadsheet_formulas():
    """Rows stored before ids were checked (or written by another tool) may hold formula-like text."""
    cells = ["=HYPERLINK(\"http://x\")", "+1", "-2", "@SUM(A1)", "\tx", "plain"]
    rows = [ProfileRecord("c1", "12/2201.6/1300.5/3199", 0, "agx-orin", dev, "resnet18", 55.0, 48.0, 1.0)
            for dev in cells]
    out = list(csv.reader(io.StringIO(profiles_csv.export(rows))))[1:]
    assert [r[8] for r in out] == ["'" + c for c in cells[:-1]] + ["plain"]


@pytest.mark.parametrize("change,field", [
    (dict(cpu_util=math.nan), "telemetry.samples.cpu_util"), (dict(gpu_util=-math.inf), "telemetry.samples.gpu_util"),
    (dict(temps_c={"cpu": -1e308}), "telemetry.samples.temps_c[cpu]"),
    (dict(cores_online=2**32 - 1), "telemetry.samples.cores_online"),
    (dict(total_w=1e9), "telemetry.samples.total_w"), (dict(t_s=-5.0), "telemetry.samples.t_s"),
    (dict(temps_c={"x" * 100: 40.0}), "telemetry.samples.temps_c"),
])
def test_impossible_telemetry_is_refused_and_not_kept(tmp_path, change, field):
    lab = LabThread(str(tmp_path / "data"), [], config=PATIENT).start()
    cat = get_catalog("tx2")

    async def scenario():
        a = RawAgent(lab.address)
        await a.open(hello("raw-t"))
        a.send(agent_pb2.AgentMessage(telemetry=agent_pb2.TelemetryBatch(samples=[sample(cat, **change)])))
        notice = (await a.read()).notice.error
        await a.close()
        return notice

    try:
        notice = lab.call(scenario())
        assert (notice.code, notice.field) == ("INVALID_ARGUMENT", field)
        assert lab.do(lambda: lab.telemetry.window("raw-t")) == []
    finally:
        lab.close()


def _profile_result(cmd: agent_pb2.Command, times: list[float], power_w: float, n: int = 20):
    cat = get_catalog("tx2")
    rp = cmd.run_profile
    return agent_pb2.AgentMessage(result=agent_pb2.CommandResult(command_id=cmd.command_id, ok=True,
                                                                 profile=agent_pb2.ProfileResult(
        workload=rp.workload, mode=rp.mode, minibatch_times_s=times, window_start_s=1.0, window_end_s=2.0,
        power=[sample(cat, t_s=1.0 + i / n, rails_w={"VDD_IN": power_w}, total_w=power_w) for i in range(n)])))


def test_a_hostile_agents_impossible_results_are_never_stored(store_spec):
    """Negative times, then absurd power: each refused; the mode fails after three tries with the reason."""
    lab = LabThread(store_spec, [], config=PATIENT).start()

    a = RawAgent(lab.address)

    async def agent():
        await a.open(hello("raw-p"))
        answers = [([-0.05] * 40, 5.0), ([0.05] * 40, 1e300), ([0.05] * 40, math.nan)]
        ids = []
        for times, power in answers:
            cmd = await a.command()
            ids.append(cmd.command_id)
            a.send(_profile_result(cmd, times, power))
        return ids

    try:
        fut = asyncio.run_coroutine_threadsafe(agent(), lab.loop)
        lab.wait(lambda: lab.online("raw-p"), what="raw agent online")
        with OperatorClient(lab.address) as c:
            camp = c.create_campaign(workload="resnet18", device_id="raw-p", mode_list=["MAXN"], modes="file:x")
            done = wait_campaign(c, camp.campaign_id)
        ids = fut.result(10)
        lab.call(a.close())
        assert (done.done, done.failed) == (0, 1) and len(set(ids)) == 3  # each try a new round, measured again
        assert stored(lab) == []
        state = lab.do(lambda: lab.lab.controller.store.campaign_modes(camp.campaign_id))[0]
        assert state.status == "failed" and state.attempts == 3 and "power" in state.error
        assert any("minibatch time" in e for e in done.errors)
    finally:
        lab.close()


# --- 4. a Redis outage: kept, retried with backoff, no hot loop, "store unavailable" ------------------
def test_a_redis_outage_mid_campaign_loses_nothing(tmp_path, caplog):
    # An earlier test's lab, its loop closed, may still hold tasks until the collector finds them; destroyed during
    # this test they would log their own tracebacks ("Event loop is closed") into the count below: collected first.
    gc.collect()
    server = RedisServer(tmp_path).start()
    lab = LabThread(server.url, [])
    lab.lab.speed = 60.0
    lab.start()
    try:
        for _ in range(2):
            lab.do(lambda: lab.lab.add_agent("agx-orin"))
        lab.call(lab.lab.wait_online(2))
        registry = lab.lab.controller.metrics.registry

        def retries() -> float:
            return registry.get_sample_value("jetfleet_store_retries_total") or 0.0
        with OperatorClient(lab.address) as c:
            camp = c.create_campaign(workload="resnet18", board_model="agx-orin", modes="random:40", seed=5)
            run = lab.lab.controller.campaigns.runs[camp.campaign_id]
            lab.wait(lambda: run.count("done") >= 5, 30, "progress")
            with caplog.at_level(logging.WARNING):
                server.kill()
                lab.wait(lambda: retries() >= 3, 20, "results waiting for the store")
                with pytest.raises(Unavailable, match="store unavailable") as e:
                    c.create_campaign(workload="lstm", board_model="agx-orin", modes="random:2")
                assert "controller" not in e.value.message
                assert c.list_devices()  # the controller itself answers
                before = retries()
                wait_until(lambda: retries() >= before + 4, 20, "retries")
                server.start()
            tracebacks = sum(1 for r in caplog.records if r.exc_info)
            done = wait_campaign(c, camp.campaign_id, 60)
        assert (done.done, done.failed) == (40, 0)
        rows = stored(lab, source=camp.campaign_id)
        assert len(rows) == 40 and Counter(r.mode for r in rows).most_common(1)[0][1] == 1
        assert tracebacks == 0
        # backoff, not a hot loop: at most a few retries per second per waiting write while Redis was down
        assert retries() < 200
    finally:
        lab.close()
        server.kill()


# --- 5. a board with a narrower catalog takes only the modes it has --------------------------------
def narrow_orin():
    full = get_catalog("agx-orin")
    return replace(full, gpu_mhz=tuple(g for g in full.gpu_mhz if g != 1300.5),
                   presets={k: v for k, v in full.presets.items() if v.gpu_mhz != 1300.5},
                   grid_specs={name: {k: tuple(x for x in v if (k, x) != ("gpu_mhz", 1300.5)) for k, v in spec.items()}
                               for name, spec in full.grid_specs.items()})


def test_modes_go_only_to_boards_whose_catalog_holds_them(store_spec):
    lab = LabThread(store_spec, [])
    lab.lab.speed = 200.0
    lab.start()
    try:
        lab.do(lambda: lab.lab.add_agent("agx-orin", device_id="orin-narrow", catalog=narrow_orin()))
        for i in range(2):
            lab.do(lambda i=i: lab.lab.add_agent("agx-orin", seed=10 + i))
        lab.call(lab.lab.wait_online(3))
        modes = [f"12/2201.6/{g}/3199" for g in (1300.5, 1236.75, 1134.75)] + [f"8/1728/{g}/3199" for g in
                                                                              (1300.5, 624.75, 522.75)]
        with OperatorClient(lab.address) as c:
            camp = c.create_campaign(workload="lstm", board_model="agx-orin", mode_list=modes, modes="file:m")
            done = wait_campaign(c, camp.campaign_id)
            assert (done.done, done.failed) == (6, 0)
            rows = stored(lab, source=camp.campaign_id)
            assert all(r.device_id != "orin-narrow" for r in rows if "/1300.5/" in r.mode)
            # with only the narrow board online, a mode none can run fails with the reason, the rest are measured
            for a in lab.lab.agents[1:]:
                lab.call(a.stop())
            lab.wait(lambda: not lab.online("agx-orin-10") and not lab.online("agx-orin-11"), 10, "offline")
            camp2 = c.create_campaign(workload="lstm", board_model="agx-orin", mode_list=modes, modes="file:m")
            done2 = wait_campaign(c, camp2.campaign_id)
        assert (done2.done, done2.failed) == (4, 2)
        assert any("no online agx-orin board has 12/2201.6/1300.5/3199 in its catalog" in e for e in done2.errors)
    finally:
        lab.close()


# --- 6. cancel reaches a running profile; a crashing mode ends failed -----------------------------------
def test_cancel_stops_a_running_profile():
    async def scenario():
        board = EmulatedBoard("agx-orin", 0, speed=20.0)  # 200 x 55 ms / 20 = ~0.6 s of wall time
        ex = CommandExecutor(board)
        run = agent_pb2.Command(command_id="p-long", run_profile=agent_pb2.RunProfile(
            workload="resnet18", mode=mode_to_pb(board.catalog.maxn), minibatches=200, sample_interval_s=0.1))
        task = asyncio.create_task(ex.execute(run))
        while "p-long" not in ex._cancel:  # the profile has started
            await asyncio.sleep(0)
        cancel = agent_pb2.Command(command_id="c", cancel=agent_pb2.Cancel(target_command_id="p-long"))
        return await ex.execute(cancel), await task

    cancelled, result = asyncio.run(scenario())
    assert cancelled.ok and cancelled.cancelled
    assert not result.ok and result.error.code == "CANCELLED" and "cancelled after" in result.error.message


class CrashingBoard(EmulatedBoard):
    """A board whose agent dies whenever it runs one poisoned mode (a driver bug, an OOM kill)."""

    poison = None
    crash = None
    ran: list = []   # the modes it ran since its agent last died

    def run_minibatches(self, workload, n, **kw):
        if self.read_mode() == self.poison and self.crash is not None:
            gone = threading.Event()
            self.crash(gone, list(self.ran))
            self.ran = []
            gone.wait(10)  # the process is gone: what this thread returns reaches no one
            raise DeviceError("killed")
        self.ran = [*self.ran, self.read_mode()]
        return super().run_minibatches(workload, n, **kw)


def test_a_mode_that_crashes_its_agent_every_time_ends_failed(tmp_path):
    lab = LabThread(str(tmp_path / "data"), []).start()
    poison = get_catalog("orin-nano").parse_mode("7W")
    try:
        agent = lab.do(lambda: lab.lab.add_agent("orin-nano"))
        board = CrashingBoard("orin-nano", 0)
        board.poison = poison
        lab.call(agent.stop())
        agent.board = board
        restarts = []

        def crash(gone, ran):  # the agent process dies; systemd starts it again
            # It dies partway into the poisoned mode, after what it measured before has gone out (at once on this
            # instant twin, a quick mode's result would still be in the agent, held at most executor.HOLD_S).
            in_flight = lambda: lab.do(  # noqa: E731 - read on the controller's loop, not beside it
                lambda: {m for r in lab.lab.controller.campaigns.runs.values() for m in r.in_flight})
            wait_until(lambda: not {str(m) for m in ran} & in_flight(), 10, "the results before the crash sent")

            def kill():
                def back(_):
                    restarts.append(1)
                    gone.set()
                    agent.start()

                agent.task.add_done_callback(back)
                agent.task.cancel()

            lab.loop.call_soon_threadsafe(kill)

        board.crash = crash
        lab.do(agent.start)
        lab.call(lab.lab.wait_online(1))
        with OperatorClient(lab.address) as c:
            camp = c.create_campaign(workload="lstm", device_id="orin-nano-0", mode_list=["7W", "15W"], modes="file:m",
                                     minibatches=5)
            done = wait_campaign(c, camp.campaign_id, 60)
        assert (done.done, done.failed) == (1, 1) and len(restarts) == 5
        state = next(s for s in lab.do(lambda: lab.lab.controller.store.campaign_modes(camp.campaign_id))
                     if s.mode == str(poison))
        assert state.status == "failed" and state.attempts == 5 and "went offline" in state.error
        # 15W was sent with it (two modes on the board), waiting behind it each time the agent died: never charged
        other = next(s for s in lab.do(lambda: lab.lab.controller.store.campaign_modes(camp.campaign_id))
                     if s.mode != str(poison))
        assert other.status == "done" and other.attempts == 0, other
    finally:
        lab.close()


class StallingBoard(EmulatedBoard):
    """A board whose thread gets stuck in one mode (a driver hiccup) until ``freed`` is set (at most ``stall_s``)."""

    stall = None
    stall_s = 0.0
    freed = threading.Event()

    def run_minibatches(self, workload, n, **kw):
        if self.read_mode() == self.stall:
            self.freed.wait(self.stall_s)   # the fault: stuck, then it carries on
        return super().run_minibatches(workload, n, **kw)


def _stalling_campaign(tmp_path, timeout_s: float, free_after_retries: int | None):
    """A campaign of 7W then 15W on a board stuck in 7W until the campaign has sent modes again
    ``free_after_retries`` times (None: for good), the controller waiting ``timeout_s`` for a profile: the campaign
    when it ended and its modes' states (7W's, 15W's)."""
    lab = LabThread(str(tmp_path / "data"), []).start()
    stall = get_catalog("orin-nano").parse_mode("7W")
    board = StallingBoard("orin-nano", 0)
    board.stall, board.stall_s, board.freed = stall, 120.0, threading.Event()
    freer = None
    try:
        agent = lab.do(lambda: lab.lab.add_agent("orin-nano"))
        lab.call(agent.stop())
        agent.board = board
        lab.do(agent.start)
        lab.call(lab.lab.wait_online(1))
        lab.do(lambda: setattr(lab.lab.controller.campaigns, "profile_timeout_s", timeout_s))
        with OperatorClient(lab.address) as c:
            camp = c.create_campaign(workload="lstm", device_id="orin-nano-0", mode_list=["7W", "15W"], modes="file:m",
                                     minibatches=5)
            if free_after_retries is not None:
                run = lab.lab.controller.campaigns.runs[camp.campaign_id]

                def free() -> None:   # the board carries on once the controller gave up waiting that often
                    wait_until(lambda: lab.do(lambda: run.retries) >= free_after_retries, 30, "modes sent again")
                    board.freed.set()

                freer = threading.Thread(target=free, daemon=True)
                freer.start()
            done = wait_campaign(c, camp.campaign_id, 60)
        states = {s.mode: s for s in lab.do(lambda: lab.lab.controller.store.campaign_modes(camp.campaign_id))}
        stalled = states.pop(str(stall))
        return done, stalled, next(iter(states.values()))
    finally:
        board.freed.set()
        if freer is not None:
            freer.join(35)
        lab.close()


def test_a_stalled_mode_is_charged_and_the_mode_waiting_behind_it_is_not(tmp_path):
    # both time out once (7W stuck, 15W behind it); then the board carries on, well within the next timeout
    done, stalled, behind = _stalling_campaign(tmp_path, timeout_s=1.5, free_after_retries=2)
    assert (done.done, done.failed) == (2, 0), done
    # 7W charged for each time it did not come back in time; 15W, sent after it, waited and was sent again uncharged
    assert stalled.attempts >= 1 and behind.attempts == 0, (stalled, behind)
    assert done.retries > stalled.attempts, done


def test_a_board_stuck_for_good_still_ends_its_campaign(tmp_path):
    # 7W never comes back: it fails after MAX_TRANSIENT_ATTEMPTS; 15W, stuck behind it, is sent again uncharged
    # MAX_UNCHARGED times, then charged: the campaign ends (it does not wait behind 7W for ever)
    done, stalled, behind = _stalling_campaign(tmp_path, timeout_s=0.2, free_after_retries=None)
    assert (done.done, done.failed) == (0, 2), done
    assert stalled.attempts == MAX_TRANSIENT_ATTEMPTS == behind.attempts, (stalled, behind)
    # charged for not answering in time (without the bound, its resends pile up on the agent until it refuses them)
    assert "DEADLINE_EXCEEDED" in behind.error, behind
    assert done.retries > MAX_TRANSIENT_ATTEMPTS * 2, done     # (MAX_UNCHARGED more, where nothing else happened)


def test_stopping_the_controller_cancels_every_dispatch(tmp_path):
    lab = LabThread(str(tmp_path / "data"), [])
    lab.lab.speed = 5.0
    lab.start()
    try:
        lab.do(lambda: lab.lab.add_agent("agx-orin"))
        lab.call(lab.lab.wait_online(1))
        with OperatorClient(lab.address) as c:
            camp = c.create_campaign(workload="resnet18", device_id="agx-orin-0", modes="random:5")
        run = lab.lab.controller.campaigns.runs[camp.campaign_id]
        lab.wait(lambda: len(run.tasks) >= 1, 10, "a dispatch in flight")
        tasks = list(run.tasks)   # the modes on the board (the pipeline's depth)
        lab.call(lab.lab.stop_controller())
        assert all(t.done() for t in tasks) and run.task.done() and not run.tasks
    finally:
        lab.close()


def test_pause_and_resume_at_once_keep_one_driver(tmp_path):
    lab = LabThread(str(tmp_path / "data"), ["orin-nano"])
    lab.lab.speed = 50.0
    lab.start()
    try:
        with OperatorClient(lab.address) as c:
            camp = c.create_campaign(workload="lstm", device_id="orin-nano-0", modes="random:12")
            for _ in range(5):
                c.control_campaign(camp.campaign_id, "pause")
                c.control_campaign(camp.campaign_id, "resume")
            drivers = [t for t in lab.call(_all_tasks()) if "_drive" in repr(t.get_coro())]
            assert len(drivers) == 1
            done = wait_campaign(c, camp.campaign_id)
        assert done.done == 12 and len(stored(lab, source=camp.campaign_id)) == 12
    finally:
        lab.close()


async def _all_tasks():
    return [t for t in asyncio.all_tasks() if not t.done()]


# --- 7. a result of any size arrives ------------------------------------------------------------------
def test_a_result_bigger_than_a_message_arrives_whole(tmp_path):
    """bert_base on the AGX Xavier at 6/1036.8/114.75/1866: ~49 s per minibatch, ~19,000 samples in the window."""
    lab = LabThread(str(tmp_path / "data"), ["agx-xavier"]).start()
    try:
        with OperatorClient(lab.address) as c:
            camp = c.create_campaign(workload="bert_base", device_id="agx-xavier-0", mode_list=["6/1036.8/114.75/1866"],
                                     modes="file:slow")
            done = wait_campaign(c, camp.campaign_id, 120)
        assert (done.done, done.failed) == (1, 0)
        row = lab.do(lambda: lab.lab.controller.store.query_profiles(source=camp.campaign_id, with_raw=True))[0]
        assert row.power_samples == len(row.raw["power"]) > 15_000
        exact = summarise(row.raw["minibatch_times_s"], [p[1] for p in row.raw["power"]])
        assert row.power_w == pytest.approx(exact.power_mean_w, rel=1e-6)
        assert row.minibatch_time_ms == pytest.approx(exact.minibatch_time_median_ms, rel=1e-6)
    finally:
        lab.close()


# --- 8. one port, one controller --------------------------------------------------------------------
def test_a_second_controller_on_a_busy_port_is_refused(tmp_path):
    async def scenario():
        first = Controller(ControllerConfig(listen="127.0.0.1:0", store=str(tmp_path / "a")))
        port = await first.start()
        second = Controller(ControllerConfig(listen=f"127.0.0.1:{port}", store=str(tmp_path / "b")))
        try:
            with pytest.raises(FailedPrecondition, match="in use"):
                await second.start()
        finally:
            await second.stop(0)
            await first.stop(0)

    asyncio.run(scenario())


# --- 9. a watch of an offline board says so -------------------------------------------------------
def test_watching_an_offline_board_ends_at_once_and_a_board_going_offline_ends_the_watch(tmp_path):
    lab = LabThread(str(tmp_path / "data"), ["tx2", "orin-nano"]).start()
    try:
        lab.call(lab.lab.agents[0].stop())
        lab.wait(lambda: not lab.online("tx2-0"), 5, "offline")
        with OperatorClient(lab.address) as c:
            with pytest.raises(Unavailable, match="tx2-0 is offline"):
                list(c.watch("tx2-0", 2))
            ended: list[BaseException] = []

            def watch():
                try:
                    for _ in c.watch("orin-nano-1"):
                        pass
                except Exception as e:  # noqa: BLE001
                    ended.append(e)

            t = threading.Thread(target=watch, daemon=True)
            t.start()
            board = lambda: lab.telemetry._boards.get("orin-nano-1")  # noqa: E731
            lab.wait(lambda: lab.do(lambda: board() is not None and bool(board().watchers)), 5, "watching")
            lab.call(lab.lab.agents[1].stop())
            t.join(10)
        assert not t.is_alive() and isinstance(ended[0], Unavailable) and "went offline" in ended[0].message
    finally:
        lab.close()


# --- 10. a reused request id with another request is refused ---------------------------------------
def test_a_reused_request_id_with_another_request_is_refused(tmp_path):
    lab = LabThread(str(tmp_path / "data"), ["orin-nano"]).start()
    try:
        with OperatorClient(lab.address) as c:
            first = c.set_mode("orin-nano-0", "7W", request_id="job-17")
            assert c.set_mode("orin-nano-0", "7W", request_id="job-17").confirmed == first.confirmed
            with pytest.raises(FailedPrecondition, match="job-17.*set_mode 4/960/408/2133 on orin-nano-0.*"
                                                         "set_mode 6/1510.4/624.75/2133 on orin-nano-0"):
                c.set_mode("orin-nano-0", "MAXN", request_id="job-17")
        assert lab.lab.agents[0].board.read_mode() == get_catalog("orin-nano").parse_mode("7W")
    finally:
        lab.close()
