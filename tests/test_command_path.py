"""The agent's path for a command it has checked (the link checks each command once, before it acknowledges it,
and hands what the check built to the executor): a profile queued that way is still run once per id and
remembered after the session that asked for it went away, a failure still comes back as its result, and the
board's mode metric shows the last mode profiled. Acknowledgements: a command answered within ACK_AFTER_S goes
without one, one still running then gets exactly one. Read from the board's own counts (``profiles_run``) and
the messages the agent queued for the controller."""

from __future__ import annotations

import asyncio
import math

import grpc

from jetfleet.agent import executor as executor_mod
from jetfleet.agent import link as link_mod
from jetfleet.agent.executor import CommandExecutor
from jetfleet.agent.metrics import AgentMetrics
from jetfleet.controller.campaigns.results import profile_command
from jetfleet.shared.catalog import get_catalog
from jetfleet.shared.convert import mode_to_pb
from jetfleet.shared.proto import agent_pb2, agent_pb2_grpc
from jetfleet.twin.board import EmulatedBoard

from .test_training_commands import until

ORIN = get_catalog("agx-orin")
MODES = ORIN.grid("powertrain")[::700][:4]


def test_a_checked_profile_runs_once_and_is_remembered_after_the_session_that_sent_it_ended():
    async def scenario():   # type: ignore[no-untyped-def]
        ex = CommandExecutor(EmulatedBoard("agx-orin", 0, speed=60.0))   # ~0.1 s of wall time a profile
        cmd = profile_command("resnet18", MODES[0], 40, "camp-1-0-orin")
        waiter = asyncio.create_task(ex.execute(cmd, ex.check(cmd)))
        await until(lambda: ex.profiles_run == 1)
        waiter.cancel()   # the session that sent it ended (a stream break): the run goes on
        joined = await ex.execute(cmd, ex.check(cmd))   # the controller sends the id again on its next session
        again = await ex.execute(cmd)
        return ex, waiter, joined, again

    ex, waiter, joined, again = asyncio.run(scenario())
    assert waiter.cancelled()
    assert joined.ok and joined is again, (joined.error, again.error)
    assert ex.profiles_run == 1   # the board profiled it once
    assert len(joined.profile.minibatch_times_s) >= 40
    assert not ex._cancel and not ex._running   # nothing of it left in hand


def test_a_checked_profile_that_fails_comes_back_as_its_failed_result_without_a_profile():
    async def scenario():   # type: ignore[no-untyped-def]
        ex = CommandExecutor(EmulatedBoard("agx-orin", 0, speed=60.0))
        first, second = (profile_command("resnet18", m, 40, f"p-{i}") for i, m in enumerate(MODES[:2]))
        running = asyncio.create_task(ex.execute(first, ex.check(first)))
        queued = asyncio.create_task(ex.execute(second, ex.check(second)))
        await until(lambda: ex.profiles_run == 1)
        cancel = await ex.execute(agent_pb2.Command(command_id="c-1", cancel=agent_pb2.Cancel(target_command_id="p-1")))
        return ex, await running, await queued, cancel

    ex, ran, cancelled, cancel = asyncio.run(scenario())
    assert ran.ok and cancel.ok and cancel.cancelled
    assert not cancelled.ok and cancelled.error.code == "CANCELLED" and "before it started" in cancelled.error.message
    assert not cancelled.HasField("profile")
    assert ex.profiles_run == 1   # the cancelled one never started
    assert not ex._cancel and not ex._running


def test_the_mode_metric_shows_the_last_mode_profiled(monkeypatch):
    monkeypatch.setattr(executor_mod, "HOLD_S", 30.0)   # the four results go back to the event loop together
    board = EmulatedBoard("agx-orin", 0)
    metrics = AgentMetrics(board.catalog, "orin-3")
    cmds = [profile_command("resnet18", m, 40, f"p-{i}") for i, m in enumerate(MODES)]

    async def scenario():   # type: ignore[no-untyped-def]
        ex = CommandExecutor(board, metrics=metrics)   # in its event loop, as the agent makes it (Python 3.8's locks)
        return ex, await asyncio.gather(*(ex.execute(c, ex.check(c)) for c in cmds))

    ex, results = asyncio.run(scenario())
    assert all(r.ok for r in results)
    shown = metrics.registry.get_sample_value("jetfleet_agent_power_mode_info",
                                              {"device": "orin-3", "mode": str(MODES[-1]), "preset": "",
                                               "board_model": "agx-orin"})
    assert list(ex.settled) == [len(MODES)] and ex.profiles_run == len(MODES)
    assert shown == 1.0


