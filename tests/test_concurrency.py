"""Concurrent training and inference (issue 15): the managed interleaving scheduler on injected clocks, the
request stream, native GPU time-sharing on the twin, and the same scheduler stepping real work (the twin's
on an emulated board, torch on the CPU)."""

import math

import numpy as np
import pytest

from jetfleet.shared.concurrency import (
    LATENCY_PERCENTILE,
    ManagedScheduler,
    VirtualClock,
    WallClock,
    check_arrival_rate,
    poisson_arrivals,
    read_trace,
)
from jetfleet.shared.errors import InvalidArgument
from jetfleet.twin.board import EmulatedBoard
from jetfleet.twin.concurrent import BoardClock, run_native


def _sched(batch, budget, *, train=0.05, infer=lambda n: 0.01 + 0.002 * n, training=True, slack=0.8):
    return ManagedScheduler(batch_size=batch, latency_budget_s=budget, infer=infer,
                            train=(lambda: train) if training else None, infer_estimate_s=infer,
                            train_estimate_s=train, clock=VirtualClock(), slack=slack)


def test_the_budget_is_on_p95():
    assert LATENCY_PERCENTILE == 95


def test_a_full_batch_is_served_at_once_and_latency_is_queueing_plus_batching_plus_execution():
    arr = np.array([0.0, 0.001, 0.002, 0.003])
    r = _sched(4, 1.0, training=False).run(arr)
    assert r.batches == [(4, pytest.approx(0.018))]
    assert np.allclose(r.latency_s, r.queueing_s + r.batching_s + r.execution_s)
    assert r.latency_s[0] == pytest.approx(0.003 + 0.018)      # waited for the batch to fill
    assert r.batching_s[0] == pytest.approx(0.003) and r.queueing_s[0] == pytest.approx(0.0)


def test_training_fills_the_gaps_and_a_partial_batch_goes_before_its_deadline():
    arr = poisson_arrivals(20, 30, seed=1)
    r = _sched(16, 0.15).run(arr)
    assert r.served == len(arr) and r.dropped == 0
    assert np.allclose(r.latency_s, r.queueing_s + r.batching_s + r.execution_s)
    assert r.percentile_s(95) <= 0.15 and r.late(0.15) <= 0.05 * len(arr)
    assert max(n for n, _ in r.batches) < 16          # deadline-forced partial batches at 20/s
    assert r.train_throughput > 5                     # most of the GPU left to training (a 50 ms minibatch)
    s = r.summary(0.15)
    assert s["p50_ms"] <= s["p95_ms"] <= s["p99_ms"] and s["late"] == r.late(0.15)


def test_a_tighter_budget_costs_training_throughput():
    arr = poisson_arrivals(20, 30, seed=2)
    loose = _sched(16, 0.3).run(arr)
    tight = _sched(16, 0.08).run(arr)
    assert tight.percentile_s(95) < loose.percentile_s(95)
    assert tight.train_throughput < loose.train_throughput


