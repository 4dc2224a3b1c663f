"""Metrics against the real thing: the Debian prometheus server scrapes a lab of emulated boards
with the shipped config, and every PromQL expression of every shipped dashboard returns data."""

import json
import re
import shutil
import sys
import time
import urllib.parse
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from jetfleet.cli.main import cli
from jetfleet.research.powertrain.evaluate import csv_text, twin_truth

from . import procs
from .harness import FAST_CONTROLLER, LabThread, free_port, wait_until

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"


def need(tool: str) -> str:
    path = shutil.which(tool)
    if not path:
        pytest.skip(f"{tool} is not installed (make test installs the Debian prometheus package when run as root)")
    return path


def scrape(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


def panel_exprs(device: str = ".*") -> list[tuple[str, str]]:
    out = []
    for f in sorted((DEPLOY / "grafana/dashboards").glob("*.json")):
        for p in json.loads(f.read_text())["panels"]:
            for t in p["targets"]:
                expr = t["expr"].replace("$device", device).replace("$board_model", ".*").replace("$rack", ".*")
                out.append((f"{f.name}: {p['title']}", expr))
    return out


def test_every_panel_of_the_board_dashboard_filters_by_the_chosen_board():
    board = json.loads((DEPLOY / "grafana/dashboards/board.json").read_text())
    exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]
    assert len(exprs) >= 10 and all('device=~"$device"' in e for e in exprs), exprs
    device = next(v for v in board["templating"]["list"] if v["name"] == "device")
    assert device["query"] == 'label_values(jetfleet_board_online{board_model=~"$board_model"}, device)'


def datasource_refs(o: object) -> list:
    """Every ``datasource`` value in a dashboard's JSON, however deep."""
    if isinstance(o, dict):
        return [v for k, v in o.items() if k == "datasource"] + [r for k, v in o.items() if k != "datasource"
                                                                  for r in datasource_refs(v)]
    if isinstance(o, list):
        return [r for x in o for r in datasource_refs(x)]
    return []


def test_every_dashboard_imports_into_any_grafana():
    """No datasource uid of ours: a datasource variable (and __inputs for the import dialog) picks the operator's
    Prometheus; the fleet dashboard filters by board model and rack, the board dashboard by board model."""
    for f in sorted((DEPLOY / "grafana/dashboards").glob("*.json")):
        text = f.read_text()
        d = json.loads(text)
        assert "jetfleet-prometheus" not in text, f.name
        assert [i["name"] for i in d["__inputs"]] == ["DS_PROMETHEUS"] and d["id"] is None, f.name
        names = [v["name"] for v in d["templating"]["list"]]
        assert names[0] == "datasource" and d["templating"]["list"][0]["type"] == "datasource", f.name
        refs = datasource_refs(d["panels"]) + datasource_refs([v for v in d["templating"]["list"]
                                                                if v["type"] != "datasource"])
        assert refs and all(r == {"type": "prometheus", "uid": "${datasource}"} for r in refs), (f.name, refs)
        if f.name == "fleet.json":
            assert {"board_model", "rack"} <= set(names)
            exprs = [t["expr"] for p in d["panels"] for t in p["targets"]]
            assert all("$rack" in e for e in exprs if "jetfleet_board_power_watts" in e or "jetfleet_board_online" in e)
        if f.name == "board.json":
            assert "board_model" in names


def test_shipped_alert_rules_pass_promtool_check_and_their_unit_tests():
    promtool = need("promtool")
    for args in (["check", "rules", "alerts.yml"], ["test", "rules", "alerts.test.yml"]):
        out = procs.run([promtool, *args], cwd=DEPLOY / "prometheus")
        assert out.returncode == 0 and "SUCCESS" in out.stdout, out.stdout + out.stderr
    rules = yaml.safe_load((DEPLOY / "prometheus/alerts.yml").read_text())
    names = {r["alert"] for g in rules["groups"] for r in g["rules"]}
    assert {"JetfleetBoardOffline", "JetfleetJobOverBudget", "JetfleetCampaignStalled", "JetfleetJobStalled",
            "JetfleetTelemetryDropped", "JetfleetTelemetryStopped", "JetfleetPredictionErrorLarge"} <= names
    tested = {t["alertname"] for case in yaml.safe_load((DEPLOY / "prometheus/alerts.test.yml").read_text())["tests"]
              for t in case["alert_rule_test"]}
    assert names <= tested, f"rules without a unit test: {names - tested}"


def test_shipped_prometheus_config_is_valid():
    out = procs.run([need("promtool"), "check", "config", str(DEPLOY / "prometheus/prometheus.yml")],
                    cwd=DEPLOY / "prometheus")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "WARNING" not in out.stdout + out.stderr


