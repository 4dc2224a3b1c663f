"""The fleet scheduler's pieces without a controller: the knapsack against brute force, placement and joint
modes, the aggregate loop's order, and the refusals."""

import math

import numpy as np
import pytest

from jetfleet.controller.fleet.knapsack import Option, exhaustive, solve
from jetfleet.controller.fleet.scheduler import Board, Candidates, FleetJob, FleetScheduler
from jetfleet.shared.errors import InvalidArgument


def test_the_knapsack_finds_the_brute_force_optimum_and_never_exceeds_the_budget():
    rng = np.random.default_rng(3)
    for _ in range(40):
        groups = [[Option(float(p), float(v)) for p, v in zip(rng.uniform(3, 30, n), rng.uniform(0, 1, n))]
                  for n in rng.integers(1, 6, rng.integers(1, 5))]
        budget = float(rng.uniform(5, 80))
        got, want = solve(groups, budget, resolution_w=0.01), exhaustive(groups, budget)
        if want is None:
            assert got is None
            continue
        assert got is not None
        picks, value = got
        assert sum(groups[i][j].power_w for i, j in enumerate(picks)) <= budget
        assert value == pytest.approx(sum(groups[i][j].value for i, j in enumerate(picks)))
        assert value >= want[1] - 0.02   # rounding power up to 0.01 W may cost a sliver, never the budget


def test_the_knapsack_refuses_what_cannot_fit():
    assert solve([[Option(10, 1)], [Option(10, 1)]], 19.9) is None
    assert solve([], 5.0) == ([], 0.0)
    assert solve([[Option(1, 1), Option(50, 2)]], math.inf) == ([1], 2.0)
    assert solve([[Option(1, 1)]], math.nan) is None


def cands(points):
    """Candidates from (time ms, power W) points, bounds 5% over the point prediction, by rising power."""
    t = np.array([p[0] for p in points], float)
    w = np.array([p[1] for p in points], float)
    return Candidates(tuple(f"m{i}" for i in range(len(points))), t, w, w * 1.05)


# a job's Pareto front on one board model: faster costs more power, with diminishing returns
FRONT = [(400, 8), (250, 12), (180, 17), (150, 23), (135, 30)]


def job(i, priority=1.0, model="orin", minibatches=1000):
    return FleetJob(f"j{i}", "resnet18", minibatches, {model: cands(FRONT)}, priority, arrival_s=i)


def boards(n, idle_w=5.0):
    return [Board(f"b{i}", "orin", idle_w) for i in range(n)]


def test_a_running_job_is_slowed_so_another_can_start_and_sped_up_when_it_ends():
    s = FleetScheduler(boards(2), 5.0 + 32.0)
    s.submit(job(0))
    first = s.schedule()
    assert [(c.job_id, c.mode) for c in first] == [("j0", "m4")]     # alone: its fastest mode fits
    s.submit(job(1))
    second = {c.job_id: c for c in s.schedule()}
    assert second["j1"].kind == "start" and second["j0"].kind == "rechoose" and "slowed" in second["j0"].reason
    assert s.predicted_sum_w() <= 37.0
    third = s.finish("j1")
    assert [(c.job_id, c.mode, c.kind) for c in third] == [("j0", "m4", "rechoose")]


def test_a_job_waits_until_the_cap_allows_and_priority_goes_first():
    s = FleetScheduler(boards(3), 15.0 + 8.4 * 2 + 1)   # room for two jobs at their lowest mode, not three
    for i in range(3):
        s.submit(job(i, priority=3.0 if i == 2 else 1.0))
    s.schedule()
    assert {j.job_id for j in s.running.values()} == {"j2", "j0"} and [j.job_id for j in s.queue] == ["j1"]


def test_over_the_cap_the_job_losing_least_throughput_per_watt_steps_down_first():
    s = FleetScheduler(boards(2), 60.0)
    s.submit(job(0, priority=4.0))
    s.submit(job(1, priority=1.0))
    s.schedule()
    lo = next(j for j in s.running.values() if j.job_id == "j1")
    before = lo.option
    over = s.observe({j.board: 36.0 for j in s.running.values()})   # 72 W measured: over the 60 W cap
    assert over and over[0].job_id == "j1" and all(c.kind == "over" for c in over) and lo.option < before
    assert s.predicted_sum_w() <= 60.0     # the steps taken bring the corrected prediction under the cap


def test_well_under_the_cap_the_most_deserving_job_steps_up_first():
    s = FleetScheduler(boards(2, idle_w=0.5), 33.0)
    s.submit(job(0, priority=2.0))
    s.submit(job(1, priority=1.0))
    s.schedule()
    assert len(s.running) == 2
    half = {bid: 0.5 * float(j.candidates["orin"].power_w[j.option]) for bid, j in s.running.items()}
    under = s.observe(half)     # the boards draw half what their models said
    # j0 (priority 2) runs high on its front, where a step buys little; j1's first step buys more per watt
    assert under and under[0].job_id == "j1" and {c.kind for c in under} == {"headroom"}
    assert s.predicted_sum_w() <= 33.0 * 0.99


def test_bad_input_is_refused_naming_the_idle_power_and_the_missing_model():
    with pytest.raises(InvalidArgument, match=r"below the idle power of its 3 boards \(15.0 W\)"):
        FleetScheduler(boards(3), 12.0)
    s = FleetScheduler(boards(1), 40.0)
    with pytest.raises(InvalidArgument, match="no board model here can run"):
        s.submit(job(0, model="agx-xavier"))
    assert not s.queue and s.cap_w == 40.0
