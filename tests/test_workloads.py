import json
import sys

import pytest

from jetfleet.shared.errors import InvalidArgument, NotFound
from jetfleet.shared.workloads import WORKLOADS, characterisations, check_run_args, get_workload

from . import procs


def test_registry_names_and_unknown_workload():
    assert set(WORKLOADS) == {"resnet18", "mobilenet_v3", "yolo_v8n", "bert_base", "lstm"}
    with pytest.raises(NotFound, match="registered: bert_base, lstm"):
        get_workload("rm -rf /")


@pytest.mark.parametrize("args,field", [((0, 16, 4), "minibatches"), ((10, 0, 4), "minibatch_size"),
                                         ((10, 16, 99), "workers"), ((10**7, 16, 4), "minibatches")])
def test_run_arguments_are_bounded(args, field):
    with pytest.raises(InvalidArgument) as e:
        check_run_args(*args)
    assert e.value.field == field


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_real_training_step_runs_on_cpu_with_tiny_inputs(name):
    from jetfleet.agent.workloads.training import run_training

    seen = []
    times = run_training(name, 2, minibatch_size=2, workers=0, scale=0.25, device="cpu",
                         on_minibatch=lambda i, t: seen.append(i))
    assert len(times) == 2 and all(t > 0 for t in times) and seen == [0, 1]


def test_dataloader_workers_do_the_per_sample_work():
    # In a process of its own: DataLoader workers are forked, and this test process has gRPC loaded (a fork would run
    # gRPC's fork handlers: tests/procs.py)
    r = procs.run([sys.executable, "-c", "from jetfleet.agent.workloads.training import run_training\n"
                   "print(len(run_training('resnet18', 2, minibatch_size=2, workers=1, scale=0.25, device='cpu')))"],
                  timeout=300)
    assert (r.returncode, r.stdout) == (0, "2\n"), r.stderr


def test_checked_in_characterisation_matches_the_models():
    """Regenerated from the torch models; fails when a model changes without `make characterise`."""
    from jetfleet.agent.workloads.characterise import characterise_all

    fresh = json.loads(json.dumps(characterise_all(), sort_keys=True))
    assert fresh == characterisations()
    r = characterisations()["resnet18"]
    # ResNet-18: ~1.8 GMAC per 224x224 image forward, x2 FLOP/MAC, x3 for training, x16 images
    assert r["flops"] == pytest.approx(1.82e9 * 2 * 3 * 16, rel=0.05)
    m = characterisations()["mobilenet_v3"]
    assert m["flops"] == pytest.approx(0.22e9 * 2 * 3 * 16, rel=0.1)
