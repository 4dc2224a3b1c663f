"""Calibrated bounds, the closed loop's model of a target, and the flag on an applied choice over its budget."""

import numpy as np
import pytest

from jetfleet.controller.jobs.goals import PowerBudget
from jetfleet.controller.powertrain.calibrate import Calibration, fit_calibrated
from jetfleet.controller.powertrain.feedback import WINDOW_NOISE_SD, Feedback, Observation, power_step
from jetfleet.controller.powertrain.optimize import Predictions, choose
from jetfleet.controller.powertrain.service import goal_check
from jetfleet.shared.catalog import PowerMode
from jetfleet.shared.errors import FailedPrecondition, InvalidArgument
from jetfleet.shared.proto import operator_pb2


def test_conformal_bounds_hold_for_their_share_of_fresh_errors():
    rng = np.random.default_rng(0)
    cal = Calibration.from_list(rng.normal(0, 0.1, 200).tolist())
    fresh = rng.normal(0, 0.1, 20_000)
    assert np.mean(fresh <= cal.upper_log(0.9)) == pytest.approx(0.9, abs=0.03)
    assert np.mean(fresh >= cal.lower_log(0.9)) == pytest.approx(0.9, abs=0.03)
    small = Calibration.from_list([0.01 * i for i in range(50)])
    assert small.max_confidence == pytest.approx(50 / 51)
    with pytest.raises(InvalidArgument, match=r"confidence 0.99 is out of range: 0.5..0.980"):
        small.upper_log(0.99)


def test_cross_validation_reports_held_out_error_not_the_fit():
    """A network that fits its k modes closely still has a much larger out-of-fold error on a rough target."""
    rng = np.random.default_rng(1)
    x = np.column_stack([rng.integers(1, 13, 40), rng.uniform(100, 2200, 40), rng.uniform(100, 1300, 40),
                         rng.choice([204, 2133, 3199], 40)]).astype(float)
    y = 10 + x[:, 1] / 100 + rng.lognormal(0, 0.15, 40)   # noise no model can learn
    c = fit_calibrated(None, x, y, epochs=200)
    assert c.cv_mape > c.fit_mape and c.calibration.n == 40
    assert c.calibration.upper_log(0.9) > 0 > c.calibration.lower_log(0.9)


def grid_predictions(power_bias: float = 1.0):
    modes = [PowerMode(c, f, g, 2133.0) for c in (2, 4, 6) for f in (500.0, 1000.0, 1500.0) for g in (300.0, 600.0)]
    x = np.array([m.as_tuple() for m in modes], float)
    power = 3 + x[:, 0] * 0.8 + x[:, 1] / 400 + x[:, 2] / 150     # grows with every knob
    time = 1e5 / (x[:, 1] * 0.5 + x[:, 2] * 2 + x[:, 0] * 40)
    return modes, time, power, Predictions(modes, time, power * power_bias).bounded(0.9, (-0.05, 0.05), (-0.03, 0.03))


def test_a_choice_uses_the_upper_bound_and_refuses_only_below_every_lower_bound():
    modes, time, power, pred = grid_predictions()
    c = choose(pred, power_budget_w=12)
    assert c.power_hi_w <= 12 and not c.at_risk and c.power_hi_w == pytest.approx(c.power_w * np.exp(0.03))
    point = choose(Predictions(modes, time, power), power_budget_w=11.3)
    assert choose(pred, power_budget_w=11.3).power_w < point.power_w <= 11.3   # the bound costs a margin
    lowest = float(np.min(pred.power_lo))
    risky = choose(pred, power_budget_w=lowest + 0.01)
    assert risky.at_risk
    with pytest.raises(FailedPrecondition, match=r"no mode can run under .* the lowest-power mode is 2/500/300/2133 at "
                                                 r"[0-9.]+ W \(bounds [0-9.]+-[0-9.]+ W at 90%\)"):
        choose(pred, power_budget_w=lowest - 0.01)


def test_the_loop_steps_down_from_a_mode_seen_over_budget_and_rules_out_the_hungrier_ones():
    modes, time, power, pred = grid_predictions(power_bias=0.85)        # the model thinks 15% too low
    fb = Feedback(pred)
    first = fb.choose(power_budget_w=12)
    assert power[first.index] > 12                                       # truly over
    over = PowerBudget(12).over   # the goal's one definition of over the budget
    step = power_step(fb, first.index, float(power[first.index]), float(time[first.index]), budget_w=12,
                      over=over(float(power[first.index])), steps_left=3)
    assert step is not None and "over the 12 W budget" in step.reason
    hungrier = np.all(fb.knobs >= fb.knobs[first.index], axis=1)
    assert not fb.allowed[hungrier].any() and step.choice.index not in np.flatnonzero(hungrier)
    corrected = fb.predictions()
    assert corrected.power_w[first.index] == pytest.approx(power[first.index], rel=0.02)   # learned where it looked
    current, steps = step.choice.index, 1
    while steps < 3:   # the rest of the loop: each window of the truth corrects the model where the board ran
        nxt = power_step(fb, current, float(power[current]), float(time[current]), budget_w=12,
                         over=over(float(power[current])), steps_left=3 - steps)
        if nxt is None:
            break
        current, steps = nxt.choice.index, steps + 1
    assert power[current] <= 12.12


