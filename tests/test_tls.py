"""Mutual TLS between agents, operators and the controller, with identities from certificates."""

import asyncio
import os
from dataclasses import replace

import pytest
from click.testing import CliRunner

from jetfleet.agent.link import AgentLink
from jetfleet.cli.main import cli
from jetfleet.client import OperatorClient
from jetfleet.controller.config import ControllerConfig
from jetfleet.controller.server import Controller
from jetfleet.shared.errors import InvalidArgument, PermissionDenied, Unavailable
from jetfleet.twin.board import EmulatedBoard

from .harness import FAST_AGENT, until


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    other = tmp_path_factory.mktemp("other-pki")
    runner = CliRunner()
    for args in (["certs", "init", "--dir", str(d)], ["certs", "issue", "controller", "ctl", "--dir", str(d)],
                 ["certs", "issue", "agent", "orin-a", "--dir", str(d)],
                 ["certs", "issue", "operator", "alice", "--dir", str(d)],
                 ["certs", "init", "--dir", str(other)], ["certs", "issue", "agent", "orin-a", "--dir", str(other)]):
        r = runner.invoke(cli, args)
        assert r.exit_code == 0, r.output
    assert oct(os.stat(d / "ca.key").st_mode & 0o777) == "0o600"
    r = runner.invoke(cli, ["certs", "init", "--dir", str(d)])
    assert r.exit_code == 8 and "would invalidate every certificate" in r.output
    return d, other


def run_scenario(pki, agent_cfg, device_id="orin-a", expect_online=True):
    """Start a TLS controller and an agent; wait until the agent is online (``expect_online``) or until it has
    been turned away twice, and report what happened."""
    d, _ = pki

    async def scenario():
        ctl = Controller(ControllerConfig(listen="127.0.0.1:0", store=str(d / f"store-{device_id}"),
                                          tls_cert=str(d / "ctl.crt"), tls_key=str(d / "ctl.key"),
                                          tls_ca=str(d / "ca.crt")))
        port = await ctl.start()
        try:
            cfg = replace(FAST_AGENT, controller=f"127.0.0.1:{port}", device_id=device_id, **agent_cfg)
            link = AgentLink(EmulatedBoard("agx-orin", 1), cfg)
            stop = asyncio.Event()
            task = asyncio.create_task(link.run(stop))

            def online() -> bool:
                return device_id in ctl.registry.devices and ctl.registry.devices[device_id].online

            # online, or turned away on two attempts (the third dial means the second ended)
            await until(online if expect_online else (lambda: link.attempts >= 3), 15, "the agent to settle")
            was_online = online()
            stop.set()
            await task
            return was_online, link
        finally:
            await ctl.stop()

    return asyncio.run(scenario())


def tls(d, name):
    return {"tls_ca": str(d / "ca.crt"), "tls_cert": str(d / f"{name}.crt"), "tls_key": str(d / f"{name}.key")}


def test_an_agent_with_a_certificate_from_the_lab_ca_connects(pki):
    online, link = run_scenario(pki, tls(pki[0], "orin-a"))
    assert online and link.sessions == 1


def test_a_certificate_from_another_ca_is_rejected(pki):
    d, other = pki
    online, link = run_scenario(pki, {"tls_ca": str(d / "ca.crt"), "tls_cert": str(other / "orin-a.crt"),
                                      "tls_key": str(other / "orin-a.key")}, expect_online=False)
    assert not online and link.sessions == 0


def test_an_agent_without_a_certificate_is_rejected(pki):
    d, _ = pki
    with pytest.raises(InvalidArgument, match="all three"):
        run_scenario(pki, {"tls_ca": str(d / "ca.crt")})
    online, link = run_scenario(pki, {}, expect_online=False)  # plaintext on loopback: the TLS controller does not answer
    assert not online and link.sessions == 0


def test_a_certificate_name_that_differs_from_the_claimed_id_is_refused(pki):
    online, link = run_scenario(pki, tls(pki[0], "orin-a"), device_id="orin-b", expect_online=False)
    assert not online and link.sessions == 0
    assert any(n.code == "PERMISSION_DENIED" and "orin-a" in n.message and "orin-b" in n.message
               for n in link.notices)


def test_operators_need_an_operator_certificate(pki, monkeypatch):
    d, _ = pki

    async def scenario():
        ctl = Controller(ControllerConfig(listen="127.0.0.1:0", store=str(d / "store-op"),
                                          tls_cert=str(d / "ctl.crt"), tls_key=str(d / "ctl.key"),
                                          tls_ca=str(d / "ca.crt")))
        port = await ctl.start()
        results = {}
        for who in ("alice", "orin-a"):
            monkeypatch.setenv("JETFLEET_TLS_CA", str(d / "ca.crt"))
            monkeypatch.setenv("JETFLEET_TLS_CERT", str(d / f"{who}.crt"))
            monkeypatch.setenv("JETFLEET_TLS_KEY", str(d / f"{who}.key"))

            def call():
                with OperatorClient(f"127.0.0.1:{port}", timeout_s=5) as c:
                    return c.list_devices()

            try:
                results[who] = await asyncio.to_thread(call)
            except (PermissionDenied, Unavailable) as e:
                results[who] = e
        monkeypatch.delenv("JETFLEET_TLS_CERT")
        await ctl.stop()
        return results

    results = asyncio.run(scenario())
    assert results["alice"] == []
    assert isinstance(results["orin-a"], PermissionDenied) and "needs 'operator'" in results["orin-a"].message


def test_plaintext_off_loopback_is_refused_unless_insecure(tmp_path):
    async def start(insecure):
        ctl = Controller(ControllerConfig(listen="0.0.0.0:0", store=str(tmp_path / str(insecure)), insecure=insecure))
        try:
            await ctl.start()
        finally:
            await ctl.stop()

    with pytest.raises(InvalidArgument, match="plaintext gRPC on 0.0.0.0:0 refused"):
        asyncio.run(start(False))
    asyncio.run(start(True))
    with pytest.raises(InvalidArgument, match="plaintext to controller 10.1.2.3:50051 refused"):
        AgentLink(EmulatedBoard("tx2"), replace(FAST_AGENT, controller="10.1.2.3:50051"))


def test_issue_refuses_bad_input(pki, tmp_path):
    r = CliRunner().invoke(cli, ["certs", "issue", "agent", "has space", "--dir", str(pki[0])])
    assert r.exit_code == 3 and "NAME must match [a-z0-9][a-z0-9._-]{0,63}" in r.output
    r = CliRunner().invoke(cli, ["certs", "issue", "agent", "x", "--dir", str(tmp_path)])
    assert r.exit_code == 4 and "no CA in" in r.output
