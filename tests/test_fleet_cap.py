"""The lab as one power budget on a lab of emulated boards: labels and caps from the CLI (refusals change
nothing), the fleet queue placing and pacing jobs under the cap, the plan, and the metrics."""

import json
import re
from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner

from jetfleet.cli.main import cli
from jetfleet.client import OperatorClient
from jetfleet.research.powertrain.evaluate import twin_truth

from .harness import FAST_CONTROLLER, LabThread

SPEED = 300.0
NANO = "orin-nano"


@pytest.fixture(scope="module")
def nano_model():
    """Time and power networks of resnet18 on the Orin Nano (a short training; a value, saved into each lab)."""
    from jetfleet.controller.powertrain import nn as P

    g = twin_truth(NANO, "resnet18", seed=5)
    return g.modes, P.train_references(g.x, [g.time_ms, g.power_w], epochs=8)


@pytest.fixture
def lab(tmp_path, nano_model):
    from jetfleet.controller.powertrain.artifacts import ModelRepo
    from jetfleet.controller.powertrain.calibrate import Calibration

    lt = LabThread(str(tmp_path / "data"), [], config=replace(FAST_CONTROLLER, fleet_period_s=0.1)).start()
    for _ in range(2):
        lt.do(lambda: lt.lab.add_agent(NANO, speed=SPEED))
    lt.call(lt.lab.wait_online(2))
    modes, (tn, pn) = nano_model
    spread = Calibration(tuple(float(x) for x in np.linspace(-0.08, 0.08, 40)))   # a calibrated transfer's bounds
    lt.do(lambda: ModelRepo(lt.lab.controller.store).save("transfer", NANO, "resnet18", "", modes, tn, pn, {}, (0.0, 0.0, 0.0),
                                                          (spread, spread)))
    lt.wait(lambda: all(lt.telemetry.last(a.device_id) is not None for a in lt.lab.agents), what="telemetry")
    yield lt
    lt.close()


def run(lab, *args):
    return CliRunner().invoke(cli, [*args, "--controller", lab.address])


