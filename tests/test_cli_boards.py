import json

from click.testing import CliRunner

from jetfleet.cli.main import cli


def run(*args):
    return CliRunner().invoke(cli, list(args))


def test_modes_lists_grids_as_text_and_json():
    r = run("modes", "agx-orin", "--grid", "powertrain", "--output", "json")
    assert r.exit_code == 0
    data = json.loads(r.stdout)
    assert data["count"] == 4368 and data["modes"][0]["mode"] == "2/268.8/114.75/204"
    r = run("modes", "agx-orin", "--grid", "presets")
    assert r.exit_code == 0 and "12/2201.6/1300.5/3199  MAXN" in r.output


def test_twin_measure_prints_time_power_energy():
    r = run("twin", "measure", "--board", "agx-orin", "--workload", "resnet18", "--mode", "MAXN",
            "--minibatches", "20", "--seed", "3", "--output", "json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["mode"] == "12/2201.6/1300.5/3199" and d["minibatches"] == 20
    assert 45 < d["minibatch_time_median_ms"] < 70 and 40 < d["power_mean_w"] < 65
    assert d["energy_per_minibatch_j"] == d["power_mean_w"] * d["minibatch_time_mean_ms"] / 1e3
    text = run("twin", "measure", "--board", "agx-orin", "--workload", "resnet18", "--mode", "MAXN")
    assert "J per minibatch" in text.output


def test_bad_inputs_exit_with_their_code_naming_the_problem():
    for args, needle in [(("modes", "tk1"), "unknown board model 'tk1'"),
                         (("modes", "agx-orin", "--grid", "half"), "grid 'half'"),
                         (("twin", "measure", "--board", "agx-orin", "--workload", "gpt5", "--mode", "MAXN"),
                          "unknown workload 'gpt5'"),
                         (("twin", "measure", "--board", "agx-orin", "--workload", "lstm", "--mode", "12/1/1/1"),
                          "cpu_mhz=1"),
                         (("twin", "measure", "--board", "agx-orin", "--workload", "lstm", "--mode", "MAXN",
                           "--minibatches", "0"), "'--minibatches': 0 is not in the range")]:
        r = run(*args)
        code = 2 if "not in the range" in needle else 4 if "unknown" in needle else 3   # usage, not found, invalid
        assert r.exit_code == code and needle in r.output, (args, r.output)
