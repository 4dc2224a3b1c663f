"""Issue 29: one rule for quantities (a budget without a unit is refused like a deadline) and one limit each,
shared by the CLI and the controller."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from jetfleet.cli.main import cli
from jetfleet.controller.powertrain.optimize import check_goal
from jetfleet.shared.errors import InvalidArgument
from jetfleet.shared.quantity import MAX_CAP_W, MAX_DEADLINE_S, MAX_POWER_BUDGET_W, parse_cap, parse_deadline, parse_power_budget

from .harness import LabThread

UNREACHABLE = "127.0.0.1:1"
SUBMIT = ("job", "submit", "--workload", "lstm", "--device", "orin-nano-0", "--minibatches", "100")


@pytest.mark.parametrize("args,needle", [
    ((*SUBMIT, "--power-budget", "30"), "'30' has no unit: write 30W"),
    ((*SUBMIT, "--deadline", "2"), "'2' has no unit: write 2s, 2m or 2h"),
    (("optimize", "orin-nano-0", "--workload", "lstm", "--power-budget", "12.5"), "'12.5' has no unit: write 12.5W"),
    (("fleet", "cap", "set", "200"), "'200' has no unit: write 200W"),
    ((*SUBMIT, "--power-budget", "30W", "--with-inference", "lstm", "--arrival-rate", "5", "--latency-budget", "50"),
     "'50' has no unit: write 50ms or 50s"),
    ((*SUBMIT, "--power-budget", "30 volts"), "is not a power like 30W"),
])
def test_a_number_without_its_unit_is_refused_for_every_quantity(args, needle):
    r = CliRunner().invoke(cli, [*args, "--controller", UNREACHABLE])
    assert r.exit_code == 3 and needle in r.output, r.output


def test_units_are_read_the_same_way_for_every_quantity():
    assert parse_power_budget("30W") == parse_power_budget("30 W") == parse_power_budget("30w") == 30.0
    assert parse_deadline("90m") == parse_deadline("1.5h") == 5400.0 and parse_cap("200W") == 200.0


@pytest.mark.parametrize("limit,parse,server", [
    (MAX_POWER_BUDGET_W, lambda v: parse_power_budget(f"{v!r}W"), lambda v: check_goal(v, None, False, 1)),
    (MAX_DEADLINE_S, lambda v: parse_deadline(f"{v!r}s"), lambda v: check_goal(None, v, False, 1)),
])
def test_the_cli_and_the_controller_share_each_limit(limit, parse, server):
    assert parse(limit) == limit
    server(limit)   # the controller takes what the CLI takes (it refused 10,000 W that the CLI allowed)
    above = limit * 1.0001
    for side in (parse, server):
        with pytest.raises(InvalidArgument, match=re.escape(f"at most {limit:g}")):
            side(above)


@pytest.fixture
def lab(tmp_path):
    lt = LabThread(str(tmp_path / "data"), ["orin-nano"]).start()
    yield lt
    lt.close()


def test_the_controller_refuses_what_the_cli_refuses_from_any_client(lab):
    from jetfleet.client import OperatorClient

    with OperatorClient(lab.address) as c:
        with pytest.raises(InvalidArgument) as e:
            c.submit_job("lstm", device_id="orin-nano-0", power_budget_w=MAX_POWER_BUDGET_W + 1, minibatches=100)
        assert e.value.field == "power_budget_w" and f"at most {MAX_POWER_BUDGET_W:g} W" in e.value.message
        with pytest.raises(InvalidArgument) as e:
            c.set_fleet_cap(MAX_CAP_W * 2)
        assert e.value.field == "cap_w" and f"at most {MAX_CAP_W:g} W" in e.value.message
    r = CliRunner().invoke(cli, ["fleet", "cap", "set", "2000000W", "--controller", lab.address])
    assert r.exit_code == 3 and "at most 1e+06 W" in r.output
