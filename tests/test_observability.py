"""Metrics against the real thing: the Debian prometheus server scrapes a lab of emulated boards
with the shipped config, and every PromQL expression of every shipped dashboard returns data."""

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from jetfleet.cli.main import cli
from jetfleet.controller.powertrain.evaluate import csv_text, twin_truth

from .harness import FAST_CONTROLLER, LabThread, free_port

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"


def need(tool: str) -> str:
    path = shutil.which(tool)
    if not path:
        pytest.skip(f"{tool} is not installed (make test installs the Debian prometheus package when run as root)")
    return path


def scrape(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


def panel_exprs() -> list[tuple[str, str]]:
    out = []
    for f in sorted((DEPLOY / "grafana/dashboards").glob("*.json")):
        for p in json.loads(f.read_text())["panels"]:
            for t in p["targets"]:
                out.append((f"{f.name}: {p['title']}", t["expr"].replace("$device", ".*")))
    return out


def test_shipped_prometheus_config_is_valid():
    out = subprocess.run([need("promtool"), "check", "config", str(DEPLOY / "prometheus/prometheus.yml")],
                         capture_output=True, text=True, cwd=DEPLOY / "prometheus")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "WARNING" not in out.stdout + out.stderr


@pytest.fixture(scope="module")
def observed_lab(tmp_path_factory):
    need("prometheus")
    tmp = tmp_path_factory.mktemp("prom")
    cport = free_port()
    lt = LabThread(str(tmp / "data"), ["agx-orin", "orin-nano", "orin-nano"],
                   config=replace(FAST_CONTROLLER, metrics_port=cport))
    lt.lab.agent_metrics = True
    lt.start()
    yield lt, cport, tmp
    lt.close()


def test_every_dashboard_query_returns_data_from_a_real_prometheus(observed_lab):
    lab, cport, tmp = observed_lab
    targets = tmp / "agents.json"
    r = CliRunner().invoke(cli, ["prometheus", "targets", "--out", str(targets), "--controller", lab.address])
    assert r.exit_code == 0, r.output
    groups = json.loads(targets.read_text())
    assert sum(len(g["targets"]) for g in groups) == 3 and {g["labels"]["board_model"] for g in groups} == {
        "agx-orin", "orin-nano"}
    config = yaml.safe_load((DEPLOY / "prometheus/prometheus.yml").read_text())
    config["global"]["scrape_interval"] = "1s"
    config["scrape_configs"][0]["static_configs"][0]["targets"] = [f"127.0.0.1:{cport}"]
    config["scrape_configs"][1]["file_sd_configs"][0]["files"] = [str(targets)]
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    pport = free_port()
    prom = subprocess.Popen([need("prometheus"), f"--config.file={tmp / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp / 'tsdb'}", f"--web.listen-address=127.0.0.1:{pport}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        api = f"http://127.0.0.1:{pport}/api/v1"

        def query(expr: str) -> list:
            url = f"{api}/query?" + urllib.parse.urlencode({"query": expr})
            body = json.loads(urllib.request.urlopen(url, timeout=10).read())
            assert body["status"] == "success", body
            return body["data"]["result"]

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if len(query("up == 1")) == 4:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        assert len(query("up == 1")) == 4
        # activity while Prometheus watches: modes, a campaign, models, an applied decision
        run = lambda *a: CliRunner().invoke(cli, [*a, "--controller", lab.address])  # noqa: E731
        ref = tmp / "ref.csv"
        ref.write_text(csv_text(twin_truth("orin-nano", "resnet18")))
        for args in (("mode", "set", "agx-orin-0", "30W"), ("profiles", "import", str(ref)),
                     ("model", "train-reference", "--board-model", "orin-nano", "--workload", "resnet18", "--epochs", "3"),
                     ("profile", "start", "--workload", "lstm", "--board-model", "orin-nano", "--modes", "random:12",
                      "--minibatches", "10", "--wait"),
                     ("model", "transfer", "--reference-board-model", "orin-nano", "--board-model", "orin-nano",
                      "--workload", "lstm"),
                     ("optimize", "orin-nano-1", "--workload", "lstm", "--min-energy", "--apply")):
            r = run(*args)
            assert r.exit_code == 0, (args, r.output)
        time.sleep(4)  # a few more scrapes
        empty = [(where, expr) for where, expr in panel_exprs() if not query(expr)]
        assert not empty, f"panels without data: {empty}"
    finally:
        prom.terminate()
        prom.wait(20)


def test_both_endpoints_pass_promtool_check_metrics(observed_lab):
    lab, cport, _ = observed_lab
    promtool = need("promtool")
    endpoints = [cport] + [a.metrics_port for a in lab.lab.agents]
    for port in endpoints:
        text = scrape(port)
        out = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
        assert out.returncode == 0 and not out.stdout.strip() and not out.stderr.strip(), (port, out.stdout, out.stderr)
    agent_text = scrape(lab.lab.agents[0].metrics_port)
    for name in ("jetfleet_agent_rail_power_watts{rail=\"VDD_GPU_SOC\"}", "jetfleet_agent_energy_joules_total",
                 "jetfleet_agent_frequency_hertz{clock=\"gpu\"}", "jetfleet_agent_power_mode_info{",
                 "jetfleet_agent_temperature_celsius", "jetfleet_agent_utilization_ratio"):
        assert name in agent_text, name
