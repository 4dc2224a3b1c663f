"""A job's series in the controller's metrics: one progress-timestamp series per active job, in its stage, moved
with every progress report at a cost that does not grow with the series of other jobs (issue 28: finding a
job's series by walking every series of the metric was 18% of a busy controller with 100 jobs)."""

from __future__ import annotations

from prometheus_client import Gauge

from jetfleet.controller.metrics import ControllerMetrics


def _series(m: ControllerMetrics, name: str) -> list[dict[str, str]]:
    return [dict(s.labels) for f in m.registry.collect() for s in f.samples if s.name == name]


def _counting(metric: Gauge) -> list[int]:
    """Count the walks over ``metric``'s series (a real gauge, its collect wrapped to count)."""
    walks = [0]
    collect = metric.collect

    def counted():   # type: ignore[no-untyped-def]
        walks[0] += 1
        return collect()

    metric.collect = counted   # type: ignore[method-assign]
    return walks


def test_a_job_keeps_one_progress_series_in_its_stage_and_the_others_are_untouched():
    m = ControllerMetrics()
    m.job_moved("a", "resnet18", "profiling", 1.0)
    m.job_moved("b", "lstm", "running", 2.0)
    m.job_moved("a", "resnet18", "modelling", 3.0)
    m.job_moved("a", "resnet18", "running", 4.0)
    got = sorted((s["job_id"], s["stage"]) for s in _series(m, "jetfleet_job_last_progress_timestamp_seconds"))
    assert got == [("a", "running"), ("b", "running")]
    m.job_inactive("a", ended=False)   # back in the queue: nothing to stall
    assert [s["job_id"] for s in _series(m, "jetfleet_job_last_progress_timestamp_seconds")] == ["b"]
    m.job_moved("a", "resnet18", "applying", 5.0)
    m.job_progress.labels("b", "lstm").set(0.5)
    m.job_power_now("b", "orin-0", observed_w=10.0, budget_w=12.0, upper_w=11.0)
    m.job_ended("b")
    assert [(s["job_id"], s["stage"]) for s in _series(m, "jetfleet_job_last_progress_timestamp_seconds")] == \
        [("a", "applying")]
    for name in ("jetfleet_job_progress_ratio", "jetfleet_job_power_watts", "jetfleet_job_power_budget_watts",
                 "jetfleet_job_predicted_power_upper_watts"):
        assert _series(m, name) == [], name


def test_a_progress_report_does_not_walk_the_series_of_other_jobs():
    m = ControllerMetrics()
    for i in range(100):
        m.job_moved(f"job-{i}", "resnet18", "running", float(i))
    walks = _counting(m.job_last_progress)
    for t in range(50):   # progress reports of running jobs, and stage changes
        m.job_moved("job-7", "resnet18", "running", 100.0 + t)
    m.job_moved("job-8", "resnet18", "profiling", 200.0)
    m.job_inactive("job-9", ended=False)
    assert walks[0] == 0
    stages = {s["job_id"]: s["stage"] for s in _series(m, "jetfleet_job_last_progress_timestamp_seconds")}
    assert len(stages) == 99 and stages["job-8"] == "profiling" and "job-9" not in stages


def test_jobs_by_state_follow_a_job_through_its_moves_while_its_progress_reports_skip_the_count(tmp_path,
                                                                                                  reference_nets,
                                                                                                  target_models):
    from jetfleet.client import OperatorClient
    from jetfleet.shared.proto import operator_pb2 as op

    from .jobs_lab import install, make_lab

    lab = make_lab(tmp_path, reference_nets)
    try:
        install(lab, target_models)
        registry = lab.lab.controller.metrics.registry

        def by_state() -> dict[str, float]:
            return {s.labels["state"]: s.value for m in registry.collect() if m.name == "jetfleet_jobs"
                    for s in m.samples if s.value}

        with OperatorClient(lab.address) as c:
            job = c.call("SubmitJob", op.SubmitJobRequest(workload="mobilenet_v3", device_id="orin-nano-0",
                                                          power_budget_w=11, minibatches=100_000))
            lab.wait(lambda: c.call("GetJob", op.GetJobRequest(job_id=job.job_id)).minibatches_done > 0, 30,
                     "progress reports")
            lab.wait(lambda: by_state() == {"running": 1.0}, 10, "one running job counted")
            c.call("CancelJob", op.CancelJobRequest(job_id=job.job_id))
            lab.wait(lambda: by_state() == {"cancelled": 1.0}, 10, "the job counted as cancelled, not running")
    finally:
        lab.close()
