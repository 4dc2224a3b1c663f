"""Jobs you can trust (issue 24), end to end on accelerated emulated boards: one board lease (a second job waits, an
operator's mode change is refused at once naming the holder), verdicts that come out the other way when the goal
was not kept, a job that survives its store going away, and the fleet queue placing jobs when a cap moves."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from click.testing import CliRunner

from jetfleet.cli.main import cli
from jetfleet.client import OperatorClient
from jetfleet.shared.proto import operator_pb2 as op

from .harness import FAST_CONTROLLER, LabThread
from .jobs_lab import NANO, install, make_lab, wait_job

pytestmark = pytest.mark.timeout(600)


def get(lab, job_id: str) -> op.Job:
    with OperatorClient(lab.address) as c:
        return c.call("GetJob", op.GetJobRequest(job_id=job_id))


def submit(lab, **kw) -> str:
    with OperatorClient(lab.address) as c:
        return c.call("SubmitJob", op.SubmitJobRequest(workload="mobilenet_v3", **kw)).job_id


def test_a_board_does_one_thing_a_second_job_waits_and_a_mode_change_is_refused_naming_the_holder(tmp_path,
                                                                                                reference_nets,
                                                                                                target_models):
    lab = make_lab(tmp_path, reference_nets, speed=60.0)
    try:
        install(lab, target_models)
        first = submit(lab, device_id="orin-nano-0", power_budget_w=11, minibatches=20_000)
        lab.wait(lambda: get(lab, first).state == "running", 60, "the first job running")
        refused = "2/729.6/408/665.6"
        # an operator's mode change on the held board: refused at once, naming the job, and never applied later
        r = CliRunner().invoke(cli, ["mode", "set", "orin-nano-0", refused, "--controller", lab.address])
        assert r.exit_code == 7 and f"orin-nano-0 is busy: held by job {first}" in r.output, r.output
        # a second job on the same board, with no model of its workload: its profiling waits for the board
        with OperatorClient(lab.address) as c:
            c.call("SubmitJob", op.SubmitJobRequest(workload="lstm", device_id="orin-nano-0", power_budget_w=11,
                                                    minibatches=200, profile_modes=10, request_id="lstm-job"))
        board = lab.lab.agents[0]
        lab.wait(lambda: get(lab, "lstm-job").waiting_for == "a board", 30, "the second job waiting for the board")
        checks = 0
        while get(lab, first).state == "running" and checks < 30:   # while the first job runs, the board is its own
            checks += 1
            held = lab.do(lambda: lab.lab.controller.service.device_pb(lab.registry.get("orin-nano-0")).held_by)
            measured = lab.do(lambda: sum(lab.lab.controller.campaigns.runs[c].count("done")
                                          for c in lab.lab.controller.jobs.records["lstm-job"].campaign_ids))
            assert held.startswith(f"job {first}") and measured == 0, (held, measured)
            assert lab.do(lambda: str(board.board.read_mode())) != refused
            lstm = get(lab, "lstm-job")
            assert lstm.state in ("queued", "profiling") and lstm.waiting_for == "a board", (lstm.state, lstm.detail)
        assert checks >= 5, "the first job ended before the board's holder could be checked"
        with OperatorClient(lab.address) as c:
            c.call("CancelJob", op.CancelJobRequest(job_id=first))
        done = wait_job(lab, "lstm-job", timeout_s=300)
        assert done.state == "done", done.detail          # the board came free: it profiled, then ran
    finally:
        lab.close()


@pytest.fixture(scope="module")
def biased_model(reference_nets):
    """A calibrated mobilenet_v3 model of the Orin Nano from 40 modes whose times were scaled to 60%."""
    import numpy as np

    from jetfleet.controller.powertrain.calibrate import fit_calibrated_many
    from jetfleet.research.powertrain.evaluate import twin_truth

    g = twin_truth(NANO, "mobilenet_v3", seed=0)
    idx = np.random.default_rng(2).choice(len(g.modes), 40, replace=False)
    _, (tn, pn) = reference_nets
    ct, cp = (fit_calibrated_many(ref, [(g.x[idx], y[idx])])[0] for ref, y in ((tn, g.time_ms * 0.6), (pn, g.power_w)))
    return [g.modes[i] for i in idx], ct, cp


def test_a_job_that_cannot_keep_its_budget_says_so_and_a_cancelled_one_is_not_judged(lab, target_models, biased_model):
    install(lab, target_models, "low")   # its power predictions are 20% low: the first choice draws too much
    # windows longer than the job: the loop never gets to correct it
    # (and it commits to it unmeasured: tests/test_job_confirm.py shows the confirmation keeping it instead)
    over = submit(lab, device_id="orin-nano-0", power_budget_w=11, minibatches=3000, window_s=3600, no_confirm=True)
    done = wait_job(lab, over)
    assert done.state == "done" and not done.goal_kept and not done.steps, done.detail
    assert done.verdict.judged and not done.verdict.kept and "OVER the 11 W budget" in done.verdict.constraint
    assert "goal MISSED" in done.detail and done.energy_j / done.elapsed_s > 11 * 1.01
    # a model fitted on 40 modes whose times were 40% low: tight bounds, all of them wrong. Within the budget, but
    # its mode runs slower than its upper bound promised: the objective was not kept
    install(lab, {"biased": biased_model}, "biased")
    slow = wait_job(lab, submit(lab, device_id="orin-nano-0", power_budget_w=30, minibatches=3000, window_s=3600,
                                no_confirm=True))
    assert slow.state == "done" and not slow.goal_kept, slow.detail
    assert "SLOWER than its prediction" in slow.verdict.objective and "within the 30 W budget" in slow.verdict.constraint
    # a job cancelled while it runs: its verdict is not "kept", whatever its windows showed
    r = CliRunner().invoke(cli, ["job", "submit", "--workload", "mobilenet_v3", "--device", "orin-nano-0",
                                 "--power-budget", "30W", "--minibatches", "100000", "--controller", lab.address,
                                 "--output", "json"])
    jid = json.loads(r.stdout)["job_id"]
    lab.wait(lambda: get(lab, jid).state == "running", 60, "running")
    r = CliRunner().invoke(cli, ["job", "cancel", jid, "--controller", lab.address])
    cancelled = wait_job(lab, jid)
    assert cancelled.state == "cancelled" and not cancelled.goal_kept and not cancelled.verdict.judged
    assert "goal not judged (cancelled after" in cancelled.detail
    text = CliRunner().invoke(cli, ["job", "show", jid, "--controller", lab.address]).output
    assert "goal kept" not in text and "goal not judged" in text


@pytest.fixture
def lab(tmp_path, reference_nets):
    lt = make_lab(tmp_path, reference_nets)
    yield lt
    lt.close()


def test_a_job_waits_out_its_store_going_away_and_its_state_is_right_after_a_restart(redis_server, reference_nets,
                                                                                     target_models):
    """Issue 24, defect 7: with the store down, a job's runner died; 'failed' was shown but never stored, and after a
    restart the job ran to done. Now it waits for the store and ends once, the same in memory and in the store."""
    from jetfleet.controller.powertrain.artifacts import ModelRepo

    redis_server.flush()
    lt = LabThread(redis_server.url, []).start()
    try:
        lt.do(lambda: lt.lab.add_agent(NANO, speed=150.0))
        lt.call(lt.lab.wait_online(1))
        modes, (tn, pn) = reference_nets
        lt.do(lambda: ModelRepo(lt.lab.controller.store).save("reference", NANO, "resnet18", "", modes, tn, pn, {},
                                                              (0.0, 0.0, 0.0), None))
        install(lt, target_models)
        jid = submit(lt, device_id="orin-nano-0", power_budget_w=11, minibatches=6000)
        lt.wait(lambda: get(lt, jid).minibatches_done > 500, 60, "the job training")
        retries = lt.lab.controller.metrics.store_retries
        before = retries._value.get()
        redis_server.kill()                                   # SIGKILL: the store is gone mid-run
        lt.wait(lambda: retries._value.get() > before, 60, "a write to wait for the store")
        assert get(lt, jid).state not in ("failed", "done")
        redis_server.start()
        done = wait_job(lt, jid, timeout_s=300)
        assert done.state == "done" and done.minibatches_done == 6000, done.detail
        lt.call(lt.lab.stop_controller())
        lt.call(lt.lab.start_controller())
        again = get(lt, jid)
        assert (again.state, again.minibatches_done, again.detail) == ("done", 6000, done.detail)
        assert sum(r.trained for r in again.runs) == lt.do(
            lambda: sum(n for c, n in lt.lab.agents[0].link.executor.trained.items() if c.startswith(jid)))
    finally:
        lt.close()


def test_fleet_jobs_are_placed_when_the_cap_moves_and_wait_for_their_boards_after_a_restart(tmp_path, reference_nets):
    """Issue 24, defect 8: cap 14 W, five fleet jobs, the cap moved to 11 W then 18 W: three stayed queued with both
    boards idle; after a restart all three failed ('none offers it'), judged before the agents reconnected."""
    import numpy as np

    from jetfleet.controller.powertrain.artifacts import ModelRepo
    from jetfleet.controller.powertrain.calibrate import Calibration

    modes, (tn, pn) = reference_nets        # resnet18 on the Orin Nano's grid, used here as the job's own model
    lt = LabThread(str(tmp_path / "data"), [], config=replace(FAST_CONTROLLER, fleet_period_s=0.1)).start()
    try:
        for _ in range(2):
            lt.do(lambda: lt.lab.add_agent(NANO, speed=300.0))
        lt.call(lt.lab.wait_online(2))
        spread = Calibration(tuple(float(x) for x in np.linspace(-0.08, 0.08, 40)))
        lt.do(lambda: ModelRepo(lt.lab.controller.store).save("transfer", NANO, "resnet18", "", modes, tn, pn, {},
                                                              (0.0, 0.0, 0.0), (spread, spread)))
        lt.wait(lambda: all(lt.telemetry.last(a.device_id) is not None for a in lt.lab.agents), what="telemetry")
        run = lambda *a: CliRunner().invoke(cli, [*a, "--controller", lt.address])  # noqa: E731
        assert run("fleet", "cap", "set", "14W").exit_code == 0
        jobs = []
        with OperatorClient(lt.address) as c:
            for i in range(5):
                jobs.append(c.call("SubmitJob", op.SubmitJobRequest(workload="resnet18", fleet=True,
                                                                    minibatches=4000 + 400 * i)).job_id)
        assert run("fleet", "cap", "set", "11W").exit_code == 0
        assert run("fleet", "cap", "set", "18W").exit_code == 0
        lt.call(lt.lab.stop_controller())                     # a restart with the queue full ...
        for a in lt.lab.agents:
            lt.call(a.stop())                                 # ... and the boards not back yet
        lt.call(lt.lab.start_controller())
        lt.wait(lambda: all(get(lt, j).state in ("queued", "done") for j in jobs), 10, "the jobs loaded and waiting")
        waiting = [j for j in jobs if get(lt, j).state == "queued"]
        assert waiting, "every job ended before the restart: nothing was left to wait"
        for j in waiting:   # waiting for what is missing for a while, not judged on it
            assert get(lt, j).waiting_for, get(lt, j).detail
        for a in lt.lab.agents:
            lt.do(a.start)
        for j in jobs:
            done = wait_job(lt, j, timeout_s=300)
            assert done.state == "done", (j, done.detail)
    finally:
        lt.close()
