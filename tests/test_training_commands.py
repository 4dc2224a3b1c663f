"""The agent's training command: progress reports on the board's clock, a job's own mode step between two
minibatches while the training runs, everything else waiting for the board, and runs that stop with the agent."""

import asyncio

from jetfleet.agent.executor import CommandExecutor
from jetfleet.shared.catalog import get_catalog
from jetfleet.shared.convert import mode_from_pb, mode_to_pb
from jetfleet.shared.proto import agent_pb2
from jetfleet.twin.board import EmulatedBoard

ORIN = get_catalog("agx-orin")


def train(cid: str, n: int, interval_s: float = 2.0) -> agent_pb2.Command:
    return agent_pb2.Command(command_id=cid, run_training=agent_pb2.RunTraining(
        workload="resnet18", minibatches=n, minibatch_size=16, workers=4, progress_interval_s=interval_s))


def set_mode(cid: str, mode, during: str = "") -> agent_pb2.Command:
    return agent_pb2.Command(command_id=cid, set_mode=agent_pb2.SetMode(mode=mode_to_pb(mode), during_command_id=during))


async def until(predicate, timeout_s: float = 10.0) -> None:
    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0)   # yield to the loop (the training runs in a worker thread)

    await asyncio.wait_for(poll(), timeout_s)


def test_progress_reports_are_cumulative_on_the_board_clock_and_end_with_a_final_one():
    reports = []

    async def scenario():
        ex = CommandExecutor(EmulatedBoard("agx-orin", 0, speed=2000.0))
        ex.on_progress = reports.append
        return await ex.execute(train("t1", 400, 1.0))

    result = asyncio.run(scenario())
    assert result.ok and len(result.training.minibatch_times_s) == 400
    assert len(reports) > 10 and reports[-1].final and not any(r.final for r in reports[:-1])
    done = [r.minibatches_done for r in reports]
    assert done == sorted(done) and done[-1] == 400
    assert all(b.elapsed_s - a.elapsed_s >= 1.0 for a, b in zip(reports[:-2], reports[1:-1], strict=True))  # 1 s apart
    energy = [r.energy_j for r in reports]
    assert energy == sorted(energy) and result.training.energy_j >= energy[-1] > 0
    mean_w = result.training.energy_j / result.training.elapsed_s
    assert 35 < mean_w < 60     # resnet18 at MAXN on AGX Orin, setup at idle included


def test_a_jobs_own_step_applies_while_its_training_runs_and_anything_else_waits():
    async def scenario():
        board = EmulatedBoard("agx-orin", 0, speed=200.0)   # 1500 x 55 ms / 200 = ~0.4 s of wall time
        ex = CommandExecutor(board)
        modes_seen = []
        ex.on_progress = lambda r: modes_seen.append(mode_from_pb(r.mode))
        run = asyncio.create_task(ex.execute(train("job-r1", 1500)))
        await until(lambda: ex.busy == "job-r1" and len(modes_seen) > 2)
        step = await ex.execute(set_mode("s1", ORIN.presets["MODE_30W"], during="job-r1"))
        stepped_while_running = not run.done()
        other = asyncio.create_task(ex.execute(set_mode("s2", ORIN.presets["MODE_15W"])))          # not the job's: waits
        stranger = asyncio.create_task(ex.execute(set_mode("s3", ORIN.presets["MODE_15W"], during="another-job")))
        await asyncio.sleep(0)
        waited = not other.done() and not stranger.done()
        result = await run
        await other
        await stranger
        return step, stepped_while_running, waited, result, modes_seen, board

    step, stepped_while_running, waited, result, modes_seen, board = asyncio.run(scenario())
    assert step.ok and stepped_while_running and waited and result.ok
    assert modes_seen[0] == ORIN.maxn and ORIN.presets["MODE_30W"] in modes_seen
    times = result.training.minibatch_times_s
    assert max(times[-100:]) > 1.2 * sorted(times[20:100])[40]       # the rest of the run went at the 30W pace
    assert board.read_mode() == ORIN.presets["MODE_15W"]                 # the others ran after the training


def test_a_training_stops_when_its_agent_closes():
    async def scenario():
        ex = CommandExecutor(EmulatedBoard("agx-orin", 0, speed=50.0))
        run = asyncio.create_task(ex.execute(train("long", 50_000)))
        await until(lambda: ex.busy == "long")
        ex.close()
        return await run

    result = asyncio.run(scenario())
    assert not result.ok and result.error.code == "CANCELLED"


def test_a_run_outlives_the_session_that_asked_for_it_and_its_id_sent_again_joins_it_or_gets_its_result():
    """Issue 24, defect 1: a session's command tasks are cancelled when its stream breaks; the run went on, its result
    was never remembered, and the id sent again on the next session started a second run (12,000 minibatches
    trained for a 6,000-minibatch job). The board's own count decides: one run, of exactly its length."""
    async def scenario():
        board = EmulatedBoard("agx-orin", 0, speed=400.0)   # 800 x 55 ms / 400: ~0.1 s of wall time
        ex = CommandExecutor(board)
        calls = []
        original = board.run_minibatches

        def counted(*a, **kw):
            calls.append(a[1])
            return original(*a, **kw)

        board.run_minibatches = counted
        first = asyncio.create_task(ex.execute(train("job-r1", 800)))   # asked by session 1
        await until(lambda: ex.trained.get("job-r1", 0) > 50)
        first.cancel()                                                   # session 1 ends: its waiter goes away
        await asyncio.gather(first, return_exceptions=True)
        while_running = await ex.execute(train("job-r1", 800))          # session 2 sends the same id: joins the run
        again = await ex.execute(train("job-r1", 800))                  # and once it ended, gets its result
        return calls, ex.trained["job-r1"], while_running, again

    calls, trained, joined, again = asyncio.run(scenario())
    assert calls == [800] and trained == 800, (calls, trained)
    assert joined.ok and len(joined.training.minibatch_times_s) == 800 and again == joined


def test_a_run_whose_session_ended_is_remembered_even_if_nobody_waits_for_it_any_more():
    async def scenario():
        board = EmulatedBoard("agx-orin", 0, speed=400.0)
        ex = CommandExecutor(board)
        first = asyncio.create_task(ex.execute(train("job-r2", 300)))
        await until(lambda: ex.trained.get("job-r2", 0) > 10)
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        await until(lambda: ex.busy == "", 30)                            # the run ended on its own
        result = await ex.execute(train("job-r2", 300))                   # answered from memory: no second run
        return ex.trained["job-r2"], result

    trained, result = asyncio.run(scenario())
    assert trained == 300 and result.ok and len(result.training.minibatch_times_s) == 300
