"""The fleet scheduler's pieces without a controller: the knapsack against brute force, placement and joint
modes, the aggregate loop's order, and the refusals."""

import math

import numpy as np
import pytest

from jetfleet.controller.fleet.knapsack import Option, exhaustive, solve, solve_arrays
from jetfleet.controller.fleet.placement import EXACT_PLACED
from jetfleet.controller.fleet.scheduler import Board, Candidates, FleetJob, FleetScheduler
from jetfleet.shared.errors import InvalidArgument


def random_groups(rng, jobs, most=5):
    return [[Option(float(p), float(v)) for p, v in zip(rng.uniform(3, 30, n), rng.uniform(0, 1, n))]
            for n in rng.integers(1, most + 1, jobs)]


@pytest.mark.parametrize("with_racks", [False, True])
def test_the_knapsack_finds_the_brute_force_optimum_and_never_exceeds_a_budget(with_racks):
    rng = np.random.default_rng(3)
    methods = set()
    for _ in range(300):
        groups = random_groups(rng, int(rng.integers(1, 6)))
        budget = float(rng.uniform(5, 80))
        racks, rack_w = None, []
        if with_racks:   # one or two racks; some jobs in none
            rack_w = [float(x) for x in rng.uniform(5, 50, int(rng.integers(1, 3)))]
            racks = [int(x) for x in rng.integers(-1, len(rack_w), len(groups))]
        got = solve(groups, budget, racks=racks, rack_budgets_w=rack_w, gap=0)
        want = exhaustive(groups, budget, racks=racks, rack_budgets_w=rack_w)
        if want is None:
            assert got is None
            continue
        assert got is not None
        methods.add(got.method)
        picks = got.picks
        assert sum(groups[i][j].power_w for i, j in enumerate(picks)) <= budget
        for r, cap in enumerate(rack_w):
            assert sum(groups[i][j].power_w for i, j in enumerate(picks) if racks[i] == r) <= cap
        assert got.value == pytest.approx(sum(groups[i][j].value for i, j in enumerate(picks)))
        assert got.value >= want[1] - 1e-9 and got.bound >= want[1] - 1e-9   # the optimum, and a true bound
    assert {"greedy", "search"} <= methods and (not with_racks or "folded" in methods)   # every way was checked


def test_the_knapsack_refuses_what_cannot_fit():
    assert solve([[Option(10, 1)], [Option(10, 1)]], 19.9) is None
    assert solve([[Option(10, 1)], [Option(10, 1)]], 30, racks=[0, 0], rack_budgets_w=[19.9]) is None
    empty = solve([], 5.0)
    assert empty is not None and (empty.picks, empty.value) == ([], 0.0)
    inf = solve([[Option(1, 1), Option(50, 2)]], math.inf)
    assert inf is not None and (inf.picks, inf.value) == ([1], 2.0)
    assert solve([[Option(1, 1)]], math.nan) is None
    assert solve([[]], 5.0) is None


@pytest.mark.parametrize("racks", [0, 4])
def test_at_a_thousand_jobs_the_first_pass_is_within_its_gap_of_a_proven_bound(racks):
    """Large instances are settled without a search, and the bound proves how close (the benchmark's 2,000 jobs
    in bench/scheduler.py; here 1,000 to stay quick)."""
    rng = np.random.default_rng(7)
    n, k = 1000, 10
    power = np.sort(rng.uniform(5, 60, (n, k)), axis=1)
    value = np.sort(rng.uniform(0.2, 1.0, (n, k)), axis=1) * rng.choice([1.0, 2.0], (n, 1))
    rack = rng.integers(0, racks, n) if racks else None
    rack_w = np.array([0.4 * power[rack == r].max(axis=1).sum() for r in range(racks)]) if racks else None
    got = solve_arrays(power, value, 0.5 * power.max(axis=1).sum(), racks=rack, rack_budgets_w=rack_w, gap=1e-4)
    assert got is not None and got.method != "search" and got.gap <= 1e-3   # 0.1 %: the bar
    taken = power[np.arange(n), got.picks]
    assert taken.sum() <= 0.5 * power.max(axis=1).sum()
    for r in range(racks):
        assert taken[rack == r].sum() <= rack_w[r]
        assert taken[rack == r].sum() >= 0.95 * rack_w[r]    # the racks bind: their caps are what is scheduled


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