def as_json(lab, *args):
    r = run(lab, *args, "--output", "json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_caps_and_labels_from_the_cli_and_every_refusal_changes_nothing(lab):
    d = as_json(lab, "devices", "label", "orin-nano-0", "rack=rack-a")
    assert d["labels"] == {"rack": "rack-a"}
    idle = lambda: sum(lab.lab.controller.fleet.idle_w(a.device_id) for a in lab.lab.agents)  # noqa: E731
    before = idle()
    r = run(lab, "fleet", "cap", "set", "1W")
    assert r.exit_code == 3 and "below the idle power of the lab" in r.output, r.output
    # the idle power it names is the lowest the boards have shown, which only goes down while samples arrive
    said = float(re.search(r"idle at ([\d.]+) W", r.output).group(1))
    assert round(idle(), 1) - 0.05 <= said <= round(before, 1) + 0.05, (said, before, idle())
    r = run(lab, "fleet", "cap", "set", "30W", "--group", "rack-z")
    assert r.exit_code == 3 and "group 'rack-z' matches no board" in r.output
    r = run(lab, "devices", "label", "orin-nano-1", "rack")
    assert r.exit_code == 3 and "KEY=VALUE" in r.output
    assert as_json(lab, "fleet", "cap", "show") == []                  # nothing was stored
    caps = as_json(lab, "fleet", "cap", "set", "40W")
    assert [(c["group"], c["cap_w"], len(c["boards"])) for c in caps] == [("lab", 40.0, 2)]
    assert 0 < caps[0]["power_w"] < 40 and caps[0]["headroom_w"] == pytest.approx(40 - caps[0]["power_w"])
    as_json(lab, "fleet", "cap", "set", "12W", "--group", "rack-a")
    shown = {c["group"]: c for c in as_json(lab, "fleet", "cap", "show")}
    assert shown["rack-a"]["cap_w"] == 12.0 and [b["device_id"] for b in shown["rack-a"]["boards"]] == ["orin-nano-0"]
    text = run(lab, "devices", "ls").output
    assert "RACK" in text and "rack-a" in text and "lab: cap 40 W" in text
    metrics = lab.lab.controller.metrics.registry
    assert metrics.get_sample_value("jetfleet_fleet_cap_watts", {"group": "rack-a"}) == 12.0
    assert metrics.get_sample_value("jetfleet_fleet_power_watts", {"group": "lab"}) > 0
    cleared = as_json(lab, "fleet", "cap", "clear", "--group", "rack-a")
    assert cleared["cleared"] == "rack-a" and [c["group"] for c in cleared["caps"]] == ["lab"]
    assert run(lab, "fleet", "cap", "clear", "--group", "rack-a").exit_code == 4


def test_fleet_jobs_are_refused_without_a_cap_or_a_model_then_placed_paced_and_done_under_it(lab):
    r = run(lab, "job", "submit", "--workload", "resnet18", "--fleet", "--minibatches", "100")
    assert r.exit_code == 7 and "fleet cap set" in r.output
    as_json(lab, "fleet", "cap", "set", "22W")
    r = run(lab, "job", "submit", "--workload", "mobilenet_v3", "--fleet", "--minibatches", "100")
    assert r.exit_code == 3 and "no board model can run 'mobilenet_v3'" in r.output
    r = run(lab, "job", "submit", "--workload", "resnet18", "--fleet", "--device", "orin-nano-0", "--minibatches", "9")
    assert r.exit_code == 3 and "no device_id" in r.output
    with OperatorClient(lab.address) as c:
        assert c.list_jobs() == []
        jobs = [c.submit_job("resnet18", fleet=True, minibatches=4000, priority=p) for p in (2.0, 1.0)]
        assert all(j.fleet and j.target == "the fleet" for j in jobs) and jobs[0].priority == 2.0
        lab.wait(lambda: all(c.get_job(j.job_id).state == "running" for j in jobs), 60, "both fleet jobs running")
        plan = c.fleet_plan()[0]
        placed = {b.job_id: b for b in plan.boards if b.job_id}
        assert set(placed) == {j.job_id for j in jobs} and len({b.device_id for b in placed.values()}) == 2
        assert plan.predicted_w <= 22.0 + 1e-6    # the joint choice: the sum of upper bounds within the cap
        text = run(lab, "fleet", "plan").output
        assert "PREDICTED W" in text and jobs[0].job_id in text
        lab.wait(lambda: all(c.get_job(j.job_id).state == "done" for j in jobs), 120, "both fleet jobs done")
        done = [c.get_job(j.job_id) for j in jobs]
    assert all(j.minibatches_done == 4000 and j.mean_power_w is not None for j in done)
    # each job's draw over its run: the loop stepped where the boards drew more than the models said
    assert sum(j.mean_power_w for j in done) <= 22.0 * 1.01
    assert all(s.reason.startswith("fleet: ") for j in done for s in j.steps)
    assert lab.lab.controller.fleet_queue.sched.running == {}


def test_with_a_cap_and_no_fleet_job_the_fleet_loop_keeps_the_labs_power_gauge_current(lab):
    as_json(lab, "fleet", "cap", "set", "40W")
    metrics = lab.lab.controller.metrics.registry

    def lab_w() -> float:
        return metrics.get_sample_value("jetfleet_fleet_power_watts", {"group": "lab"}) or 0.0

    both = lab_w()
    assert both > 0
    gone = lab.lab.agents[1]
    lab.call(gone.stop())
    lab.wait(lambda: not lab.online(gone.device_id), 10, "the board offline")
    # no operator call from here: only the fleet loop's look at the boards can move the gauge
    lab.wait(lambda: 0 < lab_w() < 0.75 * both, 10, "the lab's power without the stopped board")


def test_a_rack_cap_is_scheduled_a_fleet_job_goes_where_its_rack_leaves_room(lab):
    """Rack caps are scheduled, not only shown: orin-nano-0's rack may draw only a little over its idle, so the
    fleet job lands on orin-nano-1 (the queue's first choice otherwise, as the first free board), and the plan's
    prediction for it keeps both caps."""
    as_json(lab, "devices", "label", "orin-nano-0", "rack=rack-a")
    as_json(lab, "fleet", "cap", "set", "40W")
    idle = lab.lab.controller.fleet.idle_w("orin-nano-0")
    as_json(lab, "fleet", "cap", "set", f"{idle + 0.5:.2f}W", "--group", "rack-a")
    with OperatorClient(lab.address) as c:
        job = c.submit_job("resnet18", fleet=True, minibatches=300)
        lab.wait(lambda: c.get_job(job.job_id).state in ("running", "done"), 60, "the fleet job started")
        assert c.get_job(job.job_id).device_id == "orin-nano-1"
        plan = {p.group: p for p in c.fleet_plan()}
        rack = plan["rack-a"]
        # nothing of the job's is predicted in the rack: its idle board counts as what it draws (its sensor's noise
        # alone spans ~0.6 W, so that draw itself may read over idle + 0.5 W: not the scheduler's doing)
        assert not any(b.job_id for b in rack.boards)
        assert rack.predicted_w == pytest.approx(sum(b.power_w for b in rack.boards))
        assert plan[""].predicted_w <= 40.0
        lab.wait(lambda: c.get_job(job.job_id).state == "done", 120, "the fleet job done")
