"""The agent's minibatch histogram: every minibatch the board ran, under its own workload, for a training and
for a profile (its warm-up included); only the training counts as trained work."""

from __future__ import annotations

import asyncio
import random
import time

import pytest
from prometheus_client import (
    CollectorRegistry,
    Histogram,
    disable_created_metrics,
    enable_created_metrics,
    generate_latest,
)

from jetfleet.agent.executor import CommandExecutor
from jetfleet.agent.metrics import MINIBATCH_BUCKETS_S, AgentMetrics
from jetfleet.shared.convert import mode_to_pb
from jetfleet.shared.proto import agent_pb2
from jetfleet.twin.board import EmulatedBoard


def test_minibatch_histogram_counts_each_run_under_its_own_workload():
    board = EmulatedBoard("agx-orin", 0)
    metrics = AgentMetrics(board.catalog, "orin-7")
    train = agent_pb2.Command(command_id="t", run_training=agent_pb2.RunTraining(workload="resnet18", minibatches=7))
    prof = agent_pb2.Command(command_id="p", run_profile=agent_pb2.RunProfile(
        workload="mobilenet_v3", mode=mode_to_pb(board.catalog.maxn), minibatches=40))

    async def scenario() -> tuple[agent_pb2.CommandResult, agent_pb2.CommandResult]:
        ex = CommandExecutor(board, metrics=metrics)   # in its event loop, as the agent makes it (Python 3.8's locks)
        return await ex.execute(train), await ex.execute(prof)

    trained, profiled = asyncio.run(scenario())
    assert trained.ok and profiled.ok, (trained.error, profiled.error)

    def value(name: str, workload: str) -> float | None:
        return metrics.registry.get_sample_value(name, {"device": "orin-7", "workload": workload})

    hist = "jetfleet_agent_minibatch_duration_seconds"
    times = list(trained.training.minibatch_times_s)
    assert len(times) == 7
    assert value(f"{hist}_count", "resnet18") == 7
    assert value(f"{hist}_sum", "resnet18") == pytest.approx(sum(times))
    assert value("jetfleet_agent_trained_minibatches_total", "resnet18") == 7
    # a profile observes its warm-up as well as the window it keeps, and is not trained work
    kept = list(profiled.profile.minibatch_times_s)
    assert len(kept) >= 40
    assert value(f"{hist}_count", "mobilenet_v3") > len(kept)
    assert value(f"{hist}_sum", "mobilenet_v3") > sum(kept)
    assert value("jetfleet_agent_trained_minibatches_total", "mobilenet_v3") is None


def _exposed(registry: CollectorRegistry, name: str) -> list[str]:
    """The exposition lines of ``name``'s family (HELP and TYPE lines too), its _created samples' values blanked
    (they are creation times)."""
    return [line.rsplit(" ", 1)[0] + " <time>" if line.startswith(f"{name}_created") else line
            for line in generate_latest(registry).decode().splitlines() if name in line]


def test_the_minibatch_histogram_is_exposed_as_prometheus_clients_histogram_would_expose_it():
    # The agent's own histogram (one bisection and one lock an observation) must stay what dashboards read: the
    # same buckets with the same le labels, counts, sum; values on a bound, beyond the last bound, and NaN.
    name = "jetfleet_agent_minibatch_duration_seconds"
    metrics = AgentMetrics(EmulatedBoard("agx-orin", 0).catalog, "orin-7")
    reference = CollectorRegistry()
    hist = Histogram(name, "Training minibatch duration", ["device", "workload"], buckets=MINIBATCH_BUCKETS_S,
                     registry=reference)
    rng = random.Random(5)
    values = [*MINIBATCH_BUCKETS_S, 0.0, 0.0049, 30.0001, 1e9, *[rng.uniform(0, 40) for _ in range(300)],
              *[rng.uniform(0, 0.06) for _ in range(300)]]
    for workload in ("resnet18", "bert"):
        observe = metrics.minibatch_observer(workload)
        for v in values:
            observe(v)
            hist.labels("orin-7", workload).observe(v)
    ours, theirs = _exposed(metrics.registry, name), _exposed(reference, name)
    # HELP and TYPE of the histogram and of its _created gauge; per series: its buckets, +Inf, count, sum, created
    assert len(ours) == 4 + 2 * (len(MINIBATCH_BUCKETS_S) + 1 + 3)
    assert ours == theirs
    assert metrics.registry.get_sample_value(f"{name}_count", {"device": "orin-7", "workload": "bert"}) == len(values)
    created = metrics.registry.get_sample_value(f"{name}_created", {"device": "orin-7", "workload": "bert"})
    assert created is not None and abs(created - time.time()) < 600

    metrics.minibatch_observer("bert")(float("nan"))   # no bucket, the sum NaN (as prometheus_client has it)
    hist.labels("orin-7", "bert").observe(float("nan"))
    assert _exposed(metrics.registry, name) == _exposed(reference, name)
    with pytest.raises(ValueError, match="2 label values"):
        metrics.minibatch.labels("orin-7")
    disable_created_metrics()   # as PROMETHEUS_DISABLE_CREATED_SERIES does: no _created series, ours as theirs
    try:
        assert not any("_created" in line for line in _exposed(metrics.registry, name))
        assert _exposed(metrics.registry, name) == _exposed(reference, name)
    finally:
        enable_created_metrics()
