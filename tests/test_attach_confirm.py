"""An attached job's power budget is confirmed on the operator's own steps (``jobs/confirming.py`` with
``OnlineProfiler.measure``): before committing, the job measures the model's choice on the process's training
(the mode applied, a warm-up, timed steps with their energy), the closed loop's model learns it, and the job
commits to the fastest mode measured within the budget. The measured steps are the job's training: the board
counts them for it. ``no_confirm`` commits to the model's choice unmeasured; a confirmation that does not fit a
quarter of the job is refused naming ``confirm_profiles``. The process here is a plain loop of a session named
like a built-in workload, so the emulated board runs that workload's steps (no torch, seconds per job)."""

from __future__ import annotations

import sys

import pytest

from jetfleet.client import OperatorClient
from jetfleet.controller.jobs.online import WARMUP_STEPS
from jetfleet.shared import defaults
from jetfleet.shared.errors import InvalidArgument

from . import procs
from .harness import LabThread
from .jobs_lab import NANO, SPEED, install, wait_job

LOOP = ("import sys\nfrom jetfleet.session import Session\n"
        "with Session(sys.argv[1], path=sys.argv[2]) as s:\n"
        "    while True:\n        sum(range(2000))\n        s.step()\n")


@pytest.fixture
def lab(tmp_path, target_models):
    lt = LabThread(str(tmp_path / "data"), []).start()
    try:
        lt.lab.session_dir = str(tmp_path / "sessions")
        lt.do(lambda: lt.lab.add_agent(NANO, speed=SPEED))
        lt.call(lt.lab.wait_online(1))
        install(lt, target_models, "quick")   # a mobilenet_v3 model whose choices run slower than its bounds say
        yield lt
    finally:
        lt.close()


def board_commands(lab, job_id):
    """The board's own count of minibatches per command of the job."""
    (agent,) = lab.lab.agents
    return lab.do(lambda: {cid: n for cid, n in agent.link.executor.trained.items() if cid.startswith(job_id + "-")})


def run_attached(lab, tmp_path, **kw):
    (agent,) = lab.lab.agents
    sock = tmp_path / "sessions" / f"{agent.device_id}.sock"
    with OperatorClient(lab.address) as c:
        job = c.submit_job("mobilenet_v3", device_id=agent.device_id, power_budget_w=11.0, minibatches=1000,
                           attach=True, attach_timeout_s=60, seed=1, **kw)
    child = procs.spawn([sys.executable, "-c", LOOP, "mobilenet_v3", str(sock)], stdout=procs.DEVNULL,
                        stderr=procs.PIPE, text=True)
    try:
        final = wait_job(lab, job.job_id, timeout_s=120)
        assert child.poll() is None, child.stderr.read()[-3000:]
    finally:
        child.end()
    return final, board_commands(lab, job.job_id)


def test_an_attached_jobs_choice_is_measured_on_its_own_steps_before_it_commits(lab, tmp_path):
    final, commands = run_attached(lab, tmp_path)
    assert final.state == "done", final.detail
    assert 1 <= len(final.confirms) <= 3, final.detail
    # each measurement was the process's training on the board: a warm-up and the timed steps, counted for the job
    for i in range(len(final.confirms)):
        assert commands[f"{final.job_id}-c{i}w"] == WARMUP_STEPS and commands[f"{final.job_id}-c{i}"] == \
            defaults.MINIBATCHES
    assert sum(commands.values()) == final.minibatches_done == final.board_minibatches == 1000
    assert f"{len(final.confirms)} mode(s) measured before committing" in final.detail
    # committed to the fastest mode measured within the budget (the model's choice if it was one of them)
    fits = [cf for cf in final.confirms if cf.power_w <= 11.0]
    choice = lab.do(lambda: lab.lab.controller.store.get_job(final.job_id)).choice
    assert fits and choice.mode == min(fits, key=lambda cf: cf.time_ms).mode, (choice, final.confirms)
    profiles = lab.do(lambda: lab.lab.controller.store.query_profiles(board_model=NANO, workload="mobilenet_v3"))
    assert {p.mode for p in profiles if p.source == f"job:{final.job_id}"} == {cf.mode for cf in final.confirms}


def test_no_confirm_commits_to_the_models_choice_unmeasured(lab, tmp_path):
    final, commands = run_attached(lab, tmp_path, no_confirm=True)
    assert final.state == "done", final.detail
    assert not final.confirms and not any("-c" in cid[len(final.job_id):] for cid in commands), commands
    assert sum(commands.values()) == final.minibatches_done == 1000


def test_a_confirmation_that_does_not_fit_a_quarter_of_the_job_is_refused_naming_the_field(lab):
    (agent,) = lab.lab.agents
    with OperatorClient(lab.address) as c:
        with pytest.raises(InvalidArgument) as e:   # 5 of 10 + 40 steps fit in a quarter of 1,000
            c.submit_job("mobilenet_v3", device_id=agent.device_id, power_budget_w=11.0, minibatches=1000,
                         attach=True, confirm_profiles=6)
        assert e.value.field == "confirm_profiles" and "at most 5 modes" in e.value.message, e.value.message
        short = c.submit_job("mobilenet_v3", device_id=agent.device_id, power_budget_w=11.0, minibatches=100,
                             attach=True)   # the default 3 shrinks to what fits: none
        assert lab.do(lambda: lab.lab.controller.store.get_job(short.job_id)).options.confirm_profiles == 0
        c.cancel_job(short.job_id)
        assert len(c.list_jobs()) == 1