@pytest.fixture(scope="module")
def observed_lab(tmp_path_factory):
    need("prometheus")
    tmp = tmp_path_factory.mktemp("prom")
    lt = LabThread(str(tmp / "data"), ["agx-orin", "orin-nano", "orin-nano"],
                   config=replace(FAST_CONTROLLER, metrics_port=0))  # port 0: the controller reports the one it got
    lt.lab.agent_metrics = True
    lt.start()
    yield lt, lt.lab.controller.metrics_port, tmp
    lt.close()


def start_prometheus(config: Path, tsdb: Path) -> tuple[procs.Child, int]:
    """Prometheus cannot report a port it chose, so it gets a free one, and another if that was taken meanwhile."""
    for _ in range(10):
        port = free_port()
        prom = procs.spawn([need("prometheus"), f"--config.file={config}", f"--storage.tsdb.path={tsdb}",
                            f"--web.listen-address=127.0.0.1:{port}"], stdout=procs.DEVNULL, stderr=procs.DEVNULL)

        def ready(port: int = port, prom: procs.Child = prom) -> bool:
            try:
                return urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2).status == 200
            except OSError:
                return prom.poll() is not None  # it exited: the port was taken

        wait_until(ready, 60, "prometheus to start")
        if prom.poll() is None:
            return prom, port
    raise RuntimeError("prometheus did not start")