def rack_boards():
    """Two boards in rack a, two in rack b, idle 5 W each."""
    return [Board(f"b{i}", "orin", 5.0, group="a" if i < 2 else "b") for i in range(4)]


def drawn(s, group):
    """What the scheduler reckons a rack draws: its jobs' checked power and its other boards' idle."""
    return s.predicted_sum_w(group)


def test_a_rack_cap_is_scheduled_its_jobs_share_it_and_the_others_are_not_held_back():
    # rack a's two jobs share 36 W (both at their middle mode: 2 x 17.85 W); the lab has room for all at their fastest
    s = FleetScheduler(rack_boards(), 500.0, group_caps_w={"a": 36.0})
    for i in range(4):
        s.submit(job(i))
    s.schedule()
    assert len(s.running) == 4
    modes = {bid: j.option for bid, j in s.running.items()}
    assert drawn(s, "a") <= 36.0 and drawn(s, None) <= 500.0
    assert modes["b0"] == modes["b1"] == 2              # held under rack a's cap
    assert modes["b2"] == modes["b3"] == 4             # rack b has no cap: its jobs run at their fastest


def test_a_rack_cap_below_a_jobs_lowest_mode_keeps_it_off_that_rack():
    s = FleetScheduler(rack_boards(), 500.0, group_caps_w={"a": 10.0 + 8.4 - 0.1})   # idle + lowest bound, not quite
    s.submit(job(0))
    s.schedule()
    assert [bid for bid in s.running] in (["b2"], ["b3"])


def test_over_a_rack_cap_only_that_racks_jobs_step_down():
    s = FleetScheduler(rack_boards(), 500.0, group_caps_w={"a": 36.0})
    for i in range(4):
        s.submit(job(i))
    s.schedule()
    before = {bid: j.option for bid, j in s.running.items()}
    # rack a's boards draw 20 W each (40 W: over its 36 W cap); rack b's what their models said
    seen = {bid: (20.0 if bid in ("b0", "b1") else float(j.candidates["orin"].power_w[j.option]))
            for bid, j in s.running.items()}
    over = s.observe(seen)
    assert over and {c.board for c in over} <= {"b0", "b1"} and all(c.kind == "over" for c in over)
    assert "rack a" in over[0].reason and "36 W cap" in over[0].reason
    assert s.running["b2"].option == before["b2"] and s.running["b3"].option == before["b3"]
    assert drawn(s, "a") <= 36.0


def test_headroom_steps_up_only_where_every_cap_over_a_job_has_room():
    s = FleetScheduler(rack_boards(), 80.0, group_caps_w={"a": 36.0})
    for i in range(4):
        s.submit(job(i))
    s.schedule()
    # every board draws 60 % of what its model says: the lab is well under its cap, and so is rack a
    seen = {bid: 0.6 * float(j.candidates["orin"].power_w[j.option]) for bid, j in s.running.items()}
    up = s.observe(seen)
    assert up and {c.kind for c in up} == {"headroom"} and any("rack a" in c.reason for c in up)
    assert drawn(s, None) <= 80.0 * 0.99 and drawn(s, "a") <= 36.0 * 0.99
    # rack a at its cap (its boards draw what it allows), the lab and rack b well under: only rack b's jobs step up
    for j in s.running.values():
        j.option = 1
    again = s.observe({"b0": 18.0, "b1": 18.0, "b2": 5.0, "b3": 5.0})
    assert again and {c.board for c in again} == {"b2", "b3"}


