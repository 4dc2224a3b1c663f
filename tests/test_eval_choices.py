"""`jetfleet eval choices`: the fleet's choice policy and closed loop scored on the twin's truth."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from jetfleet.cli.main import cli
from jetfleet.research.powertrain.choices import calibrated_repeats, coverage, outcomes, score
from jetfleet.research.powertrain.evaluate import train_references, twin_truth


def test_choices_are_scored_before_and_after_the_loop_against_the_true_optimum():
    refs = train_references(twin_truth("orin-nano", "resnet18", seed=5), epochs=4)
    g = twin_truth("orin-nano", "mobilenet_v3", seed=1)
    reps = calibrated_repeats(refs, g, 15, 1)
    cov = coverage(g, reps, 0.9)
    assert 0.6 < cov["power_under_upper"] <= 1.0 and cov["power_inside"] <= cov["power_under_upper"]
    outs = outcomes(g, reps, [float(b) for b in range(6, 16)], confidence=0.9, max_steps=3)
    assert outs and all(o.steps <= 3 for o in outs)
    s = score(g, outs)
    assert s.choices == len(outs) and sum(s.steps_hist.values()) == len(outs)
    over_after = np.mean([g.power_w[o.last] > o.budget_w + 1 for o in outs]) * 100
    assert s.over1_after == pytest.approx(over_after)
    assert s.penalty_after == pytest.approx(np.median([(g.time_ms[o.last] / g.time_ms[o.optimum] - 1) * 100
                                                       for o in outs]))


@pytest.mark.slow
@pytest.mark.timeout(900)   # ~2 CPU minutes; far longer on a machine shared with other work
def test_the_quick_evaluation_writes_its_report(tmp_path):
    r = CliRunner().invoke(cli, ["eval", "choices", "--quick", "--repeats", "2", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    report = (tmp_path / "report.md").read_text()
    for section in ("published dropout or none", "Calibration on held-out modes", "Choosing under a power budget",
                    "upper bound at 80%", "MAPE against k"):
        assert section in report, section
    results = json.loads((tmp_path / "results.json").read_text())
    assert set(results["choices"]) == {"mobilenet_v3@agx-orin", "resnet18@agx-orin"}
    assert (tmp_path / "mape_vs_k.png").stat().st_size > 1000
