"""PowerTrain end to end: profiles -> reference -> transfer -> predict -> Pareto -> choose -> apply -> verify."""

import json
from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner

from jetfleet.cli.main import cli
from jetfleet.controller.powertrain import nn as P
from jetfleet.controller.powertrain.optimize import Predictions, choose, pareto_front
from jetfleet.controller.powertrain.select import pick_spread
from jetfleet.research.powertrain.evaluate import csv_text, run_trial, train_references, twin_truth
from jetfleet.shared.catalog import PowerMode
from jetfleet.shared.errors import FailedPrecondition, InvalidArgument

from .harness import LabThread


def test_pareto_front_and_goals():
    modes = [PowerMode(c, 1, 1, 1) for c in range(1, 6)]
    t = np.array([10.0, 20.0, 15.0, 40.0, 12.0])
    p = np.array([50.0, 20.0, 30.0, 9.0, 60.0])
    assert pareto_front(t, p).tolist() == [0, 2, 1, 3]  # mode 4 (12 ms, 60 W) is dominated by mode 0
    pr = Predictions(modes, t, p)
    assert choose(pr, power_budget_w=30).mode.cores == 3
    assert choose(pr, deadline_s=0.025, minibatches_per_epoch=1).mode.cores == 2
    c = choose(pr, min_energy=True, minibatches_per_epoch=100)
    assert c.mode.cores == 4 and c.energy_per_epoch_j == pytest.approx(9 * 4.0)
    with pytest.raises(FailedPrecondition, match="lowest-power mode is 4/1/1/1 at 9.0 W"):
        choose(pr, power_budget_w=5)
    with pytest.raises(FailedPrecondition, match=r"the fastest, 1/1/1/1, takes 1.0 s"):
        choose(pr, deadline_s=0.5, minibatches_per_epoch=100)
    with pytest.raises(InvalidArgument, match="exactly one goal"):
        choose(pr, power_budget_w=30, min_energy=True)


def test_transfer_beats_scratch_on_the_twin_with_50_modes():
    refs = train_references(twin_truth("agx-orin", "resnet18", seed=1), epochs=25)   # 16.6% against scratch 25.0%
    target = twin_truth("agx-orin", "mobilenet_v3", seed=1)
    tr = run_trial(refs, target, 50, seed=0)
    assert P.mape(tr.transfer_time, target.time_ms) < P.mape(tr.scratch_time, target.time_ms)
    assert P.mape(tr.transfer_time, target.time_ms) < 25


def test_spread_selection_covers_the_knob_space():
    g = twin_truth("orin-nano", "resnet18")
    idx = pick_spread(g.x, 20, np.random.default_rng(0))
    assert len(set(idx.tolist())) == 20
    assert {g.x[i, 0] for i in idx} == {2.0, 4.0, 6.0}  # every core count is represented
    with pytest.raises(InvalidArgument, match="too few"):
        P.transfer(P.train_reference(g.x, g.time_ms, epochs=2), g.x[:3], g.time_ms[:3])


@pytest.fixture
def lab(tmp_path):
    lt = LabThread(str(tmp_path / "data"), ["agx-orin", "orin-nano"]).start()
    yield lt
    lt.close()


@pytest.fixture(scope="module")
def modelled_lab(tmp_path_factory):
    """A lab of its own with the models the refusals need: an agx-orin/resnet18 reference (to transfer from)
    and an orin-nano/mobilenet_v3 model (to optimise with)."""
    tmp = tmp_path_factory.mktemp("pt-models")
    lt = LabThread(str(tmp / "data"), ["agx-orin", "orin-nano"]).start()
    for board, workload, grid in (("agx-orin", "resnet18", "powertrain"), ("orin-nano", "mobilenet_v3", "full")):
        f = tmp / f"{board}-{workload}.csv"
        f.write_text(csv_text(twin_truth(board, workload, grid=grid)))
        run(lt, "profiles", "import", str(f))
        run(lt, "model", "train-reference", "--board-model", board, "--workload", workload, "--epochs", "3")
    yield lt
    lt.close()