def test_only_commands_still_running_after_ack_after_s_are_acknowledged_once_each():
    async def scenario():   # type: ignore[no-untyped-def]
        sent: list[str] = []
        loop = asyncio.get_running_loop()
        accepted_at: dict[str, float] = {}
        late: list[float] = []   # how long after its acceptance each ack went

        def ack(cid: str) -> None:
            sent.append(cid)
            late.append(loop.time() - accepted_at[cid])

        acks = link_mod._Acks(ack)

        def accept(cid: str) -> None:
            accepted_at[cid] = loop.time()
            acks.accepted(cid)

        accept("slow-1")
        first = loop.time()
        await until(lambda: loop.time() >= first + link_mod.ACK_AFTER_S / 2, 5)
        accept("quick")
        accept("slow-2")                   # not due yet when slow-1 is: the one timer is set again for it
        acks.answered("quick")             # its result went back in time: no ack
        await until(lambda: len(sent) == 2, 5)
        acks.answered("slow-1")            # its result after its ack: nothing more
        accept("quick-2")
        acks.answered("quick-2")
        accept("slow-3")                   # accepted after quick-2 was answered: its ack comes after quick-2's would
        await until(lambda: len(sent) == 3, 5)
        acks.close()
        return sent, late

    sent, late = asyncio.run(scenario())
    assert sent == ["slow-1", "slow-2", "slow-3"]
    assert min(late) >= link_mod.ACK_AFTER_S, late   # none before its time


def test_the_command_log_keeps_a_profile_result_without_its_samples():
    from jetfleet.agent.profiler import ProfileRequest, profile, profile_result_pb
    from jetfleet.controller.commands import command_record

    board = EmulatedBoard("agx-orin", 0)
    p = profile_result_pb(profile(board, ProfileRequest("resnet18", MODES[1])), columns=True)
    result = agent_pb2.CommandResult(command_id="c-9", ok=True, profile=p, parts=2)
    result.error.message = "kept as sent"
    cmd = profile_command("resnet18", MODES[1], 40, "c-9")
    entry = command_record("orin-0", cmd, 1.0, result=result, finished_s=2.0).result
    m = MODES[1]
    assert entry == {"commandId": "c-9", "ok": True, "error": {"message": "kept as sent"},
                     "profile": {"workload": "resnet18",
                                 "mode": {"cores": m.cores, "cpuMhz": m.cpu_mhz, "gpuMhz": m.gpu_mhz, "memMhz": m.mem_mhz},
                                 "steadyStateFound": True, "windowStartS": p.window_start_s,
                                 "windowEndS": p.window_end_s},
                     "compacted": True, "samples": p.power_columns.samples,
                     "minibatches": len(p.minibatch_times_s)}, entry
    assert p.power_columns.samples > 0 and len(result.profile.minibatch_times_s) >= 40   # the result is left whole


def test_a_profile_that_fails_on_the_board_comes_back_internal_without_the_part_it_wrote(monkeypatch):
    def broken(p, *, columns, into):   # type: ignore[no-untyped-def]
        into.workload = p.workload   # half written when building the message fails
        raise RuntimeError("nvpmodel: device busy")

    monkeypatch.setattr(executor_mod, "profile_result_pb", broken)

    async def scenario():   # type: ignore[no-untyped-def]
        ex = CommandExecutor(EmulatedBoard("agx-orin", 0))
        cmd = profile_command("resnet18", MODES[0], 40, "p-broken")
        return ex, await ex.execute(cmd, ex.check(cmd))

    ex, result = asyncio.run(scenario())
    assert not result.ok and result.error.code == "INTERNAL", result
    assert not result.HasField("profile")
    assert ex.profiles_run == 1 and not ex._cancel and not ex._running


def _agent(speed: float):   # type: ignore[no-untyped-def]
    from jetfleet.agent.config import AgentConfig
    from jetfleet.agent.link import AgentLink

    return AgentLink(EmulatedBoard("agx-orin", 0, speed=speed), AgentConfig())


