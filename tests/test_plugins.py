"""The operator's own workloads: a plugin package installed on a board (the example in examples/) is
offered beside the built-ins, characterised from its model, emulated by the twin, trained for real, and
accepted by the controller for that board; a plugin that fails to import is reported and not offered."""

import shutil
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from jetfleet.cli.main import cli
from jetfleet.client import OperatorClient
from jetfleet.shared.errors import NotFound

from . import procs
from .harness import LabThread

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "jetfleet-workload-example"
BROKEN = {"pyproject.toml": """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"
[project]
name = "jetfleet-broken-plugin"
version = "0.0.1"
[project.entry-points."jetfleet.workloads"]
wobbly = "wobbly_workload:plugin"
[tool.setuptools]
py-modules = ["wobbly_workload"]
""", "wobbly_workload.py": "import a_module_nobody_installed  # noqa\n"}


def pip_install(src: Path, target: Path) -> None:
    out = procs.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                          "--target", str(target), str(src)], timeout=300)
    assert out.returncode == 0, out.stderr


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The example plugin and a broken one, pip-installed into a directory of their own (as on a board)."""
    tmp = tmp_path_factory.mktemp("plugins")
    target = tmp / "site"
    example = shutil.copytree(EXAMPLE, tmp / "example")   # pip builds in the source tree: use a copy
    pip_install(example, target)
    broken = tmp / "broken"
    broken.mkdir()
    for name, text in BROKEN.items():
        (broken / name).write_text(text)
    pip_install(broken, target)
    return target


@pytest.fixture
def installed(site, monkeypatch):
    """The agent's workloads with that directory on sys.path."""
    monkeypatch.syspath_prepend(str(site))
    from jetfleet.agent.workloads.plugins import load_workloads

    return load_workloads()


def test_installed_plugins_join_the_registry_and_a_broken_one_is_reported(installed):
    reg = installed.registry
    assert "squeezenet" in reg.names() and "resnet18" in reg.names() and "wobbly" not in reg.names()
    assert "ModuleNotFoundError" in reg.broken["wobbly"] and "a_module_nobody_installed" in reg.broken["wobbly"]
    cost = reg.characterisation("squeezenet")
    assert cost["conv_bins"] and cost["flops"] > 1e9 and cost["kernels"] > 50
    from jetfleet.shared.catalog import get_catalog
    from jetfleet.twin.board import EmulatedBoard

    board = EmulatedBoard("agx-orin", 0, workloads=reg)
    t_sq, p_sq = board.expected("squeezenet", get_catalog("agx-orin").maxn)
    t_rn, _ = board.expected("resnet18", get_catalog("agx-orin").maxn)
    assert 0.005 < t_sq < t_rn and 20 < p_sq < 60          # a smaller CNN than ResNet-18, from its own model
    with pytest.raises(NotFound, match="plugin 'wobbly' is installed but broken"):
        reg.get("wobbly")


def test_a_plugin_is_served_for_inference_from_its_own_forward_pass(installed):
    from jetfleet.twin.board import EmulatedBoard

    reg = installed.registry
    assert "squeezenet" in reg.inference_names()
    board = EmulatedBoard("agx-orin", 0, workloads=reg)
    one, _ = board.expected_inference("squeezenet", board.catalog.maxn, batch_size=1)
    many, watts = board.expected_inference("squeezenet", board.catalog.maxn, batch_size=64)
    assert 0 < one < many and 15 < watts < 60
    assert len(board.run_inference("squeezenet", 3, batch_size=8).minibatch_times_s) == 3


def test_a_plugin_trains_for_real(installed):
    from jetfleet.agent.workloads.training import run_training

    times = run_training("squeezenet", 2, minibatch_size=2, workers=0, scale=0.25, device="cpu",
                         plugin=installed.plugins["squeezenet"])
    assert len(times) == 2 and all(t > 0 for t in times)


def test_the_controller_accepts_a_workload_only_where_a_board_offers_it(installed, tmp_path):
    lab = LabThread(str(tmp_path / "data"), [])
    lab.lab.workloads = installed.registry
    lab.start()
    try:
        lab.do(lambda: lab.lab.add_agent("orin-nano"))                       # has the plugins
        lab.lab.workloads = None
        lab.do(lambda: lab.lab.add_agent("orin-nano"))                       # built-ins only
        lab.call(lab.lab.wait_online(2))
        shown = CliRunner().invoke(cli, ["devices", "show", "orin-nano-0", "--controller", lab.address, "--output",
                                         "json"])
        d = __import__("json").loads(shown.output)
        assert "squeezenet" in d["workloads"] and "ModuleNotFoundError" in d["broken_workloads"]["wobbly"]
        with OperatorClient(lab.address) as c:
            camp = c.create_campaign(workload="squeezenet", device_id="orin-nano-0", modes="random:3", minibatches=10)
            lab.wait(lambda: c.get_campaign(camp.campaign_id).status == "done", 30, "the plugin's campaign")
            rows = lab.do(lambda: lab.lab.controller.store.query_profiles(workload="squeezenet"))
            assert len(rows) == 3 and all(r.minibatch_time_ms > 0 and r.power_w > 0 for r in rows)
            with pytest.raises(NotFound, match="unknown workload 'squeezenet' for orin-nano-1"):
                c.create_campaign(workload="squeezenet", device_id="orin-nano-1", modes="random:3")
            with pytest.raises(NotFound, match="broken there: wobbly"):
                c.create_campaign(workload="wobbly", device_id="orin-nano-0", modes="random:3")
    finally:
        lab.close()
