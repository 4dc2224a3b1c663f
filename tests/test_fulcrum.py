"""Fulcrum's choice and its evaluation (issue 15): the strategies on one scenario (fast), the full evaluation
(slow, `make eval`)."""

import json

import pytest

from jetfleet.research.fulcrum import choose as C
from jetfleet.research.fulcrum.evaluate import FULL, SMALL, evaluate, markdown
from jetfleet.research.fulcrum.space import BATCH_SIZES, Lab, Profile, Scenario, actually_run, grid_modes
from jetfleet.shared.concurrency import poisson_arrivals


def test_the_inference_grid_has_441_modes_on_both_boards():
    assert len(grid_modes("agx-orin")) == 441 and len(grid_modes("agx-xavier")) == 441


def test_profile_interpolates_between_characterised_batch_sizes_and_round_trips():
    p = Profile(0.05, 40.0, tuple(0.01 * b for b in BATCH_SIZES), tuple(20.0 + b / 4 for b in BATCH_SIZES))
    assert p.infer_at(24) == pytest.approx((0.24, 26.0))
    q = Profile.from_vector(p.vector())
    assert q.train_s == pytest.approx(p.train_s) and q.infer_w == pytest.approx(p.infer_w)


def test_a_seed_replays_the_same_measurements():
    mode = grid_modes("agx-orin")[200]
    a = Lab("agx-orin", 3).profile("resnet18", "lstm", mode)
    b = Lab("agx-orin", 3).profile("resnet18", "lstm", mode)
    c = Lab("agx-orin", 4).profile("resnet18", "lstm", mode)
    assert a == b and a != c


def test_strategies_on_one_scenario_gmd_stays_within_its_mode_budget_and_nothing_beats_the_optimum():
    lab = Lab("agx-orin")
    sc = Scenario("agx-orin", "resnet18", "mobilenet_v3", 10.0, 0.12, 30.0)
    planner = C.Planner(sc, lab, poisson_arrivals(sc.rate, 10, 1))
    truth = {m: lab.truth(sc.training, sc.inference, m) for m in grid_modes("agx-orin")}
    opt = C.optimum(planner, truth)
    gmd = C.gmd(planner)
    maxn = C.maxn(planner)
    assert opt.mode is not None and opt.expected.feasible(sc)
    assert gmd.modes_profiled <= C.GMD_MAX_MODES and gmd.mode is not None
    for ch in (gmd, maxn):
        if ch.expected is not None and ch.expected.feasible(sc):
            # planned on measured profiles vs the truth: within the measurement noise of the optimum at best
            assert ch.expected.train_per_s <= opt.expected.train_per_s * 1.03
    # MAXN draws more than 30 W serving and training: a power budget is what makes the choice matter
    assert maxn.expected.power_w > sc.power_budget_w
    run = actually_run(sc, gmd.mode, gmd.batch_size, gmd.known, poisson_arrivals(sc.rate, 10, 2), 0.8)
    assert run.train_per_s > 0 and run.p95_s > 0 and 10 < run.power_w < 60


def test_eval_fulcrum_quick_writes_the_report_the_plot_and_the_results(tmp_path):
    from click.testing import CliRunner

    from jetfleet.cli.main import cli

    r = CliRunner().invoke(cli, ["eval", "fulcrum", "--quick", "--out", str(tmp_path), "--output", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output[r.output.index("{\n"):])   # after the progress lines
    table = {row["strategy"]: row for row in d["table"]}
    assert {"GMD", "ALS", "MAXN", "optimum"} <= set(table)
    assert table["optimum"]["gap_mean_pct"] == 0.0
    assert table["GMD"]["modes_profiled_max"] <= C.GMD_MAX_MODES
    assert table["ALS"]["modes_profiled_max"] == SMALL.als_modes
    text = (tmp_path / "fulcrum.md").read_text()
    assert "| GMD |" in text and "> 97%" in text and "fulcrum.png" in text
    assert (tmp_path / "fulcrum.png").stat().st_size > 1000
    assert json.loads((tmp_path / "results.json").read_text())["runs"]


@pytest.mark.slow
def test_full_fulcrum_evaluation_prints_its_figures():
    """The evaluation behind docs/fulcrum.md (minutes): prints the table; checks the published mode counts."""
    report = evaluate(FULL)
    print(markdown(report))
    table = {r["strategy"]: r for r in report.table()}
    assert table["GMD"]["modes_profiled_max"] <= 15
    assert 50 <= table["ALS"]["modes_profiled_max"] <= 150
    assert len(report.infeasible) < len(FULL.scenarios()) / 2
