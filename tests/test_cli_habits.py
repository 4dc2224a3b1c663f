"""Habits operators bring: shell completion of device ids, workloads and board models; a config file for the
controller and the TLS files (flag > env > config file > default); every option from the environment
(JETFLEET_<COMMAND>_<OPTION>); --output json on eval and certs like the rest."""

import json
import os
import sys

import pytest
from click.shell_completion import ShellComplete
from click.testing import CliRunner

from jetfleet.cli.main import cli

from . import procs
from .harness import LabThread


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lt = LabThread(str(tmp_path_factory.mktemp("habits")), ["agx-orin", "orin-nano"]).start()
    yield lt
    lt.close()


def complete(args, incomplete):
    return [c.value for c in ShellComplete(cli, {}, "jetfleet", "_JETFLEET_COMPLETE").get_completions(args, incomplete)]


def test_device_ids_complete_from_the_controller(lab, monkeypatch):
    monkeypatch.setenv("JETFLEET_CONTROLLER", lab.address)
    assert complete(["devices", "show"], "") == ["agx-orin-0", "orin-nano-1"]
    assert complete(["mode", "set"], "orin") == ["orin-nano-1"]
    assert complete(["profile", "start", "--device"], "agx") == ["agx-orin-0"]
    monkeypatch.delenv("JETFLEET_CONTROLLER")
    assert complete(["telemetry", "watch", "--controller", lab.address], "a") == ["agx-orin-0"]   # the flag's controller


def test_workloads_and_board_models_complete_from_built_ins_and_the_boards(lab, monkeypatch):
    monkeypatch.setenv("JETFLEET_CONTROLLER", lab.address)
    assert complete(["profile", "start", "--workload"], "mob") == ["mobilenet_v3"]
    assert complete(["job", "submit", "--board-model"], "") == ["agx-orin", "agx-xavier", "nano", "orin-nano", "tx2",
                                                                "xavier-nx"]
    assert complete(["model", "train-reference", "--workload"], "") == ["bert_base", "lstm", "mobilenet_v3", "resnet18",
                                                                        "yolo_v8n"]


def test_without_a_controller_completion_offers_the_built_ins_and_no_error(monkeypatch):
    monkeypatch.setenv("JETFLEET_CONTROLLER", "127.0.0.1:1")
    assert complete(["devices", "show"], "") == []
    assert complete(["optimize", "--board-model"], "agx") == ["agx-orin", "agx-xavier"]


def test_the_shell_protocol_end_to_end(lab):
    """What bash runs on TAB: the program with _JETFLEET_COMPLETE=bash_complete and the words so far."""
    script = CliRunner().invoke(cli, ["completion", "bash"])
    assert script.exit_code == 0 and "_JETFLEET_COMPLETE=bash_complete" in script.output
    env = {**os.environ, "_JETFLEET_COMPLETE": "bash_complete", "COMP_WORDS": "jetfleet devices show ag",
           "COMP_CWORD": "3", "JETFLEET_CONTROLLER": lab.address}
    r = procs.run([sys.executable, "-c", "from jetfleet.cli.main import cli; cli(prog_name='jetfleet')"], env=env,
                  timeout=60)
    assert r.returncode == 0 and r.stdout.split() == ["plain,agx-orin-0"], r.stderr


def test_the_config_file_names_the_controller_below_env_and_flags(lab, tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'controller = "{lab.address}"\n')
    env = {"JETFLEET_CONFIG": str(cfg)}
    r = CliRunner().invoke(cli, ["devices", "ls", "--output", "json"], env=env)
    assert r.exit_code == 0 and len(json.loads(r.stdout)) == 2
    r = CliRunner().invoke(cli, ["devices", "ls"], env={**env, "JETFLEET_CONTROLLER": "127.0.0.1:1"})
    assert r.exit_code == 5 and "127.0.0.1:1 is unreachable" in r.stderr      # env beats the file
    r = CliRunner().invoke(cli, ["devices", "ls", "--controller", "127.0.0.1:1"], env=env)
    assert r.exit_code == 5                                                   # the flag beats the file
    r = CliRunner().invoke(cli, ["config", "show", "--output", "json"], env={"XDG_CONFIG_HOME": str(tmp_path / "x")})
    shown = json.loads(r.stdout)
    assert shown["config_file"] == str(tmp_path / "x" / "jetfleet" / "config.toml") and not shown["config_file_exists"]
    assert shown["settings"]["controller"] == {"value": "127.0.0.1:50051", "source": "default"}
    cfg.write_text('controler = "typo:1"\n')
    r = CliRunner().invoke(cli, ["devices", "ls"], env=env)
    assert r.exit_code == 3 and "unknown key 'controler'" in r.stderr


