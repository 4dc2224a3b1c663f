"""The agent's queue of profiles (a campaign keeps several modes on a board): they run back to back in one worker
thread, a slow one's result goes back as soon as it ends, quick ones together, and everything runs in the order it
came: a command of another kind after the profiles queued before it, before those queued after it. Read from the
executor's own counts and the board's own record of the modes it was put in."""

from __future__ import annotations

import asyncio
import threading

from jetfleet.agent import executor as executor_mod
from jetfleet.agent.executor import CommandExecutor
from jetfleet.controller.campaigns.results import profile_command
from jetfleet.shared.catalog import get_catalog
from jetfleet.shared.convert import mode_to_pb
from jetfleet.shared.proto import agent_pb2
from jetfleet.twin.board import EmulatedBoard

from .test_training_commands import until

ORIN = get_catalog("agx-orin")
MODES = [m for m in ORIN.grid("powertrain")[::500]][:5]


def _profiles(n: int) -> list[agent_pb2.Command]:
    return [profile_command("resnet18", m, 40, f"p-{i}") for i, m in enumerate(MODES[:n])]


class RecordingBoard(EmulatedBoard):
    """A board that keeps the modes it is put in, in order (a profile applies its mode, a set_mode its own)."""

    applied: list = []

    def apply_mode(self, mode, preset=""):   # type: ignore[no-untyped-def]
        self.applied = [*self.applied, mode]
        return super().apply_mode(mode, preset)


def _step(cid: str, mode) -> agent_pb2.Command:   # type: ignore[no-untyped-def]
    return agent_pb2.Command(command_id=cid, set_mode=agent_pb2.SetMode(mode=mode_to_pb(mode)))


def test_a_set_mode_runs_after_the_profiles_sent_before_it_and_before_those_sent_after_it():
    step_mode = ORIN.presets[sorted(ORIN.presets)[0]]

    async def scenario():   # type: ignore[no-untyped-def]
        board = RecordingBoard("agx-orin", 0, speed=60.0)   # ~0.1 s of wall time a profile
        ex = CommandExecutor(board)
        p = _profiles(5)
        # as one CommandBatch arrives: two profiles, the step, three profiles, all at once
        runs = [asyncio.create_task(ex.execute(c)) for c in (p[0], p[1], _step("s-1", step_mode), *p[2:])]
        results = await asyncio.gather(*runs)
        # and a step sent while the queue runs waits for every profile sent before it
        late = [asyncio.create_task(ex.execute(c)) for c in _profiles(3)[:2]]   # answered from memory: no run
        more = [asyncio.create_task(ex.execute(profile_command("resnet18", m, 40, f"q-{i}")))
                for i, m in enumerate(MODES[:3])]
        await until(lambda: ex.profiles_run >= 6)
        step = await ex.execute(_step("s-2", step_mode))
        ran_before_step = ex.profiles_run
        await asyncio.gather(*late, *more)
        return results, step, ran_before_step, board.applied, ex

    results, step, ran_before_step, applied, ex = asyncio.run(scenario())
    assert all(r.ok for r in results) and step.ok
    assert applied[:6] == [MODES[0], MODES[1], step_mode, MODES[2], MODES[3], MODES[4]], applied
    assert ran_before_step == 8   # the three profiles queued before it ran first
    assert applied[-1] == step_mode and ex.profiles_run == 8


def test_a_slow_profiles_result_goes_back_when_it_ends_and_quick_ones_together(monkeypatch):
    async def scenario(speed: float):   # type: ignore[no-untyped-def]
        ex = CommandExecutor(EmulatedBoard("agx-orin", 0, speed=speed))
        results = await asyncio.gather(*(ex.execute(c) for c in _profiles(5)))
        assert all(r.ok for r in results), results
        return list(ex.settled), ex.profile_hops   # how many results each hand-over to the event loop carried

    slow, hops = asyncio.run(scenario(30.0))   # ~0.2 s a profile, longer than HOLD_S: each goes alone
    assert slow == [1] * 5 and hops == 1
    monkeypatch.setattr(executor_mod, "HOLD_S", 30.0)   # nothing is slow against that: all five go together
    quick, hops = asyncio.run(scenario(60.0))
    assert quick == [5] and hops == 1


class StuckBoard(EmulatedBoard):
    """A board whose run in one mode does not end until the test lets it (a hung driver, a very long mode)."""

    stuck_mode = None
    release = None

    def run_minibatches(self, workload, n, **kw):   # type: ignore[no-untyped-def]
        if self.read_mode() == self.stuck_mode:
            self.release.wait(30)
        return super().run_minibatches(workload, n, **kw)


def test_a_quick_result_is_not_kept_behind_a_profile_that_does_not_end():
    async def scenario():   # type: ignore[no-untyped-def]
        board = StuckBoard("agx-orin", 0)   # instant: the first profile ends in milliseconds, held with the next
        board.stuck_mode, board.release = MODES[1], threading.Event()
        ex = CommandExecutor(board)
        quick, stuck = (asyncio.create_task(ex.execute(c)) for c in _profiles(2))
        try:
            first = await asyncio.wait_for(quick, 10)   # collected within HOLD_S while the second still runs
            running = not stuck.done() and ex.profiles_run == 2
        finally:
            board.release.set()
        return first, running, await stuck

    first, running, second = asyncio.run(scenario())
    assert first.ok and running and second.ok
