"""Models know where they are valid (issue 24, item 5): a reference fitted on a partial grid (a cancelled campaign,
whose grid runs in order: its first modes are all at 2 cores) is refused unless accepted, and then marked; a
prediction outside a model's coverage is marked, predicted at the nearest covered mode and its bounds widened; a
choice prefers covered modes and says when it is outside."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from jetfleet.cli.main import cli
from jetfleet.client import connect
from jetfleet.controller.powertrain.artifacts import ModelRepo
from jetfleet.controller.powertrain.coverage import Coverage
from jetfleet.controller.powertrain.feedback import Feedback, Observation
from jetfleet.controller.powertrain.optimize import Predictions, choose
from jetfleet.research.powertrain.evaluate import csv_text, twin_truth
from jetfleet.shared.catalog import PowerMode, get_catalog
from jetfleet.shared.errors import FailedPrecondition

from .harness import LabThread

NANO = "orin-nano"
# the stated factors (docs/models.md), written out so that a change to them is a change to this test
OUTSIDE_COVERAGE_FACTOR = 3.5   # beyond a knob the fit saw move
NEVER_MOVED_FACTOR = 10.0       # beyond a knob it saw at one level only
SLOW = 300.0   # board-time acceleration: a profile takes ~0.2 s of wall time, so a campaign is cancelled early


def _cli(lab, *args):
    return CliRunner().invoke(cli, [*args, "--controller", lab.address])


def _json(lab, *args):
    r = _cli(lab, *args, "--output", "json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


# --- the coverage itself -------------------------------------------------------------------------------------------
def test_a_partial_grid_names_the_levels_it_misses_and_covers_only_the_span_it_saw():
    cat = get_catalog(NANO)
    grid = cat.grid("powertrain")                  # cores 2, 4, 6 x 20 CPU x 5 GPU x 3 EMC, in order
    first = grid[:25]                              # a campaign cancelled after 25 modes: 2 cores, CPU 115.2 and 192
    levels = {k: cat.knob_values(k) for k in ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz")}
    cov = Coverage.of(first, grid, "campaign c1 (powertrain)", levels)
    assert cov.partial and (cov.fitted_modes, cov.grid_modes) == (25, 900)
    assert cov.missing_text().startswith("cores 4, 6; cpu_mhz 268.8, 345.6")
    x = np.array([m.as_tuple() for m in cat.grid("full")], float)
    covered = cov.covered(x)
    assert covered.sum() == 2 * 5 * 3                 # 2 cores, two CPU levels, every GPU and EMC level
    assert (cov.never_moved(x) == (x[:, 0] != 2)).all()   # cores was seen at one level only
    clamped = cov.clamp(np.array([[6, 1510.4, 306, 2133]], float))
    assert clamped.tolist() == [[2, 192, 306, 2133]]
    assert cov.reason(PowerMode(6, 1510.4, 306.0, 2133.0)) == ("cores 6 above the 2 it was fitted on; cpu_mhz 1510.4 "
                                                              "above the 115.2..192 it was fitted on")
    assert Coverage.from_dict(json.loads(json.dumps(cov.to_dict()))) == cov
    whole = Coverage.of(grid, grid, "campaign c2 (powertrain)", levels)
    assert not whole.partial and whole.covered(x).sum() == len(x) - 300   # only the 1-core modes are outside


def test_a_model_stored_without_coverage_is_covered_by_its_training_modes():
    legacy = {"training_modes": ["2/115.2/306/204", "4/192/624.75/2133"]}
    cov = ModelRepo.coverage(legacy)
    assert not cov.partial and cov.fitted_modes == 2
    assert cov.covered(np.array([[3, 150, 500, 665.6], [6, 150, 500, 665.6]], float)).tolist() == [True, False]


# --- predictions and choices ---------------------------------------------------------------------------------------
def _predictions():
    """Four modes: two inside a coverage of 2 cores, two at 4 cores (outside); calibrated bounds of +-10%."""
    modes = [PowerMode(2, 115.2, 306.0, 204.0), PowerMode(2, 192.0, 306.0, 204.0),
             PowerMode(4, 115.2, 306.0, 204.0), PowerMode(4, 192.0, 612.0, 2133.0)]
    p = Predictions(modes, np.array([200.0, 150.0, 120.0, 60.0]), np.array([5.0, 6.0, 6.5, 9.0]))
    p = p.bounded(0.9, (-0.1, 0.1), (-0.1, 0.1))
    cov = Coverage.of(modes[:2], modes[:2], "test")
    return p, p.outside_coverage(cov)


def test_predictions_outside_the_coverage_are_marked_and_their_bounds_widened_by_the_stated_factor():
    plain, p = _predictions()
    assert p.covered.tolist() == [True, True, False, False]
    assert np.allclose(p.power_hi[:2], plain.power_hi[:2]) and np.allclose(p.time_lo[:2], plain.time_lo[:2])
    assert np.allclose(p.power_hi[2:], plain.power_hi[2:] * NEVER_MOVED_FACTOR)   # cores: seen at one level only
    assert np.allclose(p.time_lo[2:], plain.time_lo[2:] / NEVER_MOVED_FACTOR)
    assert np.allclose(p.time_hi[2:], plain.time_hi[2:] * NEVER_MOVED_FACTOR)
    assert np.allclose(p.power_lo[2:], plain.power_lo[2:] / NEVER_MOVED_FACTOR)
    # beyond the span of a knob the fit did see move (above it or below): the smaller factor
    modes = [PowerMode(2, 115.2, 306.0, 204.0), PowerMode(4, 192.0, 306.0, 204.0), PowerMode(6, 192.0, 306.0, 204.0),
             PowerMode(1, 192.0, 306.0, 204.0)]
    q = Predictions(modes, np.ones(4), np.ones(4)).outside_coverage(Coverage.of(modes[:2], modes[:2], "test"))
    assert q.covered.tolist() == [True, True, False, False]
    assert q.power_hi.tolist() == pytest.approx([1, 1, OUTSIDE_COVERAGE_FACTOR, OUTSIDE_COVERAGE_FACTOR])
    assert q.time_lo.tolist() == pytest.approx([1, 1, 1 / OUTSIDE_COVERAGE_FACTOR, 1 / OUTSIDE_COVERAGE_FACTOR])


def test_a_choice_prefers_covered_modes_and_a_choice_outside_says_why():
    plain, p = _predictions()
    # by the bounds alone mode 3 (4 cores, 60 ms, <= 9.9 W) is the fastest under 10 W; the model never saw 4 cores
    assert choose(plain, power_budget_w=10).index == 3
    c = choose(p, power_budget_w=10)
    assert (c.index, c.covered, c.coverage_note) == (1, True, "")
    # under 100 W even its widened bound (<= 99.5 W) fits; a covered mode that meets the goal still comes first
    assert choose(p, power_budget_w=100).index == 1
    # only modes outside are left (the closed loop ruled the others out): chosen, marked, with the reason
    c = choose(p, min_energy=True, allowed=np.array([False, False, True, True]))
    assert not c.covered and c.index in (2, 3)
    assert "outside the model's coverage (cores 4 above the 2 it was fitted on" in c.coverage_note
    assert f"bounds widened x{NEVER_MOVED_FACTOR:g}" in c.coverage_note
    assert c.power_hi_w == pytest.approx(plain.power_hi[c.index] * NEVER_MOVED_FACTOR)


def test_a_goal_no_mode_can_meet_is_refused_naming_a_mode_the_model_knows():
    _, p = _predictions()
    with pytest.raises(FailedPrecondition) as e:
        choose(p, power_budget_w=0.1)
    assert e.value.message.startswith("no mode can run under 0.1 W: the lowest-power mode is 2/115.2/306/204 at 5.0 W")
    assert e.value.message.endswith("nor can a mode outside the model's coverage, by its widened bounds")


def test_the_closed_loop_keeps_the_coverage_of_its_model():
    _, p = _predictions()
    fb = Feedback(p)
    fb.observe(Observation(1, 6.1, 151.0))
    corrected = fb.predictions()
    assert corrected.covered.tolist() == [True, True, False, False]
    assert corrected.power_hi[3] / corrected.power_w[3] > NEVER_MOVED_FACTOR
    assert fb.choose(power_budget_w=10).index == 1


# --- the measured defect, end to end -------------------------------------------------------------------------------
@pytest.fixture
def lab(tmp_path):
    lt = LabThread(str(tmp_path / "data"), [])
    lt.lab.speed = SLOW
    lt.start()
    lt.do(lambda: lt.lab.add_agent(NANO))
    lt.call(lt.lab.wait_online(1))
    yield lt
    lt.close()


def test_a_reference_from_a_cancelled_campaign_is_refused_then_accepted_marked_and_trusted_only_where_it_saw(lab):
    with connect(lab.address) as c:
        camp = c.create_campaign("resnet18", device_id=f"{NANO}-0", modes="powertrain")
        lab.wait(lambda: c.get_campaign(camp.campaign_id).done >= 25, 60, "25 modes measured")
        c.cancel_campaign(camp.campaign_id)
        lab.wait(lambda: c.get_campaign(camp.campaign_id).in_flight == 0, 30, "the cancel")
        done = c.get_campaign(camp.campaign_id).done
    assert 25 <= done < 300        # all at 2 cores: the grid's first 300 modes are

    r = _cli(lab, "model", "train-reference", "--board-model", NANO, "--workload", "resnet18", "--epochs", "3")
    assert r.exit_code == 7, r.output          # FAILED_PRECONDITION
    assert f"a partial grid: {done} of the 900 modes of campaign {camp.campaign_id} (powertrain)" in r.output
    assert "missing the knob levels cores 4, 6; cpu_mhz" in r.output and "--accept-partial" in r.output
    assert _json(lab, "model", "ls") == []     # nothing stored

    ref = _json(lab, "model", "train-reference", "--board-model", NANO, "--workload", "resnet18", "--epochs", "3",
                "--accept-partial")
    cov = ref["coverage"]
    assert cov["partial"] and cov["accepted_partial"] and cov["fitted_modes"] == done and cov["grid_modes"] == 900
    assert cov["knobs"]["cores"]["seen"] == [2] and cov["knobs"]["cores"]["missing"] == [4, 6]
    assert cov["knobs"]["cores"]["catalog"] == [1, 2, 3, 4, 5, 6]
    shown = _cli(lab, "model", "show", ref["model_id"]).output
    assert "coverage PARTIAL (accepted)" in shown and "cores: 1 of 3 levels (2); MISSING 4, 6" in shown
    assert "held-out MAPE (10% of its" in shown and "measured inside its PARTIAL coverage only" in shown
    assert "PARTIAL (accepted)" in _cli(lab, "model", "ls").output
    assert _json(lab, "model", "ls")[0]["coverage"] == cov

    # calibrated on its 10% validation split (2 modes): bounds at up to 2/3
    pred = _json(lab, "predict", "--board-model", NANO, "--workload", "resnet18", "--confidence", "0.6")["predictions"]
    by_mode = {p["mode"]: p for p in pred}
    cpu = cov["knobs"]["cpu_mhz"]["seen"]
    assert {p["mode"] for p in pred if p["covered"]} == {     # 2 cores, the CPU clocks it saw, any GPU and EMC
        str(m) for m in get_catalog(NANO).grid("full") if m.cores == 2 and cpu[0] <= m.cpu_mhz <= cpu[-1]}
    inside, far = by_mode["2/115.2/306/204"], by_mode["6/1510.4/306/204"]
    assert inside["covered"] and not far["covered"]
    # predicted at the nearest covered mode, not by the network's extrapolation to 6 cores and 1510 MHz ...
    nearest = max((p for p in pred if p["covered"] and p["mode"].endswith("/306/204")),
                  key=lambda p: float(p["mode"].split("/")[1]))
    assert far["time_ms"] == pytest.approx(nearest["time_ms"], rel=1e-3)
    # ... with bounds wider by the stated factor
    assert far["power_w_hi"] / far["power_w"] == pytest.approx(
        NEVER_MOVED_FACTOR * nearest["power_w_hi"] / nearest["power_w"], rel=1e-2)

    opt = _json(lab, "optimize", f"{NANO}-0", "--workload", "resnet18", "--power-budget", "15W", "--confidence", "0.6")
    assert opt["covered"] and opt["mode"].startswith("2/") and opt["coverage_note"] is None


def test_an_import_of_part_of_a_grid_is_judged_against_the_catalog_grid_that_holds_it(lab, tmp_path):
    g = twin_truth(NANO, "lstm")                 # the 900-mode powertrain grid, in order
    part = tmp_path / "part.csv"
    part.write_text("\n".join(csv_text(g).splitlines()[:61]) + "\n")
    assert _json(lab, "profiles", "import", str(part))["rows"] == 60
    r = _cli(lab, "model", "train-reference", "--board-model", NANO, "--workload", "lstm", "--epochs", "2")
    assert r.exit_code == 7 and "60 of the 900 modes of imported profiles (orin-nano grid 'powertrain')" in r.output
    whole = tmp_path / "whole.csv"
    whole.write_text(csv_text(g))
    _json(lab, "profiles", "import", str(whole))
    ref = _json(lab, "model", "train-reference", "--board-model", NANO, "--workload", "lstm", "--epochs", "2")
    assert not ref["coverage"]["partial"] and ref["coverage"]["fitted_modes"] == 900
    assert "coverage complete" in _cli(lab, "model", "show", ref["model_id"]).output