def test_every_option_comes_from_the_environment_too(lab):
    env = {"JETFLEET_CONTROLLER": lab.address, "JETFLEET_PROFILE_START_MINIBATCHES": "7", "JETFLEET_OUTPUT": "json"}
    r = CliRunner().invoke(cli, ["profile", "start", "--workload", "lstm", "--device", "orin-nano-1", "--modes",
                                 "presets"], env=env)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["minibatches"] == 7
    r = CliRunner().invoke(cli, ["devices", "ls"], env={**env, "JETFLEET_DEVICES_LS_MODEL": "agx-orin"})
    assert [d["device_id"] for d in json.loads(r.stdout)] == ["agx-orin-0"]
    r = CliRunner().invoke(cli, ["devices", "ls", "--model", "orin-nano"], env={**env, "JETFLEET_DEVICES_LS_MODEL": "x"})
    assert [d["device_id"] for d in json.loads(r.stdout)] == ["orin-nano-1"]   # the flag wins


def test_certs_speak_json(tmp_path):
    r = CliRunner().invoke(cli, ["certs", "init", "--dir", str(tmp_path), "--output", "json"])
    assert json.loads(r.stdout)["ca_cert"] == str(tmp_path / "ca.crt")
    r = CliRunner().invoke(cli, ["certs", "issue", "operator", "alice", "--dir", str(tmp_path), "--output", "json"])
    d = json.loads(r.stdout)
    assert (d["role"], d["cert"], d["key"]) == ("operator", str(tmp_path / "alice.crt"), str(tmp_path / "alice.key"))
    r = CliRunner().invoke(cli, ["certs", "init", "--dir", str(tmp_path), "--output", "json"])
    assert r.exit_code == 8 and json.loads(r.stderr)["error"]["code"] == "ALREADY_EXISTS"


def test_eval_speaks_json(tmp_path):
    from jetfleet.research.powertrain.evaluate import csv_text, twin_truth

    ref, tgt = tmp_path / "r.csv", tmp_path / "t.csv"
    ref.write_text(csv_text(twin_truth("orin-nano", "resnet18")))
    tgt.write_text(csv_text(twin_truth("orin-nano", "lstm")))
    r = CliRunner().invoke(cli, ["eval", "transfer", "--reference", str(ref), "--target", str(tgt), "--k", "9999",
                                 "--output", "json"])
    assert r.exit_code == 3 and json.loads(r.stderr)["error"]["field"] == "k"
    r = CliRunner().invoke(cli, ["eval", "powertrain", "--repeats", "0", "--output", "json"])
    assert r.exit_code == 3 and json.loads(r.stderr)["error"]["field"] == "repeats"
    r = CliRunner().invoke(cli, ["eval", "choices", "--max-steps", "11", "--output", "json"])
    assert r.exit_code == 3 and json.loads(r.stderr)["error"]["field"] == "max_steps"


@pytest.mark.slow
@pytest.mark.timeout(900)   # ~2 CPU minutes; far longer on a machine shared with other work
def test_the_quick_powertrain_evaluation_reports_in_json_with_its_steps(tmp_path):
    r = CliRunner().invoke(cli, ["eval", "powertrain", "--quick", "--repeats", "2", "--out", str(tmp_path), "--output",
                                 "json"])
    assert r.exit_code == 0, r.output
    steps = [json.loads(line)["progress"] for line in r.stderr.splitlines()]
    assert steps[0]["done"] == 1 and steps[-1]["done"] == steps[-1]["total"] and steps[-1]["note"] == "report written"
    d = json.loads(r.stdout)
    assert d["report"] == str(tmp_path / "report.md") and d["quick"] and str(tmp_path / "mape_vs_k.png") in d["plots"]
    assert "Choosing a mode: fastest under a power budget" in (tmp_path / "report.md").read_text()