def test_commands_of_one_batch_run_in_the_order_they_came_whatever_their_kind():
    """A CommandBatch's commands are started in order as the session's read loop starts them (``_start``): a
    profile after a set_mode, a training or a cancel must not be queued for the board before them, though a profile
    alone is queued at once, without a task."""
    step = agent_pb2.Command(command_id="s-1", set_mode=agent_pb2.SetMode(mode=mode_to_pb(MODES[1])))
    cancel = agent_pb2.Command(command_id="c-1", cancel=agent_pb2.Cancel(target_command_id="p-1"))
    train = agent_pb2.Command(command_id="t-1", run_training=agent_pb2.RunTraining(workload="resnet18",
                                                                                  minibatches=20))

    async def batch(cmds):   # type: ignore[no-untyped-def]
        link = _agent(60.0)
        outq: asyncio.Queue = asyncio.Queue()
        acks = link_mod._Acks(lambda cid: None)
        in_hand = link_mod._InHand()
        for c in cmds:
            link._start(c, outq, acks, in_hand)
        results = []
        while len(results) < len(cmds):
            msg = await asyncio.wait_for(outq.get(), 30)
            if msg.WhichOneof("kind") == "result":
                results.append(msg.result)
        assert in_hand.count == 0 and not link.executor._starting
        return link, results

    profile = profile_command("resnet18", MODES[0], 40, "p-1")
    link, results = asyncio.run(batch([step, profile]))
    assert [r.command_id for r in results] == ["s-1", "p-1"] and all(r.ok for r in results)
    assert link.device.read_mode() == MODES[0]   # the profile's mode last: it ran after the step

    link, results = asyncio.run(batch([train, profile]))
    assert [r.command_id for r in results] == ["t-1", "p-1"] and all(r.ok for r in results)

    link, results = asyncio.run(batch([cancel, profile]))   # the cancel came first: nothing of that id to stop yet
    assert [(r.command_id, r.ok) for r in results] == [("c-1", True), ("p-1", True)]
    assert not results[0].cancelled and link.executor.profiles_run == 1

    link, results = asyncio.run(batch([profile, step]))   # the profile first: queued at once, then the step
    assert sorted(r.command_id for r in results) == ["p-1", "s-1"] and all(r.ok for r in results)
    assert link.device.read_mode() == MODES[1]   # the step's mode last: it ran after the profile


class _ScriptedController(agent_pb2_grpc.AgentLinkServicer):
    """A controller of the agent's real gRPC session that, on each session, welcomes the agent (batches on), sends
    the CommandBatch ``script`` gives for that session's number, and collects the results until it has ``until``
    of them (then ends the session)."""

    def __init__(self, script, until) -> None:   # type: ignore[no-untyped-def]
        self.script, self.until = script, until
        self.sessions = 0
        self.results: list[list[agent_pb2.CommandResult]] = []
        self.done: asyncio.Event | None = None   # made in the event loop that serves it (Python 3.8 wants one)

    async def Session(self, requests, context):   # type: ignore[no-untyped-def]  # noqa: N802 - the service's name
        n = self.sessions
        self.sessions += 1
        got: list[agent_pb2.CommandResult] = []
        self.results.append(got)
        await context.write(agent_pb2.ControllerMessage(welcome=agent_pb2.Welcome(
            session_id=f"s-{n}", heartbeat_interval_s=5, telemetry_interval_s=5, batches=True)))
        sent = False
        async for msg in requests:
            if not sent:   # after the hello
                msg2 = agent_pb2.ControllerMessage()
                msg2.commands.commands.extend(self.script(n))
                await context.write(msg2)
                sent = True
            kind = msg.WhichOneof("kind")
            got.extend([msg.result] if kind == "result" else msg.results.results if kind == "results" else [])
            if len(got) >= self.until(n):
                if self.until(n + 1) == 0 and self.done is not None:   # no session after this one
                    self.done.set()
                return


