"""`job submit --attach NAME --device D --power-budget W`: the operator's own training process (the example's plain
PyTorch script on scikit-learn's digits) adopted by a controller job on a lab board (the real agent code on an
emulated Orin Nano, its session socket): its modes profiled online on its own steps, the reference transferred, the
mode chosen and applied, the rest of its steps trained in it; the same lifecycle, lease and verdict as a built-in
job, and what the board counted is what the job says. Faults: the process killed mid-profiling fails the job with
the reason and frees the board; a job that cannot hold its profiling is refused before anything is stored."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from jetfleet.client import OperatorClient
from jetfleet.shared.errors import InvalidArgument

from . import procs
from .harness import LabThread
from .jobs_lab import NANO, SPEED, wait_job

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "own-training" / "train.py"


@contextlib.contextmanager
def session_lab(tmp_path: Path, reference_nets, templates=None,  # type: ignore[no-untyped-def]
                dial: Callable[[str], str] | None = None) -> Iterator[LabThread]:
    """A lab with one emulated Orin Nano whose agent opens session sockets (and may launch ``templates``), and the
    Nano's ResNet-18 reference to transfer from. ``dial``: the address the agent dials, given the controller's."""
    from jetfleet.controller.powertrain.artifacts import ModelRepo

    lt = LabThread(str(tmp_path / "data"), []).start()
    try:
        lt.lab.session_dir = str(tmp_path / "sessions")
        if templates is not None:
            lt.lab.agent_config = replace(lt.lab.agent_config, templates=templates)
        lt.do(lambda: lt.lab.add_agent(NANO, speed=SPEED, controller=dial(lt.address) if dial else ""))
        lt.call(lt.lab.wait_online(1))
        modes, (tn, pn) = reference_nets
        lt.do(lambda: ModelRepo(lt.lab.controller.store).save("reference", NANO, "resnet18", "", modes, tn, pn, {},
                                                              (0.0, 0.0, 0.0), None))
        yield lt
    finally:
        lt.close()


@pytest.fixture
def lab(tmp_path, reference_nets):
    pytest.importorskip("sklearn", reason="the example's dataset ships with scikit-learn (the dev extra)")
    with session_lab(tmp_path, reference_nets) as lt:
        yield lt


def trained_for(agent, job_id):
    """What the board itself counted for the job's commands (its profiling and its training)."""
    return sum(n for cid, n in agent.link.executor.trained.items() if cid.startswith(job_id + "-"))


@pytest.mark.slow
def test_an_attached_job_profiles_online_then_trains_its_rest_in_the_chosen_mode(lab, tmp_path):
    (agent,) = lab.lab.agents
    sock = tmp_path / "sessions" / f"{agent.device_id}.sock"
    with OperatorClient(lab.address) as c:
        job = c.submit_job("digits-mlp", device_id=agent.device_id, power_budget_w=9.0, minibatches=800,
                           profile_modes=10, attach=True, attach_timeout_s=120)
    # the process trains longer than the job: its steps between the job's commands are its own, unmanaged
    child = procs.spawn([sys.executable, str(EXAMPLE), "--epochs", "1000", "--socket", str(sock)],
                        stdout=procs.PIPE, stderr=procs.PIPE, text=True)
    try:
        final = wait_job(lab, job.job_id, timeout_s=240)
        assert child.poll() is None, child.stderr.read()[-3000:]     # it trains on, unmanaged, after the job
    finally:
        child.end()
    assert final.state == "done", final.detail
    assert final.minibatches_done >= 800
    assert trained_for(agent, job.job_id) == final.minibatches_done          # judged on the board
    assert "online profiling: 200 of its own steps (25% of the job)" in final.detail, final.detail
    assert f"the boards trained {final.minibatches_done} minibatches for it;" in final.detail
    assert "against" in final.detail and "goal" in final.detail
    profiles = lab.do(lambda: lab.lab.controller.store.query_profiles(board_model=NANO, workload="digits-mlp"))
    # its 10 modes profiled online, and the modes it measured confirming its choice (on its own steps too)
    assert {p.source for p in profiles} == {f"job:{job.job_id}"}
    assert len(profiles) == 10 + len(final.confirms)      # a mode measured already is never measured again
    assert lab.lab.controller.leases.holder(agent.device_id) is None       # released at its end


