"""The real processes: `controller serve` and `agent run` as separate programs, stopped by SIGTERM."""

import os
import re
import signal
import sys

import pytest
from click.testing import CliRunner

from jetfleet.cli.main import cli
from jetfleet.client import OperatorClient

from . import procs

JETFLEET = [sys.executable, "-m", "jetfleet.cli"]


def start(args, **kw):
    return procs.spawn(JETFLEET + args, stdout=procs.PIPE, stderr=procs.STDOUT, **kw)


def test_controller_and_agent_processes_talk_and_stop_cleanly_on_sigterm(tmp_path):
    ctl = start(["controller", "serve", "--listen", "127.0.0.1:0", "--store", str(tmp_path / "data")])
    try:
        line = ctl.stdout.readline()
        m = re.search(r"listening on 127.0.0.1:(\d+)", line)
        assert m, line
        address = f"127.0.0.1:{m.group(1)}"
        agent = start(["agent", "run", "--controller", address, "--device", "emulated:tx2:5", "--speed", "inf",
                       "--id", "tx2-lab"])
        try:
            with OperatorClient(address) as c:
                wait_for(lambda: any(d.online for d in c.list_devices()), 20)
                assert [(d.device_id, d.model, d.online) for d in c.list_devices()] == [("tx2-lab", "tx2", True)]
                assert c.set_mode("tx2-lab", "MAXQ").confirmed.gpu_mhz == 943.5
        finally:
            agent.send_signal(signal.SIGTERM)
            assert agent.wait(15) == 0, agent.stdout.read()
        with OperatorClient(address) as c:
            wait_for(lambda: not c.list_devices()[0].online, 10)  # a clean agent exit ends its session at once
    finally:
        ctl.send_signal(signal.SIGTERM)
        assert ctl.wait(15) == 0
    assert os.path.exists(tmp_path / "data/jetfleet.db")


# The whole demo: ~100 s idle on this 2-core machine (more with its step 9), the slowest test by three times, so it
# runs with the slow tests (`make test-slow`, which CI's .ci/run runs on every landing), not in `make test`.
@pytest.mark.slow
@pytest.mark.timeout(900)   # four times its idle time with both cores loaded (a hang guard, not a speed target)
def test_make_demo_story_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the demo writes its Pareto plot to the working directory
    r = CliRunner().invoke(cli, ["lab", "demo"])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "demo-pareto.png").stat().st_size > 1000
    assert "agx-xavier-1   asked MODE_15W             confirms 4/1190.4/675.75/1331.2" in r.output
    assert "INVALID_ARGUMENT: cpu_mhz=2200" in r.output and "NOT_FOUND: unknown device 'tx2-9'" in r.output
    assert r.output.split("== 10.")[1].count("ms/minibatch") == 8 and "4368 measured, 0 failed" in r.output
    story = r.output.split("== 8.")[1].split("== 9.")[0]
    assert re.search(r"profiling [1-9]\d*/50 modes of mobilenet_v3 on agx-xavier-1", story), story
    for stage in ("modelling transferring ref-agx-orin-resnet18",
                  "running   training on agx-xavier-1", "held-out MAPE (5-fold cross-validation on its 50 modes)",
                  "fastest under 30 W — done", "predicted all 29232 modes with bounds"):
        assert stage in story, stage
    assert "goal kept." in story and "4000 minibatches in" in story
    # your own script under 30 W: the example adopted by an attached job, profiled online on its own steps
    own = r.output.split("== 9.")[1].split("== 10.")[0]
    assert re.search(r"profiling \d/10 modes of digits-mlp online on its own steps on agx-xavier-1", own), own
    for stage in ("modelling transferring ref-agx-orin-resnet18", "digits-mlp on agx-xavier-1, fastest under 30 W — done",
                  "online profiling: 200 of its own steps (25% of the job)", "within the 30 W budget"):
        assert stage in own, (stage, own)


def test_controller_killed_and_restarted_agents_reconnect_and_nothing_acknowledged_is_lost(tmp_path):
    store = str(tmp_path / "data")
    ctl = start(["controller", "serve", "--listen", "127.0.0.1:0", "--store", store])
    port = re.search(r"listening on 127.0.0.1:(\d+)", ctl.stdout.readline()).group(1)
    address = f"127.0.0.1:{port}"
    serve = ["controller", "serve", "--listen", address, "--store", store]  # the restart comes back where agents dial
    agents = [start(["agent", "run", "--controller", address, "--device", f"emulated:{m}:{i}", "--speed", "inf",
                     "--id", f"{m}-{i}"]) for i, m in enumerate(("agx-orin", "orin-nano"))]
    try:
        with OperatorClient(address) as c:
            wait_for(lambda: _online(c) == 2, 20)
            c.set_mode("agx-orin-0", "30W")
            c.set_mode("orin-nano-1", "7W")
        ctl.kill()  # SIGKILL: no clean shutdown
        ctl.wait(10)
        ctl = start(serve)
        with OperatorClient(address) as c:
            wait_for(lambda: _online(c) == 2, 60)   # the agents' backoff is capped: they come back by themselves
            devices = {d.device_id: d for d in c.list_devices()}
            assert devices["agx-orin-0"].current_mode_name == "MODE_30W"
            assert devices["orin-nano-1"].current_mode_name == "7W"
    finally:
        for a in agents:
            a.send_signal(signal.SIGTERM)
            a.wait(15)
        ctl.send_signal(signal.SIGTERM)
        ctl.wait(15)


def _online(c) -> int:
    try:
        return sum(d.online for d in c.list_devices())
    except Exception:  # the controller is still starting
        return -1


def wait_for(predicate, timeout_s: float) -> None:
    from .harness import wait_until

    wait_until(predicate, timeout_s, "the processes")