def test_the_scheduler_learns_durations_it_did_not_expect():
    """Estimates 3x too optimistic: the running estimates catch up and the deadline is kept after a few batches."""
    arr = poisson_arrivals(10, 60, seed=3)
    sched = ManagedScheduler(batch_size=8, latency_budget_s=0.2, infer=lambda n: 0.03 + 0.006 * n,
                             train=lambda: 0.06, infer_estimate_s=lambda n: (0.03 + 0.006 * n) / 3,
                             train_estimate_s=0.02, clock=VirtualClock())
    r = sched.run(arr)
    assert np.mean(r.latency_s[len(arr) // 2:] > 0.2) < 0.05


def test_wall_clock_waits_with_the_injected_sleep():
    now = [100.0]
    slept = []

    def sleep(dt):
        slept.append(dt)
        now[0] += dt

    sched = ManagedScheduler(batch_size=1, latency_budget_s=1.0, infer=lambda n: 0.0, train=None,
                             infer_estimate_s=lambda n: 0.01, train_estimate_s=0.0,
                             clock=WallClock(clock=lambda: now[0], sleep=sleep))
    r = sched.run([0.5, 2.0])
    assert slept == [pytest.approx(0.5), pytest.approx(1.5)] and r.served == 2


def test_managed_interleaving_has_lower_latency_variability_than_native_time_sharing():
    board = EmulatedBoard("agx-orin", 0)
    m = board.catalog.maxn
    t_tr, _ = board.expected("resnet18", m)

    def inf(n):
        return board.expected_inference("mobilenet_v3", m, batch_size=n)[0]

    arr = poisson_arrivals(15, 60, seed=4)
    managed = ManagedScheduler(batch_size=8, latency_budget_s=0.15, infer=inf, train=lambda: t_tr,
                               infer_estimate_s=inf, train_estimate_s=t_tr, clock=VirtualClock()).run(arr)
    native, states = run_native(arr, batch_size=8, infer_s=inf, train_s=lambda: t_tr, seed=4)
    assert native.served == managed.served == len(arr)
    spread = lambda r: r.percentile_s(99) - r.percentile_s(50)  # noqa: E731
    assert spread(managed) < spread(native)
    assert np.std(managed.execution_s) < np.std(native.execution_s)   # time-sharing stretches passes unevenly
    assert states[2] > 0 and math.isclose(float(np.sum(states)), native.span_s, rel_tol=1e-9)


def test_the_same_scheduler_steps_the_twin_on_its_own_clock_and_the_sensor_sees_both_workloads():
    board = EmulatedBoard("agx-orin", 1)
    m = board.catalog.maxn
    steps = board.open_concurrent("resnet18", "yolo_v8n")
    t_tr, w_tr = board.expected("resnet18", m)
    t0 = board.now_s()
    sched = ManagedScheduler(batch_size=4, latency_budget_s=0.3, infer=steps.infer, train=steps.train,
                             infer_estimate_s=lambda n: board.expected_inference("yolo_v8n", m, batch_size=n)[0],
                             train_estimate_s=t_tr, clock=BoardClock(board))
    r = sched.run(poisson_arrivals(5, 20, seed=5))
    assert board.now_s() - t0 == pytest.approx(r.span_s, abs=0.05) and r.span_s >= 19
    assert r.train_throughput > 5 and r.percentile_s(95) <= 0.3
    power = [s.total_w for s in board.trace(t0, t0 + r.span_s, 0.1)]
    w_inf = board.expected_inference("yolo_v8n", m, batch_size=4)[1]
    assert min(w_inf, w_tr) * 0.9 < np.mean(power) < max(w_inf, w_tr) * 1.05
    with pytest.raises(Exception, match="unknown inference workload"):
        board.open_concurrent("resnet18", "nope")


def test_real_torch_work_under_the_same_scheduler_on_the_cpu():
    from jetfleet.agent.workloads.concurrent import TorchConcurrentSteps

    steps = TorchConcurrentSteps("lstm", "lstm", minibatch_size=2, workers=0, scale=0.25, device="cpu")
    try:
        first = steps.infer(1)
        sched = ManagedScheduler(batch_size=2, latency_budget_s=5.0, infer=steps.infer, train=steps.train,
                                 infer_estimate_s=lambda n: first, train_estimate_s=first, clock=WallClock())
        r = sched.run([0.0, 0.01, 0.02], train_minibatches=2)
    finally:
        steps.close()
    assert r.served == 3 and len(r.train_times_s) >= 2 and all(t > 0 for t in r.train_times_s)


def test_poisson_arrivals_and_traces():
    arr = poisson_arrivals(50, 100, seed=7)
    assert len(arr) == pytest.approx(5000, rel=0.05) and np.all(np.diff(arr) >= 0) and arr[-1] < 100
    assert np.array_equal(arr, poisson_arrivals(50, 100, seed=7))
    assert list(read_trace("# arrivals\n0.0\n0.5, extra\n\n1.25\n")) == [0.0, 0.5, 1.25]
    for bad, match in (("0.5\n0.2\n", "line 2"), ("x\n", "line 1"), ("", "no arrival"), ("-1\n", "line 1")):
        with pytest.raises(InvalidArgument, match=match):
            read_trace(bad)
    for rate in (0, -1, 1e9, float("nan")):
        with pytest.raises(InvalidArgument, match="arrival_rate"):
            check_arrival_rate(rate)


def test_bad_scheduler_arguments_are_refused():
    with pytest.raises(InvalidArgument, match="batch_size"):
        _sched(65, 0.1)
    with pytest.raises(InvalidArgument, match="latency_budget"):
        _sched(4, 0.0)
    with pytest.raises(InvalidArgument, match="slack"):
        _sched(4, 0.1, slack=1.5)


def test_streams_no_configuration_can_serve_are_refused_naming_what_is_achievable():
    from jetfleet.shared.concurrency import check_serviceable

    table = {1: 0.02, 4: 0.04, 16: 0.12}          # best latency over the modes per batch size
    check_serviceable(30, 0.1, table, "w")        # batch 4 keeps up at 30/s (40 ms < 133 ms per 4 requests)
    with pytest.raises(InvalidArgument, match="below the fastest single-request latency of w on this board, 20.0 ms"):
        check_serviceable(1, 0.01, table, "w")
    with pytest.raises(InvalidArgument, match=r"at most 133.3 requests/s") as e:
        check_serviceable(500, 1.0, table, "w")
    assert e.value.field == "arrival_rate"
    with pytest.raises(InvalidArgument, match=r"best achievable latency is 120.0 ms \(batch 16\)"):
        check_serviceable(110, 0.1, table, "w")


def _cli(*args):
    import json

    from click.testing import CliRunner

    from jetfleet.cli.main import cli

    r = CliRunner().invoke(cli, ["twin", "concurrent", "--board", "agx-orin", "--training", "resnet18", *args])
    return r, (json.loads(r.output) if r.exit_code == 0 and "--output" in args else None)


def test_twin_concurrent_cli_managed_beats_native_on_training_and_variability():
    args = ["--inference", "mobilenet_v3", "--arrival-rate", "20", "--latency-budget", "150ms", "--batch-size", "8",
            "--duration", "30", "--output", "json"]
    r, managed = _cli(*args)
    assert r.exit_code == 0, r.output
    r, native = _cli(*args, "--native")
    assert r.exit_code == 0, r.output
    assert managed["percentile"] == 95 and managed["within_budget"] and managed["served"] == native["served"]
    assert managed["train_per_s"] > native["train_per_s"]
    assert managed["p99_ms"] - managed["p50_ms"] < native["p99_ms"] - native["p50_ms"]
    assert 20 < managed["power_mean_w"] < native["power_mean_w"]


@pytest.mark.parametrize("args,message", [
    (["--inference", "mobilenet_v3", "--arrival-rate", "20", "--latency-budget", "10ms"], "fastest single-request"),
    (["--inference", "bert_base", "--arrival-rate", "20", "--latency-budget", "100ms"], "best achievable latency"),
    (["--inference", "bert_base", "--arrival-rate", "100", "--latency-budget", "1s"], "no mode serves"),
    (["--inference", "mobilenet_v3", "--arrival-rate", "20", "--latency-budget", "100ms", "--batch-size", "65"],
     "batch-size=65"),
    (["--inference", "nope", "--arrival-rate", "20", "--latency-budget", "100ms"], "unknown inference workload"),
    (["--inference", "lstm", "--arrival-rate", "20", "--latency-budget", "fast"], "latency like 50ms"),
])
def test_twin_concurrent_cli_refuses_bad_input(args, message):
    r, _ = _cli(*args)
    assert r.exit_code != 0 and message in r.output, r.output