@pytest.mark.slow
def test_the_process_killed_mid_profiling_fails_the_job_with_the_reason_and_frees_the_board(lab, tmp_path):
    (agent,) = lab.lab.agents
    sock = tmp_path / "sessions" / f"{agent.device_id}.sock"
    with OperatorClient(lab.address) as c:
        job = c.submit_job("digits-mlp", device_id=agent.device_id, power_budget_w=9.0, minibatches=5000,
                           profile_modes=10, attach=True, attach_timeout_s=20)
    child = procs.spawn([sys.executable, str(EXAMPLE), "--epochs", "1000", "--socket", str(sock)],
                        stdout=procs.PIPE, stderr=procs.PIPE, text=True)
    try:
        lab.wait(lambda: trained_for(agent, job.job_id) > 60, 120, "profiling on the process's steps")
        child.kill()
        final = wait_job(lab, job.job_id, timeout_s=90)   # at once, or (killed between two commands) after 20 s
    finally:
        child.end()
    assert final.state == "failed"
    assert "digits-mlp" in final.detail and "went away (exited or killed)" in final.detail, final.detail
    assert lab.lab.controller.leases.holder(agent.device_id) is None
    mode = agent.board.read_mode()
    assert agent.board.catalog.validate(mode) == mode          # left in one of its own modes


def test_an_attached_job_too_short_for_its_profiling_is_refused_before_anything_is_stored(lab):
    (agent,) = lab.lab.agents
    with OperatorClient(lab.address) as c:
        with pytest.raises(InvalidArgument) as e:
            c.submit_job("digits-mlp", device_id=agent.device_id, power_budget_w=9.0, minibatches=100,
                         profile_modes=10, attach=True)
        assert e.value.field == "minibatches" and "at least 800 steps" in e.value.message
        with pytest.raises(InvalidArgument) as e:
            c.submit_job("digits-mlp", board_model=NANO, power_budget_w=9.0, minibatches=1000, attach=True)
        assert e.value.field == "device_id"
        assert c.list_jobs() == []


@pytest.mark.slow
def test_the_examples_run_sh_submits_the_job_trains_and_prints_the_job_id_last(lab, tmp_path):
    (agent,) = lab.lab.agents
    sock = tmp_path / "sessions" / f"{agent.device_id}.sock"
    # the script trains on, unmanaged, while the controller fits its model (tens of seconds on a loaded machine):
    # 200 epochs (8,800 steps) outlast that; run.sh returns when the script ends
    env = {**os.environ, "PYTHON": sys.executable, "STEPS": "800", "PROFILE_MODES": "10", "EPOCHS": "200"}
    out = procs.run(["sh", str(EXAMPLE.parent / "run.sh"), lab.address, agent.device_id, "9W", str(sock)], env=env,
                    timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    job_id = out.stdout.strip().splitlines()[-1]
    final = wait_job(lab, job_id, timeout_s=60)
    assert final.state == "done", final.detail
    assert "9 W budget" in final.detail and trained_for(agent, job_id) == final.minibatches_done


@pytest.mark.slow
def test_a_second_job_on_a_board_an_attached_job_holds_waits_for_it_named_by_the_lease(lab, tmp_path):
    (agent,) = lab.lab.agents
    sock = tmp_path / "sessions" / f"{agent.device_id}.sock"
    with OperatorClient(lab.address) as c:
        first = c.submit_job("digits-mlp", device_id=agent.device_id, power_budget_w=9.0, minibatches=5000,
                             profile_modes=10, attach=True, attach_timeout_s=60)
        child = procs.spawn([sys.executable, str(EXAMPLE), "--epochs", "1000", "--socket", str(sock)],
                            stdout=procs.PIPE, stderr=procs.PIPE, text=True)
        try:
            lab.wait(lambda: trained_for(agent, first.job_id) > 0, 120, "the first job profiling on the process")
            second = c.submit_job("other-mlp", device_id=agent.device_id, power_budget_w=9.0, minibatches=5000,
                                  profile_modes=10, attach=True)
            lab.wait(lambda: "busy" in c.get_job(second.job_id).detail, 30, "the second job to wait for the board")
            detail = c.get_job(second.job_id).detail
            assert c.get_job(second.job_id).state == "queued" and f"busy: job {first.job_id}" in detail, detail
            c.cancel_job(second.job_id)
            c.cancel_job(first.job_id)
            assert wait_job(lab, first.job_id, timeout_s=60).state == "cancelled"
        finally:
            child.end()
    assert lab.lab.controller.leases.holder(agent.device_id) is None
