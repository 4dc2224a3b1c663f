"""Metrics endpoints that bind where asked, with HTTPS and basic auth; Prometheus finds the agents through the
controller's http_sd endpoint, against a controller that speaks mutual TLS (a real Prometheus)."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import socket
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import replace

import pytest
import yaml
from prometheus_client import CollectorRegistry, Counter

from jetfleet.agent.link import AgentLink
from jetfleet.agent.metrics import AgentMetrics
from jetfleet.controller.config import ControllerConfig
from jetfleet.controller.server import Controller
from jetfleet.shared.errors import InvalidArgument, NotFound
from jetfleet.shared.metrics_http import MetricsHttpConfig, MetricsServer
from jetfleet.shared.tls import init_ca, issue
from jetfleet.twin.board import EmulatedBoard

from . import procs
from .harness import FAST_AGENT, FAST_CONTROLLER, free_port, wait_until


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    init_ca(d)
    issue(d, "controller", "ctl")
    for a in ("orin-a", "nano-b"):
        issue(d, "agent", a, sans=["127.0.0.1"])
    auth = d / "metrics-auth"
    auth.write_text("prometheus:s3cret-Pa55\n")
    auth.chmod(0o600)
    return d


def registry():
    r = CollectorRegistry()
    Counter("jetfleet_probe", "a probe", registry=r).inc()
    return r


def get(url, *, ca=None, user=None, password=None):
    req = urllib.request.Request(url)
    if user:
        req.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
    ctx = ssl.create_default_context(cafile=str(ca)) if ca else None
    with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
        return r.status, r.read().decode()


def test_metrics_bind_where_asked_and_only_there():
    s = MetricsServer(registry(), MetricsHttpConfig(address="127.0.0.2", port=0)).start()
    try:
        status, body = get(f"http://127.0.0.2:{s.port}/metrics")
        assert status == 200 and "jetfleet_probe_total 1.0" in body
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", s.port), timeout=2).close()
        with pytest.raises(urllib.error.HTTPError) as e:
            get(f"http://127.0.0.2:{s.port}/other")
        assert e.value.code == 404
    finally:
        s.stop()


def test_https_and_basic_auth(pki):
    cfg = MetricsHttpConfig(address="127.0.0.1", tls_cert=str(pki / "ctl.crt"), tls_key=str(pki / "ctl.key"),
                            auth_file=str(pki / "metrics-auth"))
    s = MetricsServer(registry(), cfg).start()
    try:
        assert s.url == f"https://127.0.0.1:{s.port}/metrics"
        status, body = get(s.url, ca=pki / "ca.crt", user="prometheus", password="s3cret-Pa55")
        assert status == 200 and "jetfleet_probe_total" in body
        for user, password in ((None, None), ("prometheus", "wrong"), ("other", "s3cret-Pa55")):
            with pytest.raises(urllib.error.HTTPError) as e:
                get(s.url, ca=pki / "ca.crt", user=user, password=password)
            assert e.value.code == 401 and "jetfleet_probe" not in e.value.read().decode()
        with pytest.raises(OSError):   # plaintext to the HTTPS port gets nothing
            get(f"http://127.0.0.1:{s.port}/metrics")
        silent = socket.create_connection(("127.0.0.1", s.port))   # a client that never handshakes ...
        try:
            assert get(s.url, ca=pki / "ca.crt", user="prometheus", password="s3cret-Pa55")[0] == 200  # ... stalls no one
        finally:
            silent.close()
    finally:
        s.stop()


def test_bad_metrics_options_are_refused_by_name(pki, tmp_path):
    with pytest.raises(InvalidArgument, match="needs both a certificate and its key"):
        MetricsHttpConfig(tls_cert=str(pki / "ctl.crt")).check()
    with pytest.raises(NotFound, match="does not exist"):
        MetricsHttpConfig(auth_file=str(tmp_path / "nope")).check()
    bad = tmp_path / "auth"
    bad.write_text("no-colon-here\n")
    with pytest.raises(InvalidArgument, match="must hold one line USER:PASSWORD") as e:
        MetricsHttpConfig(auth_file=str(bad)).check()
    assert e.value.field == "metrics_auth_file"
    with pytest.raises(InvalidArgument, match="metrics port 70000"):
        MetricsHttpConfig(port=70000).check()
    with pytest.raises(InvalidArgument, match="metrics address 'a b'"):
        MetricsHttpConfig(address="a b").check()


class LoopThread:
    """An event loop on its own thread, for a controller and agents the test drives with blocking clients."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def call(self, coro, timeout_s=30.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def close(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def test_prometheus_finds_the_agents_through_http_sd_of_a_tls_controller(pki, tmp_path):
    prometheus = shutil.which("prometheus")
    if not prometheus:
        pytest.skip("prometheus is not installed (make test installs the Debian package when run as root)")
    auth = dict(tls_cert=str(pki / "ctl.crt"), tls_key=str(pki / "ctl.key"), auth_file=str(pki / "metrics-auth"))
    ctl = Controller(replace(FAST_CONTROLLER, store=str(tmp_path / "data"), tls_cert=auth["tls_cert"],
                             tls_key=auth["tls_key"], tls_ca=str(pki / "ca.crt"), metrics_port=0,
                             metrics_tls_cert=auth["tls_cert"], metrics_tls_key=auth["tls_key"],
                             metrics_auth_file=auth["auth_file"]))
    lt = LoopThread()
    servers, stop = [], None
    try:
        port = lt.call(ctl.start())
        assert ctl.tls and ctl.metrics_url == f"https://127.0.0.1:{ctl.metrics_port}/metrics"
        stop = asyncio.Event()  # bound to the loop thread at first use
        for name, model in (("orin-a", "agx-orin"), ("nano-b", "orin-nano")):
            board = EmulatedBoard(model, 1)
            metrics = AgentMetrics(board.catalog, name)
            srv = MetricsServer(metrics.registry, MetricsHttpConfig(tls_cert=str(pki / f"{name}.crt"),
                                                                    tls_key=str(pki / f"{name}.key"),
                                                                    auth_file=auth["auth_file"])).start()
            servers.append(srv)
            cfg = replace(FAST_AGENT, controller=f"127.0.0.1:{port}", device_id=name, tls_ca=str(pki / "ca.crt"),
                          tls_cert=str(pki / f"{name}.crt"), tls_key=str(pki / f"{name}.key"))
            link = AgentLink(board, cfg, metrics=metrics, metrics_port=srv.port)
            lt.loop.call_soon_threadsafe(lambda link=link: lt.loop.create_task(link.run(stop)))
        sd_url = f"https://127.0.0.1:{ctl.metrics_port}/sd/agents"
        groups: list = []

        def both_targets() -> bool:
            groups[:] = json.loads(get(sd_url, ca=pki / "ca.crt", user="prometheus", password="s3cret-Pa55")[1])
            return sum(len(g["targets"]) for g in groups) >= 2

        wait_until(both_targets, 20, "both agents in the discovery document")
        assert sorted((g["labels"]["board_model"], t) for g in groups for t in g["targets"]) == sorted(
            [("agx-orin", f"127.0.0.1:{servers[0].port}"), ("orin-nano", f"127.0.0.1:{servers[1].port}")])
        with pytest.raises(urllib.error.HTTPError):   # discovery is behind the same auth as the metrics
            get(sd_url, ca=pki / "ca.crt")

        tls = {"ca_file": str(pki / "ca.crt")}
        (tmp_path / "pw").write_text("s3cret-Pa55")
        basic = {"username": "prometheus", "password_file": str(tmp_path / "pw")}
        config = {"global": {"scrape_interval": "1s"}, "scrape_configs": [
            {"job_name": "jetfleet-controller", "scheme": "https", "tls_config": tls, "basic_auth": basic,
             "static_configs": [{"targets": [f"127.0.0.1:{ctl.metrics_port}"]}]},
            {"job_name": "jetfleet-agents", "scheme": "https", "tls_config": tls, "basic_auth": basic,
             "http_sd_configs": [{"url": sd_url, "refresh_interval": "1s", "tls_config": tls, "basic_auth": basic}]}]}
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        pport = free_port()
        prom = procs.spawn([prometheus, f"--config.file={tmp_path / 'prometheus.yml'}",
                            f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{pport}"],
                           stdout=procs.DEVNULL, stderr=procs.DEVNULL)
        try:
            def up() -> dict:
                url = f"http://127.0.0.1:{pport}/api/v1/query?" + urllib.parse.urlencode({"query": "up"})
                body = json.loads(urllib.request.urlopen(url, timeout=10).read())
                return {(r["metric"]["job"], r["metric"].get("board_model", "")): r["value"][1]
                        for r in body["data"]["result"]}

            seen: dict = {}

            def all_up() -> bool:
                try:
                    seen.clear()
                    seen.update(up())
                except OSError:   # Prometheus not listening yet
                    return False
                return sorted(seen.values()) == ["1"] * 3

            wait_until(all_up, 60, "Prometheus scraping the controller and both agents")
            assert seen == {("jetfleet-controller", ""): "1", ("jetfleet-agents", "agx-orin"): "1",
                            ("jetfleet-agents", "orin-nano"): "1"}
        finally:
            prom.terminate()
            prom.wait(20)
    finally:
        if stop is not None:
            lt.loop.call_soon_threadsafe(stop.set)
        for s in servers:
            s.stop()
        lt.call(ctl.stop())
        lt.close()


def test_controller_metrics_options_are_checked_before_anything_listens(tmp_path):
    ctl = Controller(ControllerConfig(listen="127.0.0.1:0", store=str(tmp_path / "d"), metrics_port=0,
                                      metrics_tls_key="/nonexistent.key"))
    with pytest.raises(InvalidArgument, match="needs both a certificate and its key"):
        asyncio.run(ctl.start())
    assert ctl.port == 0
    ctl.store.close()


def test_tls_means_all_three_files_not_just_a_certificate(tmp_path, pki):
    cert_only = Controller(ControllerConfig(listen="127.0.0.1:0", store=str(tmp_path / "a"), tls_cert=str(pki / "ctl.crt")))
    assert cert_only.tls is False
    with pytest.raises(InvalidArgument, match="needs all three"):
        asyncio.run(cert_only.start())
    cert_only.store.close()
    full = Controller(ControllerConfig(listen="127.0.0.1:0", store=str(tmp_path / "b"), tls_cert=str(pki / "ctl.crt"),
                                       tls_key=str(pki / "ctl.key"), tls_ca=str(pki / "ca.crt")))
    assert full.tls is True and full.metrics_port is None and full.metrics_url is None
    full.store.close()


def test_agent_cli_refuses_bad_metrics_options_before_touching_a_board(tmp_path):
    from click.testing import CliRunner

    from jetfleet.cli.main import cli

    r = CliRunner().invoke(cli, ["agent", "run", "--device", "auto", "--root", str(tmp_path), "--metrics-port", "0",
                                 "--metrics-tls-cert", str(tmp_path / "c.crt")])
    assert r.exit_code == 3 and "needs both a certificate and its key" in r.output
    r = CliRunner().invoke(cli, ["agent", "run", "--route", "nvp"])
    assert r.exit_code == 2 and "'nvp' is not one of 'sysfs', 'nvpmodel'" in r.output
