"""Confirm before committing (issue 26, wired into jobs): a power budget's choice is measured on the job's board
before the job commits to it. The same model whose power predictions are 20% low makes an unconfirmed job run over
its budget (the verdict says so) and a confirmed one run within it; what the board profiled is read from the agent's
own memory of its commands, not only from the controller's record. A board cut off from the controller while the job
confirms its choice is waited out: the job queues, and once the board is back it measures again and trains its length
once (the board's own count)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from jetfleet.cli.main import cli
from jetfleet.client import OperatorClient
from jetfleet.shared.convert import mode_from_pb
from jetfleet.shared.proto import operator_pb2 as op

from .harness import LabThread
from .jobs_lab import NANO, SPEED, install, make_lab, wait_job
from .netcut import CuttableProxy

pytestmark = pytest.mark.timeout(600)
BUDGET_W = 11.0


@pytest.fixture
def lab(tmp_path, reference_nets):
    lt = make_lab(tmp_path, reference_nets)
    yield lt
    lt.close()


def submit(lab, **kw) -> str:
    with OperatorClient(lab.address) as c:
        return c.call("SubmitJob", op.SubmitJobRequest(workload="mobilenet_v3", device_id="orin-nano-0", **kw)).job_id


def board_profiles(lab) -> list[str]:
    """The modes the board itself profiled (the agent's remembered results of its run_profile commands)."""
    results = lab.do(lambda: list(lab.lab.agents[0].link.executor._results.values()))
    return [str(mode_from_pb(r.profile.mode)) for r in results if r.HasField("profile")]


def test_a_choice_the_model_underpredicts_is_measured_replaced_and_the_budget_kept(lab, target_models):
    install(lab, target_models, "low")   # power predicted 20% low: its first choice draws more than 11 W
    # windows longer than the job: the closed loop never acts, so what keeps the budget is the confirmation alone
    unconfirmed = wait_job(lab, submit(lab, power_budget_w=BUDGET_W, minibatches=2000, window_s=3600, no_confirm=True))
    assert unconfirmed.state == "done" and not unconfirmed.confirms and board_profiles(lab) == []
    assert not unconfirmed.goal_kept and unconfirmed.energy_j / unconfirmed.elapsed_s > BUDGET_W * 1.01

    job = wait_job(lab, submit(lab, power_budget_w=BUDGET_W, minibatches=2000, window_s=3600))
    assert job.state == "done" and job.confirmed, job.detail
    measured = [c.mode for c in job.confirms]
    assert 1 <= len(measured) <= 3 and board_profiles(lab) == measured   # the board profiled exactly these
    first = job.confirms[0]
    assert first.mode == unconfirmed.segments[0].mode and first.over and first.power_w > BUDGET_W   # the model's pick
    fits = [c for c in job.confirms if not c.over]
    assert fits, [(c.mode, c.power_w) for c in job.confirms]
    best = min(fits, key=lambda c: c.time_ms)
    assert [s.mode for s in job.segments] == [best.mode]        # committed to the fastest measured within the budget
    assert job.energy_j / job.elapsed_s <= BUDGET_W and job.goal_kept and job.verdict.kept, job.detail
    assert f"{len(measured)} mode(s) measured before committing" in job.detail and "was replaced" in job.choice_note
    text = CliRunner().invoke(cli, ["job", "show", job.job_id, "--controller", lab.address]).output
    assert f"confirming: {first.mode} measured " in text and "over the budget" in text, text


def test_confirming_is_asked_for_only_where_it_means_something(lab, target_models):
    install(lab, target_models, "fair")
    cases = [(dict(power_budget_w=BUDGET_W, minibatches=10, confirm_profiles=21), "confirm_profiles", "0..20"),
             (dict(deadline_s=900, minibatches=10, confirm_profiles=2), "confirm_profiles", "power budget"),
             (dict(power_budget_w=BUDGET_W, minibatches=10, confirm_profiles=2, no_confirm=True), "confirm_profiles",
              "not both")]
    with OperatorClient(lab.address) as c:
        before = len(c.call("ListJobs", op.ListJobsRequest()).jobs)
        for kw, field, words in cases:
            r = CliRunner().invoke(cli, ["job", "submit", "--workload", "mobilenet_v3", "--device", "orin-nano-0",
                                         "--controller", lab.address, *_flags(kw)])
            assert r.exit_code != 0 and field in r.output and words in r.output, (kw, r.output)
        assert len(c.call("ListJobs", op.ListJobsRequest()).jobs) == before   # nothing stored
    # a deadline job commits to its choice unmeasured
    done = wait_job(lab, submit(lab, deadline_s=900, minibatches=200))
    assert done.state == "done" and not done.confirms and board_profiles(lab) == []


def _flags(kw: dict) -> list[str]:
    out = []
    for k, v in kw.items():
        if k == "power_budget_w":
            out += ["--power-budget", f"{v:g}W"]
        elif k == "deadline_s":
            out += ["--deadline", f"{v:g}s"]
        elif k == "no_confirm":
            out += ["--no-confirm"]
        else:
            out += ["--" + k.replace("_", "-"), str(v)]
    return out


def test_a_board_cut_off_while_the_job_confirms_its_choice_is_waited_out_and_trains_the_jobs_length_once(
        tmp_path, target_models):
    lt = LabThread(str(tmp_path / "data"), []).start()
    proxy: CuttableProxy | None = None
    try:
        def dial(address: str) -> str:   # the agent reaches the controller only through a proxy the test cuts
            nonlocal proxy
            proxy = CuttableProxy(address)
            return proxy.address

        lt.do(lambda: lt.lab.add_agent(NANO, speed=SPEED, controller=dial(lt.address)))
        lt.call(lt.lab.wait_online(1))
        install(lt, target_models, "low")   # its first choice draws more than the budget: confirming measures > 1
        assert proxy is not None
        jobs, cut_at = lt.lab.controller.jobs, []
        gauges = jobs.update_gauges

        def cut_when_confirming(rec=None):   # on the controller's loop, right after the move is stored
            if rec is not None and not cut_at and rec.detail.startswith("confirming the choice"):
                cut_at.append(rec.detail)
                proxy.cut()   # before the job sends the board its first mode to measure
            gauges(rec)

        jobs.update_gauges = cut_when_confirming
        job_id = submit(lt, power_budget_w=BUDGET_W, minibatches=2000, window_s=3600)
        with OperatorClient(lt.address) as c:
            def went_away() -> bool:
                j = c.call("GetJob", op.GetJobRequest(job_id=job_id))
                return j.state == "queued" and any(h.state == "queued" and "went away while confirming its choice"
                                                   in h.why for h in j.history)

            lt.wait(went_away, 60, "the job waiting for its board")
            assert cut_at
            assert board_profiles(lt) == []   # the board never got the mode the job was about to measure
            proxy.restore()
            job = wait_job(lt, job_id)
        assert job.state == "done" and job.confirmed, job.detail
        assert board_profiles(lt) == [c.mode for c in job.confirms] and len(job.confirms) >= 1
        trained = lt.do(lambda: sum(n for cid, n in lt.lab.agents[0].link.executor.trained.items()
                                    if cid.startswith(job_id + "-")))
        assert trained == job.minibatches_done == 2000   # the board's own count: the job's length, once
    finally:
        lt.close()
        if proxy is not None:
            proxy.close()
