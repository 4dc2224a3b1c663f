"""Training jobs end to end on accelerated emulated boards: submit -> profile -> transfer -> choose with
calibrated bounds -> run -> closed loop -> summary; restarts and vanishing boards never count twice."""

import json
import math
import re

import pytest
from click.testing import CliRunner

from jetfleet.cli.main import cli
from jetfleet.client import OperatorClient
from jetfleet.controller.jobs.context import JobsConfig
from jetfleet.shared.errors import FailedPrecondition, InvalidArgument, NotFound
from jetfleet.shared.proto import operator_pb2 as op

from .harness import LabThread
from .jobs_lab import NANO, install, make_lab, wait_job


@pytest.fixture
def lab(tmp_path, reference_nets):
    lt = make_lab(tmp_path, reference_nets)
    yield lt
    lt.close()


def cli_json(lab, *args):
    r = CliRunner().invoke(cli, [*args, "--controller", lab.address, "--output", "json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def runs_of(lab, job_id):
    """The training commands the controller sent for a job (the store's command log)."""
    rec = lab.do(lambda: lab.lab.controller.store.get_job(job_id))
    store = lab.lab.controller.store
    return [c for c in (lab.do(lambda i=i: store.get_command(f"{job_id}-r{i}")) for i in range(1, rec.run.seq + 1))
            if c is not None]


def test_a_job_profiles_transfers_chooses_runs_and_keeps_its_budget_from_the_cli(lab):
    # a fixed seed: the same 12 modes every run. The verdict holds the chosen mode's time to its 90% bound, so a
    # job seeded by its creation time misses it now and then by design (once in the loaded runs of two sessions);
    # with these modes 10 fresh labs ran at 297-302 ms per minibatch against upper bounds of 331-338 ms
    r = CliRunner().invoke(cli, ["job", "submit", "--workload", "mobilenet_v3", "--device", "orin-nano-0",
                                 "--power-budget", "10W", "--minibatches", "1500", "--profile-modes", "12",
                                 "--seed", "11", "--wait", "--controller", lab.address])
    assert r.exit_code == 0, r.output
    notes = r.stderr.splitlines()      # its id at once, then each state change and the minibatches as plain lines
    jid = notes[0].split()[1]
    assert notes[0] == f"job {jid} submitted: fastest under 10 W for mobilenet_v3 on orin-nano-0 — queued"
    assert any(n.startswith("profiling: profiling ") for n in notes) and any(
        n.startswith("running: training on orin-nano-0 in ") for n in notes), notes
    assert any(n.startswith(f"job {jid}: ") and "/1500 (" in n for n in notes), notes
    assert notes[-1].startswith("done: 1500 minibatches in ") and "\r" not in r.stderr
    job = cli_json(lab, "job", "show", jid)
    assert job["state"] == "done", job
    assert job["minibatches_done"] == 1500 and sum(s["minibatches"] for s in job["segments"]) == 1500
    assert len(job["campaigns"]) == 1 and job["model_id"].startswith("tra-orin-nano-mobilenet_v3")
    camp = lab.lab.controller.campaigns.runs[job["campaigns"][0]]
    assert camp.count("done") == 12                   # k modes profiled, then transferred with calibration
    choice = job["choice"]
    assert choice["predicted_power_w"] <= choice["predicted_power_w_hi"] and choice["confidence"] == 0.9
    # within the budget at the upper bound, or (confirmed before committing) measured within it on the board
    measured = re.search(r"measured at ([\d.]+) W", job["choice_note"])
    assert choice["predicted_power_w_hi"] <= 10.0 or (measured and float(measured.group(1)) <= 10.0), job["choice_note"]
    assert job["mean_power_w"] <= 10.0 * 1.01 and job["goal_kept"]
    assert job["energy_j"] == pytest.approx(sum(s["energy_j"] for s in job["segments"]), rel=1e-3)  # JSON rounds
    assert job["observed"]["power_w"] <= 10.0 * 1.01
    model = cli_json(lab, "model", "show", job["model_id"])
    assert {"time_cv_mape_pct", "power_cv_mape_pct", "time_fit_mape_pct"} <= set(model["metrics"])
    assert [j["job_id"] for j in cli_json(lab, "job", "ls")] == [job["job_id"]]
    r = CliRunner().invoke(cli, ["job", "cancel", job["job_id"], "--controller", lab.address])
    assert r.exit_code == 7 and "is done; only a queued or running job can be cancelled" in r.output
    text = CliRunner().invoke(cli, ["job", "show", job["job_id"], "--controller", lab.address]).output
    assert "goal kept" in text and "ran " in text and job["mode"] in text


def test_a_jobs_seed_picks_its_profiled_modes_and_job_show_prints_it(tmp_path, reference_nets):
    lab = make_lab(tmp_path, reference_nets, speed=math.inf)     # what was profiled matters here, not how long

    def profiled(job):
        return lab.lab.controller.campaigns.runs[job["campaigns"][0]].modes

    def submit(workload, *seed):
        return cli_json(lab, "job", "submit", "--workload", workload, "--device", "orin-nano-0", "--min-energy",
                        "--minibatches", "20", "--profile-modes", "10", *seed, "--wait")

    try:
        a, b = submit("mobilenet_v3", "--seed", "5"), submit("lstm", "--seed", "5")
        c = submit("yolo_v8n")                      # none given: its creation time, printed so a replay can pass it
        assert (a["seed"], b["seed"], c["seed"]) == (5, 5, int(c["created_s"]))
        assert len(profiled(a)) == 10 and profiled(a) == profiled(b) and profiled(c) != profiled(a)
        text = CliRunner().invoke(cli, ["job", "show", a["job_id"], "--controller", lab.address]).output
        assert f"profiled in {a['campaigns'][0]} (seed 5: --seed replays its modes)" in text
        r = CliRunner().invoke(cli, ["job", "submit", "--workload", "lstm", "--device", "orin-nano-0", "--min-energy",
                                     "--minibatches", "20", "--seed", "-1", "--controller", lab.address])
        assert r.exit_code == 2 and "--seed" in r.output
    finally:
        lab.close()


def test_the_active_strategy_profiles_in_two_batches_without_idling_the_board(tmp_path, reference_nets):
    # a mode takes ~0.6 s of wall time: the second batch is chosen while the first one's last modes run
    # (the test checks the decision was made with modes left, not a race against the machine's load)
    lab = make_lab(tmp_path, reference_nets, speed=10.0)
    try:
        job = cli_json(lab, "job", "submit", "--workload", "lstm", "--device", "orin-nano-0", "--min-energy",
                       "--minibatches", "200", "--profile-modes", "16", "--strategy", "active", "--wait")
        assert job["state"] == "done" and len(job["campaigns"]) == 2, job
        first, second = (lab.lab.controller.campaigns.runs[c] for c in job["campaigns"])
        assert (len(first.modes), len(second.modes)) == (8, 8)
        assert not set(first.modes) & set(second.modes)
        # decided while the first batch still had modes to measure (whether the fit then beat them to the board is a
        # matter of the machine's load: bench, not here)
        left = int(re.search(r"chosen with (\d+) of the first to measure", second.rec.modes_spec).group(1))
        assert left >= 1, second.rec.modes_spec
    finally:
        lab.close()


def test_the_closed_loop_steps_the_mode_down_while_training_continues(lab, target_models):
    install(lab, target_models, "low")
    with OperatorClient(lab.address) as c:
        job = c.call("SubmitJob", op.SubmitJobRequest(workload="mobilenet_v3", device_id="orin-nano-0",
                                                      power_budget_w=11, minibatches=3000, window_s=5,
                                                      no_confirm=True))   # the loop's work, not the confirmation's
    job = wait_job(lab, job.job_id)
    assert job.state == "done" and job.minibatches_done == 3000
    assert job.predicted_power_w_hi <= 11 < job.segments[0].energy_j / job.segments[0].seconds  # the choice drew too much
    assert 1 <= len(job.steps) <= job.max_steps
    assert "over the 11 W budget" in job.steps[0].reason and job.steps[0].observed_power_w > 11
    assert len(runs_of(lab, job.job_id)) == 1       # one training command: the steps went down while it ran
    assert [s.mode for s in job.segments][1:] == [s.to_mode for s in job.steps]
    assert job.observed_power_w <= 11 * 1.01 and job.goal_kept
    assert sum(s.minibatches for s in job.segments) == 3000


def test_a_deadline_job_steps_up_when_its_eta_overshoots_and_finishes_in_time(lab, target_models):
    install(lab, target_models, "quick")
    with OperatorClient(lab.address) as c:
        # confidence 0.5: the median bound, so the model's 25% optimism makes the first choice truly late
        job = c.call("SubmitJob", op.SubmitJobRequest(workload="mobilenet_v3", device_id="orin-nano-0", deadline_s=900,
                                                      minibatches=3000, window_s=5, confidence=0.5))
    job = wait_job(lab, job.job_id)
    assert job.state == "done" and job.minibatches_done == 3000
    assert job.steps and "overshoots" in job.steps[0].reason
    assert job.segments[0].seconds / job.segments[0].minibatches > 900 / 3000   # the first choice was too slow
    assert job.elapsed_s <= 900 * 1.02 and job.goal_kept          # kept within the loop's 2% tolerance


def test_controller_restart_mid_run_rejoins_the_same_training(tmp_path, reference_nets, target_models):
    lab = make_lab(tmp_path, reference_nets, speed=150.0)
    try:
        install(lab, target_models)
        with OperatorClient(lab.address) as c:
            job = c.call("SubmitJob", op.SubmitJobRequest(workload="mobilenet_v3", device_id="orin-nano-0",
                                                          power_budget_w=11, minibatches=3000))
        store = lambda: lab.lab.controller.store  # noqa: E731
        lab.wait(lambda: lab.do(lambda: store().get_job(job.job_id).minibatches_done) > 200, 60, "durable progress")
        lab.call(lab.lab.stop_controller())
        lab.call(lab.lab.start_controller())
        done = wait_job(lab, job.job_id)
        assert done.state == "done" and done.minibatches_done == 3000
        assert len(runs_of(lab, job.job_id)) == 1     # the same agent instance: the same command, rejoined
        assert sum(s.minibatches for s in done.segments) == 3000
    finally:
        lab.close()


def test_agent_restart_mid_run_resumes_from_durable_progress_counting_nothing_twice(lab, target_models):
    install(lab, target_models)
    agent = lab.lab.agents[0]
    trained = []          # minibatches the board trained, per run (a stopped run too)
    original = agent.board.run_minibatches

    def counting(workload, n, on_minibatch=None, **kw):
        trained.append(0)

        def count(i, t):
            trained[-1] += 1
            return on_minibatch(i, t) if on_minibatch else None

        return original(workload, n, on_minibatch=count, **kw)

    agent.board.run_minibatches = counting
    with OperatorClient(lab.address) as c:   # (no confirming profiles: every run_minibatches here is training)
        job = c.call("SubmitJob", op.SubmitJobRequest(workload="mobilenet_v3", device_id="orin-nano-0",
                                                      power_budget_w=11, minibatches=3000, no_confirm=True))
    store = lab.lab.controller.store
    lab.wait(lambda: lab.do(lambda: store.get_job(job.job_id).minibatches_done) > 300, 60, "durable progress")
    lab.call(agent.stop())          # the agent process ends: its training stops with it
    durable = lab.do(lambda: store.get_job(job.job_id).minibatches_done)
    lab.do(agent.start)             # a new instance: it remembers nothing
    done = wait_job(lab, job.job_id)
    assert done.state == "done" and done.minibatches_done == 3000
    assert len(runs_of(lab, job.job_id)) == 2
    assert sum(s.minibatches for s in done.segments) == 3000
    second = done.runs[1]
    # resumed where the job's progress stood (the durable count, or a report that arrived after it was read)
    assert second.base_done >= durable and trained[0] >= second.base_done and trained[1] == 3000 - second.base_done


def test_a_board_that_vanishes_mid_run_hands_the_job_to_another_board_of_the_model(tmp_path, reference_nets,
                                                                                  target_models):
    lab = make_lab(tmp_path, reference_nets, boards=2, speed=150.0)
    try:
        install(lab, target_models)
        with OperatorClient(lab.address) as c:
            job = c.call("SubmitJob", op.SubmitJobRequest(workload="mobilenet_v3", board_model=NANO,
                                                          power_budget_w=11, minibatches=3000))
        store = lab.lab.controller.store
        lab.wait(lambda: lab.do(lambda: store.get_job(job.job_id).minibatches_done) > 200, 60, "progress")
        first = lab.do(lambda: store.get_job(job.job_id).device_id)
        agent = next(a for a in lab.lab.agents if a.device_id == first)
        lab.do(lambda: agent.task.cancel())   # a crash: the stream is gone
        done = wait_job(lab, job.job_id)
        assert done.state == "done" and done.minibatches_done == 3000
        assert {s.device_id for s in done.segments} == {"orin-nano-0", "orin-nano-1"}
        assert sum(s.minibatches for s in done.segments) == 3000
    finally:
        lab.close()


def test_a_job_for_an_offline_board_is_queued_and_runs_when_it_returns(lab, target_models):
    install(lab, target_models)
    agent = lab.lab.agents[0]
    lab.call(agent.stop())
    lab.wait(lambda: not lab.online("orin-nano-0"), 5, "offline")
    with OperatorClient(lab.address) as c:
        job = c.call("SubmitJob", op.SubmitJobRequest(workload="mobilenet_v3", device_id="orin-nano-0",
                                                      power_budget_w=11, minibatches=500))
        lab.wait(lambda: "orin-nano-0 offline" in c.call("GetJob", op.GetJobRequest(job_id=job.job_id)).detail, 10,
                 "queued, saying why")
        assert c.call("GetJob", op.GetJobRequest(job_id=job.job_id)).state == "queued"
    lab.do(agent.start)
    assert wait_job(lab, job.job_id).state == "done"


def test_cancel_a_running_job_stops_its_training(lab, target_models):
    install(lab, target_models)
    with OperatorClient(lab.address) as c:
        job = c.call("SubmitJob", op.SubmitJobRequest(workload="mobilenet_v3", device_id="orin-nano-0",
                                                      power_budget_w=11, minibatches=100_000))
        lab.wait(lambda: c.call("GetJob", op.GetJobRequest(job_id=job.job_id)).state == "running", 30, "running")
        registry = lab.lab.controller.metrics.registry

        def series(name: str) -> list[dict[str, str]]:
            return [smp.labels for m in registry.collect() if m.name == name for smp in m.samples
                    if smp.labels.get("job_id") == job.job_id]

        # what the alerts read while it runs: one progress timestamp (of its stage) and its power against the budget
        # (the record says running a moment before its save updates the gauges)
        lab.wait(lambda: [s["stage"] for s in series("jetfleet_job_last_progress_timestamp_seconds")] == ["running"], 10,
                 "one progress timestamp, of the running stage")
        lab.wait(lambda: bool(series("jetfleet_job_power_watts") and series("jetfleet_job_power_budget_watts")), 20,
                 "the job's observed power and budget (one quantity per metric)")
        cancelled = c.call("CancelJob", op.CancelJobRequest(job_id=job.job_id))
    assert cancelled.state == "cancelled" and 0 < cancelled.minibatches_done < 100_000
    # an ended job is no longer exported: every series naming it goes (metrics.job_ended; Prometheus keeps its history)
    assert [m.name for m in registry.collect() for smp in m.samples if smp.labels.get("job_id") == job.job_id] == []
    lab.wait(lambda: lab.lab.agents[0].link.executor.busy == "", 10, "the board to be idle")


BAD_JOBS = [
    (dict(workload="gpt", device_id="orin-nano-0", power_budget_w=10, minibatches=10), NotFound,
     "unknown workload 'gpt' for orin-nano-0"),
    (dict(workload="mobilenet_v3", board_model="jetson-tk1", power_budget_w=10, minibatches=10), NotFound,
     "unknown board model 'jetson-tk1'"),
    (dict(workload="mobilenet_v3", device_id="ghost", power_budget_w=10, minibatches=10), NotFound, "unknown device"),
    (dict(workload="mobilenet_v3", device_id="orin-nano-0", power_budget_w=10, min_energy=True, minibatches=10),
     InvalidArgument, "exactly one goal"),
    (dict(workload="mobilenet_v3", device_id="orin-nano-0", power_budget_w=10), InvalidArgument, "length"),
    (dict(workload="mobilenet_v3", device_id="orin-nano-0", power_budget_w=10, minibatches=5, epochs=2,
          minibatches_per_epoch=3), InvalidArgument, "not both"),
    (dict(workload="mobilenet_v3", device_id="orin-nano-0", power_budget_w=10, minibatches=10, confidence=0.999),
     InvalidArgument, "confidence"),
    (dict(workload="mobilenet_v3", device_id="orin-nano-0", power_budget_w=10, minibatches=10, strategy="magic"),
     InvalidArgument, "strategy 'magic'"),
    (dict(workload="mobilenet_v3", device_id="orin-nano-0", power_budget_w=10, minibatches=10, seed=2**63),
     InvalidArgument, "seed 9223372036854775808: expected 0..9223372036854775807"),
    # the model saw 2-6 cores: a 1-core mode's bounds are widened (x3.5, docs/models.md), so 1 W is not ruled out
    (dict(workload="mobilenet_v3", device_id="orin-nano-0", power_budget_w=0.5, minibatches=10), FailedPrecondition,
     "no mode can run under 0.5 W: the lowest-power mode is 2/.*nor can a mode outside the model's coverage"),
    (dict(workload="mobilenet_v3", device_id="orin-nano-0", deadline_s=10, minibatches=100_000), FailedPrecondition,
     "no mode can finish 100000 minibatches in 10 s: the fastest, 6/"),
]


def test_bad_jobs_are_refused_naming_the_problem_and_nothing_is_stored(lab, target_models):
    install(lab, target_models)
    with OperatorClient(lab.address) as c:
        for fields, error, needle in BAD_JOBS:
            with pytest.raises(error, match=needle):
                c.call("SubmitJob", op.SubmitJobRequest(**fields))
        assert c.call("ListJobs", op.ListJobsRequest()).jobs == []
        with pytest.raises(NotFound, match="unknown job"):
            c.call("GetJob", op.GetJobRequest(job_id="nope"))
    assert lab.do(lambda: lab.lab.controller.store.list_jobs()) == []


def test_a_first_builtin_job_on_a_lab_with_no_reference_fits_from_scratch_and_says_so(tmp_path):
    """A lab's first job (no model, no reference to transfer from) is not refused: it profiles twice the default k
    unless given one, fits its networks from scratch on them, and `job show` says so with the fit's held-out error
    and how a reference would improve it."""
    lt = LabThread(str(tmp_path / "data"), []).start()
    try:
        lt.do(lambda: lt.lab.add_agent(NANO, speed=float("inf")))
        lt.call(lt.lab.wait_online(1))
        store = lt.lab.controller.store
        assert lt.do(lambda: store.list_docs("model")) == []
        with OperatorClient(lt.address) as c:
            default_k = c.call("SubmitJob", op.SubmitJobRequest(workload="resnet18", device_id="orin-nano-0",
                                                                power_budget_w=10, minibatches=100, seed=3))
            c.call("CancelJob", op.CancelJobRequest(job_id=default_k.job_id))
            job = c.call("SubmitJob", op.SubmitJobRequest(workload="lstm", device_id="orin-nano-0", power_budget_w=10,
                                                          minibatches=100, profile_modes=12, seed=3))
        assert lt.do(lambda: store.get_job(default_k.job_id)).options.profile_modes == 2 * JobsConfig().profile_modes
        final = wait_job(lt, job.job_id, timeout_s=120)
        assert final.state == "done", final.detail
        doc = lt.do(lambda: store.list_docs("model"))[-1]
        assert doc["kind"] == "scratch" and len(doc["training_modes"]) == 12 and doc["workload"] == "lstm"
        assert "model fitted from scratch on 12 profiled modes" in final.detail and "train-reference" in final.detail
        # the board trained the job's 100 minibatches (its own count), after the 12 modes were profiled on it
        trained = lt.do(lambda: sum(n for c, n in lt.lab.agents[0].link.executor.trained.items()
                                    if c.startswith(job.job_id + "-")))
        assert trained == final.minibatches_done == 100
    finally:
        lt.close()


def test_a_repeated_request_id_returns_the_same_job(lab, target_models):
    install(lab, target_models)
    req = op.SubmitJobRequest(workload="mobilenet_v3", device_id="orin-nano-0", power_budget_w=11, minibatches=300,
                              request_id="nightly-7")
    with OperatorClient(lab.address) as c:
        a, b = c.call("SubmitJob", req), c.call("SubmitJob", req)
        assert a.job_id == b.job_id == "nightly-7" and len(c.call("ListJobs", op.ListJobsRequest()).jobs) == 1