def prometheus_config(tmp: Path, controller_metrics_port: int, rule_for: dict[str, str] | None = None) -> Path:
    """The shipped prometheus.yml and alerts.yml in ``tmp``, scraping the test's controller every second and
    evaluating the rules every second; ``rule_for`` shortens the named alerts' `for`."""
    config = yaml.safe_load((DEPLOY / "prometheus/prometheus.yml").read_text())
    config["global"].update(scrape_interval="1s", evaluation_interval="1s")
    config["scrape_configs"][0]["static_configs"][0]["targets"] = [f"127.0.0.1:{controller_metrics_port}"]
    config["scrape_configs"][1]["http_sd_configs"][0].update(url=f"http://127.0.0.1:{controller_metrics_port}/sd/agents",
                                                             refresh_interval="1s")
    rules = yaml.safe_load((DEPLOY / "prometheus/alerts.yml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule["alert"] in (rule_for or {}):
                rule["for"] = rule_for[rule["alert"]]  # type: ignore[index]
    assert config["rule_files"] == ["alerts.yml"]
    (tmp / "alerts.yml").write_text(yaml.safe_dump(rules))
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    return tmp / "prometheus.yml"


class Api:
    """Prometheus's HTTP API: instant queries, range queries over the last minutes, alerts."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}/api/v1"

    def get(self, path: str, **params: object) -> object:
        url = f"{self.base}/{path}" + ("?" + urllib.parse.urlencode(params) if params else "")
        body = json.loads(urllib.request.urlopen(url, timeout=10).read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list:
        return self.get("query", query=expr)["result"]  # type: ignore[index]

    def query_range(self, expr: str, minutes: float = 5) -> list:
        """What a panel shows: the expression over the last ``minutes`` at 1 s steps."""
        now = time.time()
        return self.get("query_range", query=expr, start=now - 60 * minutes, end=now, step=1)["result"]  # type: ignore[index]

    def alerts(self, name: str, state: str = "firing") -> list[dict]:
        return [a for a in self.get("alerts")["alerts"]  # type: ignore[index]
                if a["labels"]["alertname"] == name and a["state"] == state]


def test_every_dashboard_query_returns_data_from_a_real_prometheus(observed_lab):
    lab, cport, tmp = observed_lab
    targets = tmp / "agents.json"
    r = CliRunner().invoke(cli, ["prometheus", "targets", "--out", str(targets), "--controller", lab.address])
    assert r.exit_code == 0, r.output
    groups = json.loads(targets.read_text())
    assert sum(len(g["targets"]) for g in groups) == 3 and {g["labels"]["board_model"] for g in groups} == {
        "agx-orin", "orin-nano"}
    prom, pport = start_prometheus(prometheus_config(tmp, cport), tmp / "tsdb")
    try:
        api = Api(pport)
        query = api.query

        def all_up() -> bool:
            try:
                return len(query("up == 1")) == 4
            except OSError:
                return False

        wait_until(all_up, 60, "prometheus to scrape the controller and the three agents")
        # activity while Prometheus watches: modes, a campaign, models, an applied decision
        lab.wait(lambda: all(lab.online(a.device_id) for a in lab.lab.agents), 10, "every board online")
        run = lambda *a: CliRunner().invoke(cli, [*a, "--controller", lab.address])  # noqa: E731
        ref = tmp / "ref.csv"
        ref.write_text(csv_text(twin_truth("orin-nano", "resnet18")))
        for args in (("mode", "set", "agx-orin-0", "30W"), ("devices", "label", "agx-orin-0", "rack=rack-a"),
                     ("fleet", "cap", "set", "500W"), ("profiles", "import", str(ref)),
                     ("model", "train-reference", "--board-model", "orin-nano", "--workload", "resnet18", "--epochs", "3"),
                     ("profile", "start", "--workload", "lstm", "--board-model", "orin-nano", "--modes", "random:12",
                      "--minibatches", "10", "--wait"),
                     ("model", "transfer", "--reference-board-model", "orin-nano", "--board-model", "orin-nano",
                      "--workload", "lstm"),
                     ("optimize", "orin-nano-1", "--workload", "lstm", "--min-energy", "--apply")):
            r = run(*args)
            assert r.exit_code == 0, (args, r.output)
        # a running job's power series live only while it runs: a long one, seen by Prometheus, then cancelled
        # (serving an inference stream beside it: the stream's latency histogram and request counters, issue 15)
        r = run("job", "submit", "--workload", "lstm", "--device", "orin-nano-1", "--power-budget", "14W",
                "--minibatches", "10000000", "--window", "2", "--with-inference", "mobilenet_v3", "--arrival-rate", "5",
                "--latency-budget", "2s", "--output", "json")
        assert r.exit_code == 0, r.output
        job_id = json.loads(r.stdout)["job_id"]   # (stdout: the note on stderr is for people)
        wait_until(lambda: len(query(f'{{__name__=~"jetfleet_job_power(_budget)?_watts",job_id="{job_id}"}}')) == 2, 60,
                   "the running job's power and budget in prometheus")
        wait_until(lambda: query(f'sum(rate(jetfleet_inference_requests_total{{job_id="{job_id}"}}[1m])) > 0') and query(
            f'histogram_quantile(0.5, sum by (le) (rate(jetfleet_inference_latency_seconds_bucket{{job_id="{job_id}"}}[1m])))'
            ' >= 0'), 60, "the job's served requests and their latency as the panels show them, in prometheus")
        assert run("job", "cancel", job_id).exit_code == 0
        wait_until(lambda: not query(f'{{__name__=~"jetfleet_job_.*|jetfleet_inference_.*",job_id="{job_id}"}}'), 30,
                   "every series of the cancelled job to go")   # power, budget, progress, inference (issue 29)
        # discovery labels every agent's series with its device, board model and rack (http_sd, issue 29)
        # (waited on: a board that missed its heartbeats on this loaded machine leaves discovery until it dials in again)
        expected = {(a.device_id, a.board.catalog.model, "rack-a" if a.device_id == "agx-orin-0" else None)
                    for a in lab.lab.agents}

        def discovered() -> set[tuple[str, str, str | None]]:
            return {(s["metric"]["device"], s["metric"]["board_model"], s["metric"].get("rack"))
                    for s in query('up{job="jetfleet-agents"}')}

        try:
            wait_until(lambda: discovered() == expected, 30, "every agent's series labelled by discovery")
        except AssertionError:
            raise AssertionError(f"discovered {sorted(discovered(), key=str)}, expected {sorted(expected, key=str)}") from None

        def empty(device: str = ".*") -> list[tuple[str, str]]:   # panels with no data over the last 5 minutes
            return [(where, expr) for where, expr in panel_exprs(device) if not api.query_range(expr)]

        try:  # until the scrapes after the activity have landed
            wait_until(lambda: not empty(), 30, "every panel to have data")
        except AssertionError:
            raise AssertionError(f"panels without data: {empty()}") from None
        # the board dashboard for one board: every panel has data, and only that board's
        for where, expr in panel_exprs("orin-nano-1"):
            if where.startswith("board.json"):
                series = api.query_range(expr)
                assert series and {s["metric"]["device"] for s in series} == {"orin-nano-1"}, (where, series)
    finally:
        prom.terminate()
        prom.wait(20)


def test_both_endpoints_pass_promtool_check_metrics(observed_lab):
    lab, cport, _ = observed_lab
    promtool = need("promtool")
    endpoints = [cport] + [a.metrics_port for a in lab.lab.agents]
    for port in endpoints:
        text = scrape(port)
        out = procs.run([promtool, "check", "metrics"], input=text)
        assert out.returncode == 0 and not out.stdout.strip() and not out.stderr.strip(), (port, out.stdout, out.stderr)
    agent = lab.lab.agents[0]
    agent_text = scrape(agent.metrics_port)
    for name in ('jetfleet_agent_rail_power_watts{device="agx-orin-0",rail="VDD_GPU_SOC"}',
                 'jetfleet_agent_energy_joules_total{device="agx-orin-0"}',
                 'jetfleet_agent_frequency_hertz{clock="gpu",device="agx-orin-0"}', "jetfleet_agent_power_mode_info{",
                 "jetfleet_agent_temperature_celsius", "jetfleet_agent_utilization_ratio"):
        assert name in agent_text, name
    samples = [ln for ln in agent_text.splitlines() if ln.startswith("jetfleet_agent_")]
    assert samples and all(f'device="{agent.device_id}"' in ln for ln in samples), [
        ln for ln in samples if f'device="{agent.device_id}"' not in ln]
    # every metric an alert rule reads is one the controller or the agents export (by its HELP line)
    helps = {ln.split()[2] for port in endpoints for ln in scrape(port).splitlines() if ln.startswith("# HELP ")}
    rules = (DEPLOY / "prometheus/alerts.yml").read_text()
    read = set(re.findall(r"\b(jetfleet_[a-z_]+)", rules))
    assert read and read <= helps, read - helps


def test_a_killed_agent_leaves_fleet_power_and_its_board_offline_alert_fires_in_a_real_prometheus(tmp_path):
    """A real agent process is SIGKILLed: its relayed power disappears from the controller and from Prometheus
    (fleet power counts the live board only), its board reads offline, and the shipped JetfleetBoardOffline
    rule (its `for` shortened to 2 s) goes pending, then firing, for that board alone."""
    need("prometheus")
    lt = LabThread(str(tmp_path / "data"), ["agx-orin"], config=replace(FAST_CONTROLLER, metrics_port=0))
    lt.lab.agent_metrics = True
    lt.start()
    agent = procs.spawn([sys.executable, "-m", "jetfleet.cli", "agent", "run", "--controller", lt.address,
                         "--device", "emulated:orin-nano:3", "--speed", "inf", "--id", "nano-doomed",
                         "--metrics-port", "0", "--metrics-address", "127.0.0.1"], stdout=procs.DEVNULL, stderr=procs.DEVNULL)
    prom = None
    try:
        cport = lt.lab.controller.metrics_port
        lt.wait(lambda: lt.online("nano-doomed"), 30, "the agent process to come online")
        prom, pport = start_prometheus(prometheus_config(tmp_path, cport, {"JetfleetBoardOffline": "2s"}),
                                       tmp_path / "tsdb")
        api = Api(pport)

        def fleet() -> dict[str, float]:
            try:
                return {r["metric"]["device"]: float(r["value"][1]) for r in api.query("jetfleet_board_power_watts")}
            except OSError:
                return {}

        wait_until(lambda: set(fleet()) == {"agx-orin-0", "nano-doomed"}, 60, "both boards' power in prometheus")
        wait_until(lambda: len(api.query('up{job="jetfleet-agents"} == 1')) == 2, 30, "both agents scraped")
        agent.kill()   # SIGKILL: no goodbye; the kernel closes its connections
        agent.wait(10)
        lt.wait(lambda: not lt.online("nano-doomed"), 10, "the board to go offline")
        text = scrape(cport)
        assert 'jetfleet_board_power_watts{board_model="orin-nano",device="nano-doomed"}' not in text
        assert 'jetfleet_board_online{board_model="orin-nano",device="nano-doomed"} 0.0' in text
        assert 'jetfleet_board_power_watts{board_model="agx-orin",device="agx-orin-0"}' in text
        wait_until(lambda: set(fleet()) == {"agx-orin-0"}, 30, "the dead board's power to leave prometheus")
        live = fleet()["agx-orin-0"]
        assert 0 < float(api.query("sum(jetfleet_board_power_watts)")[0]["value"][1]) < live + 25   # one board's worth
        wait_until(lambda: api.alerts("JetfleetBoardOffline", "pending") or api.alerts("JetfleetBoardOffline"), 30,
                   "the offline rule to match")
        wait_until(lambda: api.alerts("JetfleetBoardOffline"), 30, "JetfleetBoardOffline to fire")
        firing = api.alerts("JetfleetBoardOffline")
        assert [(a["labels"]["device"], a["labels"]["severity"]) for a in firing] == [("nano-doomed", "warning")]
        assert firing[0]["annotations"]["summary"] == "board nano-doomed (orin-nano) is offline"
        assert not api.alerts("JetfleetTelemetryStopped", "pending") and not api.alerts("JetfleetTelemetryStopped")
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait(10)
        if prom is not None:
            prom.terminate()
            prom.wait(20)
        lt.close()
