"""The agent's minibatch histogram: every minibatch the board ran, under its own workload, for a training and
for a profile (its warm-up included); only the training counts as trained work."""

from __future__ import annotations

import asyncio

import pytest

from jetfleet.agent.executor import CommandExecutor
from jetfleet.agent.metrics import AgentMetrics
from jetfleet.shared.convert import mode_to_pb
from jetfleet.shared.proto import agent_pb2
from jetfleet.twin.board import EmulatedBoard


def test_minibatch_histogram_counts_each_run_under_its_own_workload():
    board = EmulatedBoard("agx-orin", 0)
    metrics = AgentMetrics(board.catalog, "orin-7")
    ex = CommandExecutor(board, metrics=metrics)
    train = agent_pb2.Command(command_id="t", run_training=agent_pb2.RunTraining(workload="resnet18", minibatches=7))
    prof = agent_pb2.Command(command_id="p", run_profile=agent_pb2.RunProfile(
        workload="mobilenet_v3", mode=mode_to_pb(board.catalog.maxn), minibatches=40))

    async def scenario() -> tuple[agent_pb2.CommandResult, agent_pb2.CommandResult]:
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
