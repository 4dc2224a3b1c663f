"""`jetfleet eval choices --reference --grid`: choices and the closed loop scored on a measured grid, and
confirm-before-commit (``powertrain.confirm``) against the optimizer's curse."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from jetfleet.cli.main import cli
from jetfleet.controller.powertrain.confirm import Confirmation
from jetfleet.controller.powertrain.feedback import Feedback, Observation
from jetfleet.research.powertrain.evaluate import csv_text, twin_truth
from jetfleet.research.powertrain.measured import MeasuredOptions, budgets_between, evaluate_files
from jetfleet.shared.errors import InvalidArgument

from .test_calibration import grid_predictions

BENCH = Path(__file__).resolve().parents[1] / "bench"


def tx2_csvs(shared_data, out):
    sys.path.insert(0, str(BENCH))
    from convert_tx2 import convert

    return {f.stem.rsplit("_", 1)[-1]: f.read_text() for f in convert(shared_data / "tx2-xception", out)}


def test_confirming_measures_the_choice_learns_and_commits_to_a_mode_measured_within_the_budget():
    modes, time, power, pred = grid_predictions(power_bias=0.85)      # the model thinks 15% too low
    fb = Feedback(pred)
    conf = Confirmation(fb, 12.0, profiles=3)
    first = conf.next_mode()
    assert first is not None and power[first] > 12                      # the curse: its choice is over the budget
    seen = []
    while (i := conf.next_mode()) is not None:
        seen.append(i)
        conf.add(Observation(i, float(power[i]), float(time[i])))
    c = conf.commit()
    assert seen[0] == first and 1 <= conf.used <= 3 and len(set(seen)) == len(seen)
    assert power[c.index] <= 12 and c.index in seen                      # committed to a measured mode that fits
    assert not fb.allowed[first]                                         # and the loop's model knows what was over
    fits = [i for i in seen if power[i] <= 12]
    assert c.index == min(fits, key=lambda i: time[i])


def test_without_profiles_it_commits_to_a_known_mode_or_the_models_choice():
    modes, time, power, pred = grid_predictions(power_bias=0.85)
    assert Confirmation(Feedback(pred), 12.0, profiles=0).commit().index == Feedback(pred).choose(
        power_budget_w=12.0).index
    slow = int(np.argmax(time))                                          # a profiled mode within the budget
    known = Confirmation(Feedback(pred), 12.0, profiles=0, known=[Observation(slow, float(power[slow]), 999.0)])
    assert known.next_mode() is None and known.commit().index == slow
    for bad, field in ((dict(profiles=-1), "profiles"), (dict(profiles=21), "profiles")):
        with pytest.raises(InvalidArgument) as e:
            Confirmation(Feedback(pred), 12.0, **bad)
        assert e.value.field == field
    with pytest.raises(InvalidArgument) as e:
        Confirmation(Feedback(pred), float("nan"))
    assert e.value.field == "power_budget_w"


@pytest.mark.slow   # an evaluation (k = 50 twice over 10 budgets): ~14 s
def test_the_measured_evaluation_on_the_real_tx2_grid_meets_the_choice_targets(shared_data, tmp_path):
    """The quick variant (k = 50, two repeats, 800x800 from 200x200) holds the issue's targets: confirm before
    committing keeps every choice within 5% of its budget after the loop and all but one before it, at a median
    time penalty of at most 3% before and after the loop, where PowerTrain's point choice goes over by more
    than 5% in at least a tenth of the choices (the optimizer's curse) and the upper bound alone costs more time."""
    csvs = tx2_csvs(shared_data, tmp_path)
    r = evaluate_files(csvs["200x200"], csvs["800x800"], MeasuredOptions(k=50, repeats=2))
    by = {p.policy: p for p in r.budget_sets[0].policies}
    assert r.budget_sets[0].name == "all" and by["confirm"].choices == 20
    assert by["point"].over_by_5pct_before_pct >= 10
    assert by["confirm"].over_by_5pct_before_pct <= 5 and by["confirm"].over_by_5pct_after_pct == 0
    assert by["confirm"].median_penalty_before_pct <= 3 and by["confirm"].median_penalty_after_pct <= 3
    assert by["confirm"].median_penalty_before_pct < by["bound"].median_penalty_before_pct   # the bound's margin costs
    assert by["confirm"].profiles_mean <= 3
    assert r.model.power_mape_true_pct < 6 and r.model.power_mape_cv_pct > 0


def test_the_cli_prints_the_figures_per_budget_set_and_json_with_plain_names(tmp_path):
    ref, grid = tmp_path / "ref.csv", tmp_path / "grid.csv"
    ref.write_text(csv_text(twin_truth("tx2", "resnet18")))
    grid.write_text(csv_text(twin_truth("tx2", "mobilenet_v3", seed=3)))
    args = ["eval", "choices", "--reference", str(ref), "--grid", str(grid), "--k", "12", "--repeats", "1"]
    r = CliRunner().invoke(cli, [*args, "--output", "json", "--out", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["modes"] == 768 and d["k"] == 12 and d["strategy"] == "balanced" and d["profiles"] == 3
    assert [s["name"] for s in d["budget_sets"]] == ["all", "low", "high"] and len(d["budget_sets"][0]["budgets_w"]) == 10
    policy = d["budget_sets"][0]["policies"][2]
    assert policy["policy"] == "confirm" and {"over_budget_before_pct", "over_by_5pct_after_pct",
                                              "median_penalty_after_pct", "steps_mean", "profiles_mean"} <= set(policy)
    assert {"time_mape_true_pct", "time_mape_cv_pct", "power_mape_true_pct", "power_mape_cv_pct"} <= set(d["model"])
    assert "| all (" in (tmp_path / "out" / "report.md").read_text()
    text = CliRunner().invoke(cli, args)
    assert text.exit_code == 0 and "budgets low (5:" in text.output and "confirm" in text.output, text.output


@pytest.mark.parametrize("extra, field", [
    (["--grid", "GRID"], "reference"),
    (["--reference", "GRID"], "grid"),
    (["--reference", "GRID", "--grid", "GRID", "--quick"], "quick"),
    (["--reference", "GRID", "--grid", "GRID", "--k", "2000"], "k"),
    (["--reference", "GRID", "--grid", "GRID", "--profiles", "99"], "profiles"),
    (["--reference", "GRID", "--grid", "GRID", "--window-noise", "-1"], "window_noise"),
])
def test_a_bad_measured_evaluation_is_refused_naming_the_option(tmp_path, extra, field):
    grid = tmp_path / "g.csv"
    grid.write_text(csv_text(twin_truth("tx2", "lstm")))
    r = CliRunner().invoke(cli, ["eval", "choices", *[str(grid) if a == "GRID" else a for a in extra],
                                 "--out", str(tmp_path / "never"), "--output", "json"])
    assert r.exit_code == 3, r.output
    assert json.loads(r.stderr.strip().splitlines()[-1])["error"]["field"] == field
    assert not (tmp_path / "never").exists()


def test_budgets_lie_between_the_grids_10th_and_90th_power_percentiles():
    power = np.linspace(1.0, 11.0, 101)
    b = budgets_between(power)
    assert len(b) == 10 and b[0] == pytest.approx(2.0) and b[-1] == pytest.approx(10.0)
    assert all(x < y for x, y in zip(b, b[1:]))


def test_the_readmes_tx2_transfer_example_runs_on_the_real_grid(shared_data, tmp_path):
    """README: `eval transfer` from the 200x200 to the 800x800 Xception grid (up to 43.6 W: refused before the TX2's
    limit was raised from 40 W)."""
    sys.path.insert(0, str(BENCH))
    from convert_tx2 import convert

    files = {f.stem.rsplit("_", 1)[-1]: f for f in convert(shared_data / "tx2-xception", tmp_path)}
    r = CliRunner().invoke(cli, ["eval", "transfer", "--reference", str(files["200x200"]), "--target",
                                 str(files["800x800"]), "--k", "50", "--repeats", "1", "--output", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["target_modes"] == 768 and d["mape"]["power_transfer"][0] < d["mape"]["power_scratch"][0]
