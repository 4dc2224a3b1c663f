"""A first job on a fresh lab (issue 25): no model and no reference to transfer from. The example's `run.sh` as an
attached job profiles its modes online on the script's own steps, fits its time and power networks from scratch on
them (the from-scratch baseline of a transfer, calibrated the same way), chooses with the same bounds, and finishes
with its verdict judged on the board's measurements; its summary says the model was fitted from scratch and how to
make it surer. The online profiling is sized to the job's length (``online.plan``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from jetfleet.client import OperatorClient
from jetfleet.controller.jobs.online import MIN_PROFILE_MODES, PROFILE_SHARE, WARMUP_STEPS, plan
from jetfleet.shared import defaults
from jetfleet.shared.errors import InvalidArgument

from . import procs
from .harness import LabThread
from .jobs_lab import NANO, SPEED, wait_job

ROOT = Path(__file__).resolve().parents[1]
RUN_SH = ROOT / "examples" / "own-training" / "run.sh"


def test_the_online_profiling_is_sized_to_the_jobs_length():
    # a 4,000-step job: the default 50 modes shrink to 20 of 50 steps, a quarter of its steps
    p = plan(4000, 0, 50)
    assert (p.modes, p.timed_steps, p.steps) == (20, defaults.MINIBATCHES, 1000)
    # a long job keeps the default; the shortest job profiles the fewest modes with the fewest timed steps
    assert (plan(100_000, 0, 50).modes, plan(100_000, 0, 50).timed_steps) == (50, defaults.MINIBATCHES)
    p = plan(800, 0, 50)
    assert (p.modes, p.timed_steps) == (MIN_PROFILE_MODES, 10) and p.steps <= PROFILE_SHARE * 800
    # k asked for is kept, its timed steps shrink to fit
    p = plan(2000, 24, 50)
    assert p.modes == 24 and p.steps <= PROFILE_SHARE * 2000 and p.timed_steps == 500 // 24 - WARMUP_STEPS


def test_a_job_too_short_for_an_honest_profile_or_asking_too_many_modes_is_refused_naming_the_field():
    with pytest.raises(InvalidArgument) as e:
        plan(799, 0, 50)
    assert e.value.field == "minibatches" and "at least 800 steps" in e.value.message
    with pytest.raises(InvalidArgument) as e:
        plan(800, 11, 50)
    assert e.value.field == "profile_modes" and "at most 10 modes" in e.value.message


@pytest.fixture
def fresh_lab(tmp_path):
    pytest.importorskip("sklearn", reason="the example's dataset ships with scikit-learn (the dev extra)")
    lt = LabThread(str(tmp_path / "data"), []).start()
    try:
        lt.lab.session_dir = str(tmp_path / "sessions")
        lt.do(lambda: lt.lab.add_agent(NANO, speed=SPEED))
        lt.call(lt.lab.wait_online(1))
        yield lt
    finally:
        lt.close()


@pytest.mark.slow
def test_run_sh_on_a_fresh_lab_fits_from_scratch_and_finishes_with_its_goal_judged_on_measurements(fresh_lab,
                                                                                                    tmp_path):
    lab = fresh_lab
    (agent,) = lab.lab.agents
    store = lab.lab.controller.store
    assert lab.do(lambda: store.list_docs("model")) == []            # no model, no reference
    sock = tmp_path / "sessions" / f"{agent.device_id}.sock"
    # run.sh in the background: the script trains on (unmanaged) past the job, however long the fit takes here
    env = {**os.environ, "PYTHON": sys.executable, "STEPS": "800", "EPOCHS": "1000"}
    child = procs.spawn(["sh", str(RUN_SH), lab.address, agent.device_id, "9W", str(sock)], env=env,
                        stdout=procs.PIPE, stderr=procs.PIPE, text=True)
    try:
        with OperatorClient(lab.address) as c:
            lab.wait(lambda: len(c.list_jobs()) == 1 or child.poll() is not None, 60, "run.sh to submit its job")
            assert child.poll() is None, child.stderr.read()[-3000:]
            job_id = c.list_jobs()[0].job_id
        final = wait_job(lab, job_id, timeout_s=240)
    finally:
        child.kill_group()
        child.wait()
    assert final.state == "done", final.detail
    trained = sum(n for cid, n in agent.link.executor.trained.items() if cid.startswith(job_id + "-"))
    assert trained == final.minibatches_done >= 800                  # the board's own count
    # profiled online within a quarter of its steps: the default k shrank to 10 modes of 10 + 10 steps
    assert "online profiling: 200 of its own steps (25% of the job)" in final.detail, final.detail
    assert "model fitted from scratch on 10 profiled modes" in final.detail and "train-reference" in final.detail
    assert "model fitted from scratch on 10 profiled modes" in final.choice_note      # `job show`'s choice line
    (doc,) = lab.do(lambda: store.list_docs("model"))
    assert doc["kind"] == "scratch" and doc["parent_id"] == "" and "calibration" in doc
    assert final.model_id == doc["model_id"]
    # the verdict is the board's: the observed mean power against the budget
    assert "9 W budget" in final.detail and final.verdict.judged, final.detail
    mean_w = final.energy_j / final.elapsed_s
    assert f"{mean_w:.2f} W" in final.detail