def test_the_last_correction_goes_to_a_mode_the_board_showed_within_the_budget():
    """With steps to spare an over-budget window steps to the fastest mode whose corrected bound fits; the job's last
    step has no correction after it, so it goes to the fastest mode measured within the budget instead."""
    _, time, power, pred = grid_predictions(power_bias=0.85)        # the model thinks 15% too low

    def step(steps_left: int, within: bool = True):
        fb = Feedback(pred)
        if within:
            fb.observe(Observation(0, float(power[0]), float(time[0])))   # the board showed mode 0 within 12 W
        fb.observe(Observation(6, 12.5, float(time[6])), over_budget=True)   # and mode 6 over it: ruled out
        first = fb.choose(power_budget_w=12)
        assert power[first.index] > 12                                # truly over
        return power_step(fb, first.index, float(power[first.index]), float(time[first.index]), budget_w=12,
                          over=True, steps_left=steps_left)

    spare, last = step(2), step(1)
    assert spare is not None and spare.kind == "over" and spare.choice.index not in (0, 6)   # the prediction's pick
    assert last is not None and last.kind == "over" and last.choice.index == 0, last
    assert "the last step goes to the fastest mode measured within it" in last.reason
    nothing = step(1, within=False)                          # nothing measured within the budget: the prediction's
    assert nothing is not None and nothing.choice.index not in (0, 6) and "measured" not in nothing.reason, nothing


def test_the_mode_measured_within_the_budget_is_the_fastest_allowed_by_precision_weighted_means():
    _, time, power, pred = grid_predictions()
    fb = Feedback(pred)
    for i in (0, 2, 4):                                   # 107.5, 84.7, 69.9 ms; 7.85, 9.1, 10.35 W: all within 12 W
        fb.observe(Observation(i, float(power[i]), float(time[i])))
    fb.observe(Observation(5, 12.05, float(time[5])))     # 49.3 ms but over 12 W (within the sensors' 1%: not enough)
    fb.observe(Observation(3, 12.3, float(time[3])))      # 56.2 ms: a full window over 12 W ...
    fb.observe(Observation(3, 11.0, float(time[3]), seconds=0.5))   # ... then a short profile under it (weight 1/20)
    assert fb.measured_within(12) == 4                    # not 3: its plain mean (11.65 W) would be within
    assert fb.measured_within(12.5) == 5
    fb.rule_out(4)                                        # undone: never a landing again
    assert fb.measured_within(12) == 2
    assert fb.measured_within(7) is None


def test_repeated_windows_of_one_mode_do_not_grow_the_loops_model():
    _, time, power, pred = grid_predictions()
    fb = Feedback(pred)
    for _ in range(500):
        fb.observe(Observation(3, float(power[3]), float(time[3])))
    assert fb._power.idx == [3] and fb._power.precision == [pytest.approx(500 / WINDOW_NOISE_SD ** 2)]


def test_a_measurement_shorter_than_a_window_is_trusted_less_than_a_window():
    """A confirmation of a few dozen steps (0.07 board s) is noisier than a 10 s window: the loop's model moves
    less toward it and keeps a wider bound at its mode, so a mode committed on it is not promised to within ~3%."""
    _, time, power, pred = grid_predictions()
    window, short = Feedback(pred), Feedback(pred)
    window.observe(Observation(3, float(power[3]), float(time[3]) * 1.5))
    short.observe(Observation(3, float(power[3]), float(time[3]) * 1.5, seconds=0.07))
    w, s = window.predictions(), short.predictions()
    assert w.time_ms[3] == pytest.approx(time[3] * 1.5, rel=0.03)         # a window: the measurement, nearly
    assert pred.time_ms[3] < s.time_ms[3] < w.time_ms[3]                  # a short one: moved toward it, less
    assert (s.time_hi[3] / s.time_ms[3]) > 2 * (w.time_hi[3] / w.time_ms[3] - 1) + 1   # and a wider bound
    assert Observation(3, 1.0, 1.0, seconds=20.0).noise_var == WINDOW_NOISE_SD ** 2        # never below a window's


def test_an_applied_choice_over_its_budget_is_flagged():
    req = operator_pb2.OptimizeRequest(power_budget_w=30)
    assert goal_check(req, 250.0, 31.92) == (True, "OVER BUDGET: observed 31.92 W, 1.92 W over the 30 W budget")
    assert goal_check(req, 250.0, 30.2) == (False, "")       # within the sensors' 1%
    late = operator_pb2.OptimizeRequest(deadline_s=10, minibatches_per_epoch=100)
    assert goal_check(late, 120.0, 20.0)[0] and not goal_check(late, 90.0, 20.0)[0]
