"""Ctrl-C for real: the CLI in its own process gets SIGINT. Following a campaign stops, the campaign goes on and
the CLI says so with its id; a reference training is cancelled on the controller and stores nothing. And
`lab up` runs its boards at the speed the README says, which `devices ls` shows."""

import json
import os
import signal
import sys

import pytest

from jetfleet.client import connect

from . import procs
from .harness import LabThread, wait_until

# SIGINT as a terminal delivers it, whoever started the test run: a shell that starts a job in the background
# (`make test &`, some CI runners) starts it with SIGINT ignored, and an ignored signal is inherited; tests/procs.py
# spawns children with SIGINT at its default, so Python installs its handler as at a terminal.
CLI = [sys.executable, "-m", "jetfleet.cli"]


def start(args, env):
    return procs.spawn([*CLI, *args], env={**os.environ, **env})


def interrupt(p):
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    return p.returncode, out, err


@pytest.fixture
def lab(tmp_path):
    lt = LabThread(str(tmp_path / "data"), [])
    lt.start()
    lt.do(lambda: lt.lab.add_agent("orin-nano", speed=20.0))   # a mode takes ~0.2 s: time to interrupt mid-campaign
    lt.call(lt.lab.wait_online(1))
    yield lt
    lt.close()


def test_ctrl_c_on_profile_start_wait_leaves_the_campaign_running_and_says_so(lab):
    p = start(["profile", "start", "--workload", "resnet18", "--device", "orin-nano-0", "--modes", "random:200", "--wait"],
              {"JETFLEET_CONTROLLER": lab.address})
    first = p.stderr.readline()
    cid = first.split()[1]
    assert first.startswith(f"campaign {cid} started: 200 modes"), first
    assert p.stderr.readline().startswith(f"campaign {cid}: ")     # following it
    code, out, err = interrupt(p)
    assert code == 130, err
    assert (f"interrupted: campaign {cid} goes on on the controller; follow it with `jetfleet profile show {cid}`, stop "
            f"it with `jetfleet profile cancel {cid}`") in err
    assert "Aborted!" not in err and "Traceback" not in err
    with connect(lab.address) as c:
        at_interrupt = c.get_campaign(cid).done
        wait_until(lambda: c.get_campaign(cid).done > at_interrupt + 2, 30, "the campaign to go on")
        assert c.get_campaign(cid).status == "running"
        c.cancel_campaign(cid)


def test_ctrl_c_on_train_reference_cancels_it_and_no_model_is_stored(lab):
    from jetfleet.research.powertrain.evaluate import csv_text, twin_truth

    with connect(lab.address) as c:   # 900 profiled modes: 10,000 epochs would take minutes
        c.import_profiles(csv_text(twin_truth("orin-nano", "resnet18")), "ref.csv")
    models = lab.lab.controller.models
    p = start(["model", "train-reference", "--board-model", "orin-nano", "--workload", "resnet18", "--epochs", "10000",
               "--output", "json"], {"JETFLEET_CONTROLLER": lab.address})
    line = json.loads(p.stderr.readline())
    assert line["progress"]["total"] == 10000 and line["progress"]["done"] >= 1     # it is training
    assert lab.do(lambda: models.trainings_running) == 1
    code, out, err = interrupt(p)
    assert code == 130 and out == ""
    assert json.loads(err.splitlines()[-1]) == {
        "note": "interrupted: training cancelled; the controller stops it at its next epoch and stores no model",
        "interrupted": True}
    wait_until(lambda: lab.do(lambda: models.trainings_running) == 0, 30, "the controller to stop training")
    with connect(lab.address) as c:
        assert c.list_models() == []


def test_lab_up_runs_its_boards_at_100x_and_devices_ls_says_so(tmp_path):
    p = procs.spawn([*CLI, "lab", "up", "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path / "lab"), "--boards",
                     "orin-nano"])
    try:
        first = p.stdout.readline()
        assert first.startswith("lab up on 127.0.0.1:"), first + p.stderr.read()
        address = first.split()[3]
        assert "the boards' clocks run at 100x real time" in p.stdout.readline()
        with connect(address) as c:
            [d] = c.list_devices()
        assert (d.speed, d.speed_text) == (100.0, "100x")
        r = procs.run([*CLI, "devices", "ls", "--controller", address], timeout=60)
        header, row = r.stdout.splitlines()
        assert header.split()[-1] == "SPEED" and row.split()[-1] == "100x"
    finally:
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=60)
    assert p.returncode == 0