def _with_agent(controller: _ScriptedController, speed: float):   # type: ignore[no-untyped-def]
    """Run the real agent link against ``controller`` until it is done; the link."""
    from jetfleet.agent.config import AgentConfig
    from jetfleet.agent.link import AgentLink

    async def scenario():   # type: ignore[no-untyped-def]
        controller.done = done = asyncio.Event()
        server = grpc.aio.server()
        agent_pb2_grpc.add_AgentLinkServicer_to_server(controller, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        link = AgentLink(EmulatedBoard("agx-orin", 0, speed=speed),
                         AgentConfig(controller=f"127.0.0.1:{port}", backoff_base_s=0.05, backoff_max_s=0.2))
        stop = asyncio.Event()
        running = asyncio.create_task(link.run(stop))
        try:
            waiting = asyncio.create_task(done.wait())
            await asyncio.wait([waiting, running], timeout=60, return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            assert done.is_set(), f"the controller's script did not end (the link: {running})"
        finally:
            stop.set()
            await asyncio.wait_for(running, 30)   # and it raises what the link raised, if it did
            await server.stop(None)
        return link

    return asyncio.run(scenario())


def test_commands_over_the_in_flight_bound_are_refused_though_profiles_wait_without_tasks():
    """A batch of more checked profiles than MAX_COMMANDS_IN_FLIGHT: those beyond the bound are refused as
    RESOURCE_EXHAUSTED and never run (the profiles queued without a task of their own count toward it)."""
    n = link_mod.MAX_COMMANDS_IN_FLIGHT + 6
    cmds = [profile_command("resnet18", ORIN.grid("powertrain")[i], 40, f"p-{i}") for i in range(n)]
    controller = _ScriptedController(lambda s: cmds if s == 0 else [], lambda s: n if s == 0 else 0)
    link = _with_agent(controller, math.inf)
    got = controller.results[0]
    refused = [r for r in got if not r.ok]
    assert len(got) == n and len({r.command_id for r in got}) == n
    assert [r.command_id for r in refused] == [f"p-{i}" for i in range(link_mod.MAX_COMMANDS_IN_FLIGHT, n)]
    assert all(r.error.code == "RESOURCE_EXHAUSTED" and "commands are waiting already" in r.error.message
               for r in refused)
    assert link.executor.profiles_run == link_mod.MAX_COMMANDS_IN_FLIGHT   # the board ran the accepted ones only


def test_profiles_in_hand_when_a_session_ends_run_once_and_are_answered_on_the_next_session():
    """The session ends after the first result of three queued profiles: the other two go on (they are the
    board's), and the same ids sent on the next session get their results (joined or remembered) without a second
    run."""
    cmds = [profile_command("resnet18", m, 40, f"p-{i}") for i, m in enumerate(MODES[:3])]
    controller = _ScriptedController(lambda s: cmds if s < 2 else [], lambda s: (1, 3)[s] if s < 2 else 0)
    link = _with_agent(controller, 60.0)   # ~0.1 s a profile
    first, second = controller.results[:2]
    assert [r.command_id for r in first] == ["p-0"]
    assert sorted(r.command_id for r in second) == ["p-0", "p-1", "p-2"] and all(r.ok for r in second)
    assert link.executor.profiles_run == 3   # each once, across both sessions
    assert {r.command_id: r.profile.window_start_s for r in second}["p-0"] == first[0].profile.window_start_s


def test_a_check_that_fails_unexpectedly_fails_its_command_only(monkeypatch):
    """A fault in the agent's own check (not a refusal) answers that command INTERNAL; the session, and the profile
    after it in the same batch, go on (it took the whole agent down when the read loop ran the check)."""
    real = CommandExecutor.check

    def check(self, cmd):   # type: ignore[no-untyped-def]
        if cmd.command_id == "p-bad":
            raise RuntimeError("a fault in a check")
        return real(self, cmd)

    monkeypatch.setattr(CommandExecutor, "check", check)
    cmds = [profile_command("resnet18", MODES[0], 40, "p-bad"), profile_command("resnet18", MODES[1], 40, "p-0")]
    controller = _ScriptedController(lambda s: cmds if s == 0 else [], lambda s: 2 if s == 0 else 0)
    link = _with_agent(controller, math.inf)
    got = {r.command_id: r for r in controller.results[0]}
    assert got["p-0"].ok and not got["p-bad"].ok and got["p-bad"].error.code == "INTERNAL"
    assert link.executor.profiles_run == 1
