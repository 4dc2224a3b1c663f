"""The fleet CLI (names and flags are a contract) against a lab on port 0."""

import json

import pytest
from click.testing import CliRunner

from jetfleet.cli.main import cli

from .harness import LabThread


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lt = LabThread(str(tmp_path_factory.mktemp("cli")), ["agx-orin", "orin-nano"]).start()
    yield lt
    lt.close()


def run(lab, *args, env=None):
    env = {"JETFLEET_CONTROLLER": lab.address, **(env or {})}
    return CliRunner().invoke(cli, list(args), env=env)


def test_devices_ls_json_gives_id_model_state_mode(lab):
    r = run(lab, "devices", "ls", "--output", "json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert [(x["device_id"], x["model"], x["online"]) for x in rows] == [("agx-orin-0", "agx-orin", True),
                                                                         ("orin-nano-1", "orin-nano", True)]
    assert rows[0]["current_mode"] == str(lab.lab.agents[0].board.read_mode())  # what the board runs now
    text = run(lab, "devices", "ls", "--controller", lab.address, env={"JETFLEET_CONTROLLER": "127.0.0.1:1"})
    assert text.exit_code == 0 and "agx-orin-0" in text.output and str(lab.lab.agents[0].board.read_mode()) in text.output


def test_mode_set_prints_the_confirmed_mode(lab):
    r = run(lab, "mode", "set", "orin-nano-1", "7W")
    assert r.exit_code == 0 and "orin-nano-1 confirms 4/960/408/2133" in r.output
    r = run(lab, "mode", "set", "orin-nano-1", "MAXN", "--output", "json")
    assert json.loads(r.stdout)["confirmed"] == "6/1510.4/624.75/2133"


def test_devices_show_and_telemetry_watch(lab):
    r = run(lab, "devices", "show", "agx-orin-0", "--output", "json")
    d = json.loads(r.stdout)
    assert d["catalog"]["modes"] == 18096 and "MAXN" in d["catalog"]["presets"]
    r = run(lab, "telemetry", "watch", "agx-orin-0", "--count", "3", "--output", "json")
    lines = [json.loads(x) for x in r.output.splitlines()]
    assert len(lines) == 3 and set(lines[0]["rails_w"]) == {"VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0",
                                                             "VDDQ_VDD2_1V8AO"}
    r = run(lab, "telemetry", "watch", "agx-orin-0", "--count", "2")
    assert r.exit_code == 0 and r.output.count("total") == 2


@pytest.mark.parametrize("args,needle,code", [
    (("mode", "set", "agx-orin-0", "12/2201.6/1300.5/3000"), "mem_mhz=3000", 3),
    (("mode", "set", "ghost", "MAXN"), "unknown device 'ghost'", 4),
    (("devices", "show", "ghost"), "unknown device 'ghost'", 4),
    (("telemetry", "watch", "ghost", "--count", "1"), "unknown device 'ghost'", 4),
])
def test_bad_input_exits_with_its_code_and_a_clear_error(lab, args, needle, code):
    r = run(lab, *args)
    assert r.exit_code == code and needle in r.output


def test_unreachable_controller_is_named():
    r = CliRunner().invoke(cli, ["devices", "ls", "--controller", "127.0.0.1:1"])
    assert r.exit_code == 5 and "controller 127.0.0.1:1 is unreachable" in r.output


def test_profile_commands_from_a_file_of_modes_to_export(lab, tmp_path):
    modes = tmp_path / "modes.txt"
    modes.write_text("# three modes\n12/2201.6/1300.5/3199\n15W\n2/268.8/114.75/204  # the slowest\n")
    r = run(lab, "profile", "start", "--workload", "lstm", "--device", "agx-orin-0", "--modes", str(modes),
            "--wait", "--output", "json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert (d["status"], d["done"], d["total"], d["modes"]) == ("done", 3, 3, "file:modes.txt")
    r = run(lab, "profile", "ls")
    assert d["campaign_id"] in r.output and "3/3" in r.output
    r = run(lab, "profile", "show", d["campaign_id"])
    assert "3/3 measured, 0 failed" in r.output
    out = tmp_path / "p.csv"
    r = run(lab, "profiles", "export", "--campaign", d["campaign_id"], "-o", str(out))
    assert r.exit_code == 0 and len(out.read_text().splitlines()) == 4
    r = run(lab, "profile", "pause", d["campaign_id"])
    assert r.exit_code == 7 and "is done; cannot pause" in r.output
    r = run(lab, "profile", "start", "--workload", "lstm", "--device", "agx-orin-0", "--modes", "no/such/file")
    assert r.exit_code == 3 and "no such file" in r.output