def test_rack_caps_are_refused_like_the_lab_cap():
    with pytest.raises(InvalidArgument, match="group 'z' matches no board"):
        FleetScheduler(rack_boards(), 100.0, group_caps_w={"z": 50.0})
    s = FleetScheduler(rack_boards(), 100.0)
    with pytest.raises(InvalidArgument, match=r"below the idle power of its 2 boards \(10.0 W\)"):
        s.set_cap(9.0, "a")
    assert s.group_caps_w == {}


def fleet(n_boards, n_jobs, exact_placed, share=0.3, seed=0):
    """A lab of three board models in four racks, each capped, the lab capped tighter than the racks together;
    jobs of five workloads (fronts drawn at random), a quarter at priority 2."""
    rng = np.random.default_rng(seed)
    scale = {"orin": 1.0, "xavier": 0.8, "nano": 0.25}
    fronts = []
    for _ in range(5):
        per = {}
        for m, k in scale.items():
            w = np.sort(rng.uniform(5, 60, 8)) * k
            t = 100 / (1 - np.exp(-w / rng.uniform(10, 30)))
            per[m] = Candidates(tuple(f"m{i}" for i in range(8)), t, w / 1.05, w)
        fronts.append(per)
    models = list(scale)
    bs = [Board(f"b{i}", models[i % 3], 1.0 + 2 * scale[models[i % 3]], group=f"r{i % 4}") for i in range(n_boards)]
    peak = sum(60 * scale[b.model] for b in bs)
    s = FleetScheduler(bs, share * peak, group_caps_w={f"r{g}": share * peak / 3 for g in range(4)},
                       exact_placed=exact_placed)
    for j in range(n_jobs):
        s.submit(FleetJob(f"j{j}", f"w{j % 5}", 1000, fronts[j % 5], 2.0 if j % 4 == 0 else 1.0, arrival_s=j))
    return s


@pytest.mark.parametrize("share", [0.3, 0.1])
def test_a_large_pass_judged_at_the_joint_choices_prices_keeps_every_cap_and_matches_exact_placement(share):
    """Past ``exact_placed`` jobs a placement is judged at the joint choice's prices (bench/scheduler.py times it
    at 2,000 jobs and 500 boards); on a lab small enough to judge every placement exactly, both agree (the same
    jobs start, their value within 0.5 %)."""
    values, started = [], []
    for exact_placed in (10**6, 8):
        s = fleet(48, 120, exact_placed, share)
        s.schedule()
        assert len(s.running) > 8
        assert s.predicted_sum_w() <= s.cap_w
        assert all(s.predicted_sum_w(g) <= cap for g, cap in s.group_caps_w.items())
        values.append(sum(float(s.value_of(j, j.model)[j.option]) for j in s.running.values()))
        started.append(len(s.running))
    assert values[1] == pytest.approx(values[0], rel=5e-3) and started[1] == started[0]


@pytest.mark.parametrize(("exact_placed", "cap_w"), [(EXACT_PLACED, 36.6), (0, 36.6), (EXACT_PLACED, 30.2), (0, 30.2)])
def test_a_job_worth_less_than_the_watts_it_takes_from_others_waits(exact_placed, cap_w):
    """Judged exactly or at the joint choice's prices, a job whose start would cost the running jobs more than it
    brings (a priority-10 job slowed for a priority-0.1 one) does not start. At 36.6 W the running job has its
    fastest mode and no cap binds (the prices are 0: the start is judged exactly); at 30.2 W the cap binds and its
    price alone refuses it."""
    s = FleetScheduler(boards(2), cap_w, exact_placed=exact_placed)
    s.submit(job(0, priority=10.0))
    s.schedule()
    alone = next(iter(s.running.values())).option
    assert alone == (4 if cap_w > 36 else 3)
    s.submit(job(1, priority=0.1))
    assert s.schedule() == [] and [j.job_id for j in s.queue] == ["j1"]
    assert next(iter(s.running.values())).option == alone