def run(lab, *args):
    r = CliRunner().invoke(cli, [*args, "--controller", lab.address, "--output", "json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_operator_workflow_train_transfer_optimize_apply_verify(lab, tmp_path):
    ref_csv = tmp_path / "ref.csv"
    ref_csv.write_text(csv_text(twin_truth("agx-orin", "resnet18", grid="powertrain")))
    assert run(lab, "profiles", "import", str(ref_csv))["rows"] == 4368
    ref = run(lab, "model", "train-reference", "--board-model", "agx-orin", "--workload", "resnet18", "--epochs", "8")
    assert ref["kind"] == "reference" and ref["training_modes"] == 4368
    camp = run(lab, "profile", "start", "--workload", "mobilenet_v3", "--device", "orin-nano-1", "--modes", "random:30",
               "--minibatches", "10", "--wait")
    assert camp["done"] == 30
    tr = run(lab, "model", "transfer", "--board-model", "orin-nano", "--workload", "mobilenet_v3")
    assert tr["parent_id"] == ref["model_id"] and tr["training_modes"] == 30
    assert {"time_cv_mape_pct", "power_cv_mape_pct", "scratch_time_cv_mape_pct", "time_fit_mape_pct"} <= set(tr["metrics"])
    shown = CliRunner().invoke(cli, ["model", "show", tr["model_id"], "--controller", lab.address]).output
    assert "held-out MAPE (5-fold cross-validation on its modes): time" in shown
    assert "in-sample fit on its own training modes (not an accuracy)" in shown
    assert [m["model_id"] for m in run(lab, "model", "ls")] == [ref["model_id"], tr["model_id"]]
    pred = run(lab, "predict", "--board-model", "orin-nano", "--workload", "mobilenet_v3")
    assert len(pred["predictions"]) == 1800 and pred["confidence"] == 0.9
    assert all(p["power_w_lo"] <= p["power_w"] <= p["power_w_hi"] and p["time_ms_lo"] <= p["time_ms"] <= p["time_ms_hi"]
               for p in pred["predictions"])
    assert any(p["power_w_hi"] > p["power_w"] * 1.01 for p in pred["predictions"])    # calibrated, not degenerate
    plot = tmp_path / "front.png"
    front = run(lab, "pareto", "--board-model", "orin-nano", "--workload", "mobilenet_v3", "--plot", str(plot))
    assert plot.stat().st_size > 1000 and 3 <= len(front["front"]) < 1800
    times = [f["time_ms"] for f in front["front"]]
    assert times == sorted(times)
    opt = run(lab, "optimize", "orin-nano-1", "--workload", "mobilenet_v3", "--power-budget", "8W", "--apply", "--refine")
    assert opt["predicted_power_w"] <= opt["predicted_power_w_hi"] <= 8 and len(opt["applied"]) == 1
    applied = opt["applied"][0]
    assert applied["confirmed"] == opt["mode"]
    assert lab.lab.agents[1].board.read_mode() == PowerMode(*[float(x) for x in opt["mode"].split("/")])
    assert applied["observed_time_ms"] > 0 and abs(applied["time_error_pct"]) < 60
    decisions = lab.do(lambda: lab.lab.controller.store.list_docs("decision"))
    assert decisions[-1]["mode"] == opt["mode"] and decisions[-1]["refined"]
    refined = lab.do(lambda: lab.lab.controller.store.query_profiles(board_model="orin-nano", workload="mobilenet_v3"))
    assert len(refined) == 31  # the observed point joined the profiles
    energy = run(lab, "optimize", "--board-model", "orin-nano", "--workload", "mobilenet_v3", "--min-energy",
                 "--minibatches-per-epoch", "1000")
    assert energy["goal"] == "least energy per epoch" and energy["applied"] == []


@pytest.mark.parametrize("args,needle,code", [
    (("optimize", "orin-nano-1", "--workload", "mobilenet_v3", "--power-budget", "1W"),
     "no mode can run under 1 W: the lowest-power mode is 1/", 7),
    (("optimize", "orin-nano-1", "--workload", "mobilenet_v3", "--deadline", "1s", "--minibatches-per-epoch", "100000"),
     "no mode can finish 100000 minibatches in 1 s: the fastest", 7),
    (("optimize", "orin-nano-1", "--workload", "mobilenet_v3", "--power-budget", "lots"), "'lots' is not a power", 3),
    (("optimize", "orin-nano-1", "--workload", "bert_base", "--power-budget", "10W"), "no model for bert_base on orin-nano",
     4),
    (("model", "transfer", "--board-model", "agx-orin", "--workload", "lstm"), "no profiles of lstm on agx-orin", 4),
    (("model", "train-reference", "--board-model", "agx-xavier", "--workload", "resnet18"), "no profiles of resnet18", 4),
    (("model", "show", "nope"), "unknown model 'nope'", 4),
])
def test_bad_requests_name_the_problem_and_apply_nothing(modelled_lab, args, needle, code):
    lab = modelled_lab
    before = lab.lab.agents[1].board.read_mode()
    r = CliRunner().invoke(cli, [*args, "--controller", lab.address])
    assert r.exit_code == code and needle in r.output, r.output
    assert lab.lab.agents[1].board.read_mode() == before


def test_eval_transfer_on_two_csv_files(tmp_path):
    ref, tgt = tmp_path / "r.csv", tmp_path / "t.csv"
    ref.write_text(csv_text(twin_truth("orin-nano", "resnet18")))
    tgt.write_text(csv_text(twin_truth("orin-nano", "lstm")))
    r = CliRunner().invoke(cli, ["eval", "transfer", "--reference", str(ref), "--target", str(tgt), "--k", "30",
                                 "--repeats", "2", "--output", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["target_modes"] == 900 and d["mape"]["time_transfer"][0] < d["mape"]["time_scratch"][0]
    r = CliRunner().invoke(cli, ["eval", "transfer", "--reference", str(ref), "--target", str(tgt), "--k", "5000"])
    assert r.exit_code == 3 and "k=5000" in r.output


def test_reference_without_dropout_is_stored_with_its_architecture(lab, tmp_path):
    ref_csv = tmp_path / "nano.csv"
    ref_csv.write_text(csv_text(twin_truth("orin-nano", "yolo_v8n")))
    run(lab, "profiles", "import", str(ref_csv))
    ref = run(lab, "model", "train-reference", "--board-model", "orin-nano", "--workload", "yolo_v8n", "--epochs", "5",
              "--no-dropout")
    doc = lab.do(lambda: lab.lab.controller.store.get_doc("model", ref["model_id"]))
    assert doc["dropout"] == [0.0, 0.0, 0.0]
    pred = run(lab, "predict", "--board-model", "orin-nano", "--workload", "yolo_v8n", "--model", ref["model_id"])
    assert len(pred["predictions"]) == 1800 and all(p["time_ms"] > 0 for p in pred["predictions"])


def test_a_model_of_another_board_model_is_not_applied(lab, tmp_path):
    ref_csv = tmp_path / "ref.csv"
    g = twin_truth("agx-orin", "lstm")
    ref_csv.write_text(csv_text(replace(g, modes=g.modes[:30], x=g.x[:30], time_ms=g.time_ms[:30], power_w=g.power_w[:30])))
    run(lab, "profiles", "import", str(ref_csv))
    ref = run(lab, "model", "train-reference", "--board-model", "agx-orin", "--workload", "lstm", "--epochs", "2",
              "--accept-partial")    # 30 modes of the reference grid: partial (tests/test_coverage.py)
    before = lab.lab.agents[1].board.read_mode()
    r = CliRunner().invoke(cli, ["optimize", "orin-nano-1", "--workload", "lstm", "--model", ref["model_id"],
                                 "--power-budget", "10W", "--apply", "--controller", lab.address])
    assert r.exit_code == 3 and "predicts agx-orin, not orin-nano" in r.output, r.output
    assert lab.lab.agents[1].board.read_mode() == before
