"""The agent's queue of profiles (a campaign keeps several modes on a board): they run back to back in one worker
thread, a slow one's result goes back as soon as it ends, quick ones together, and a command of another kind that
waits for the board goes before the profiles queued behind the running one. Read from the executor's own counts."""

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


def test_a_set_mode_waiting_for_the_board_goes_before_the_queued_profiles():
    async def scenario():   # type: ignore[no-untyped-def]
        ex = CommandExecutor(EmulatedBoard("agx-orin", 0, speed=60.0))   # ~0.1 s of wall time a profile
        runs = [asyncio.create_task(ex.execute(c)) for c in _profiles(5)]
        await until(lambda: ex.profiles_run == 1)
        step = await ex.execute(agent_pb2.Command(command_id="s-1", set_mode=agent_pb2.SetMode(
            mode=mode_to_pb(ORIN.presets[sorted(ORIN.presets)[0]]))))
        ran_before_step = ex.profiles_run
        results = await asyncio.gather(*runs)
        return step, ran_before_step, results, ex

    step, ran_before_step, results, ex = asyncio.run(scenario())
    assert step.ok, step.error
    assert ran_before_step <= 2, ran_before_step   # the one running (and at most the next) before it, not all five
    assert all(r.ok for r in results) and ex.profiles_run == 5
    assert ex.profile_hops == 2   # the queue stopped for the step and went on after it


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
