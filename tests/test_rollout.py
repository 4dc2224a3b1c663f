"""A real multi-host rollout: ``site.yml`` over real SSH to three test hosts on this machine (network
namespaces with their own sshd, tests/sshlab.py): one controller host (Python 3.11, Redis with a
password) and two agent hosts, each with its own fixture board tree, fake nvpmodel/systemctl and its own
Python (3.8 like JetPack 5, 3.10 like JetPack 6). Services run under start-stop-daemon (no systemd here).

After the run both agents are connected over mutual TLS and `devices ls` shows them; Prometheus can
discover them over HTTPS; a second run changes nothing; the certificate-rotation play re-issues one
agent's certificate and that agent reconnects with it. Slow (minutes): `make test-slow`, CI's .ci/run."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import ssl
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from jetfleet.shared.tls import init_ca, issue

from . import procs
from .jetson_trees import build_tree, install_tools, snapshot
from .sshlab import SshLab

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]
REPO = Path(__file__).resolve().parents[1]
ANSIBLE = REPO / "deploy" / "ansible"
GENERATED = {"redis": "redis.password", "metrics": "controller-metrics.password", "agents": "agents-metrics.password"}


def pyenv_python(version: str) -> str:
    root = procs.run(["pyenv", "root"]).stdout.strip() if shutil.which("pyenv") else ""
    found = sorted(Path(root, "versions").glob(f"{version}.*"), key=lambda p: [int(x) for x in p.name.split(".")])
    if not found:
        pytest.skip(f"pyenv has no CPython {version}")
    return str(found[-1] / "bin" / "python3")


AGENT_CONSTRAINTS = ["numpy<2"]   # the agent role's default constraints (numpy 1 beside NVIDIA's torch)


def wheelhouse(python: str, extra: str, tag: str) -> Path:
    """Wheels of the dependencies of jetfleet[extra] for ``python`` (an agent's under the agent role's constraints),
    kept under the worktree until pyproject.toml changes (the test hosts have no route to a package index)."""
    constraints = AGENT_CONSTRAINTS if extra == "agent" else []
    key = hashlib.sha256((REPO / "pyproject.toml").read_bytes() + repr(constraints).encode()).hexdigest()[:12]
    d = REPO / ".venv-wheelhouse" / f"{tag}-{key}"
    if not (d / ".complete").exists():
        shutil.rmtree(d, ignore_errors=True)
        procs.run([python, "-m", "pip", "wheel", "-q", "-w", str(d), "--find-links", "/opt/wheels", f"{REPO}[{extra}]",
                   *constraints],
                  check=True, timeout=1800)
        for w in d.glob("jetfleet-*.whl"):
            w.unlink()  # jetfleet itself is built fresh for every run
        (d / ".complete").touch()
    return d


@pytest.fixture
def lab(tmp_path):
    base = Path(f"/tmp/jf-rollout-{os.getpid()}")   # short paths: sshd and AF_UNIX sockets live under it
    shutil.rmtree(base, ignore_errors=True)
    sshlab = SshLab(base, ["controller", "agent1", "agent2"], subnet=100 + os.getpid() % 100)
    why = sshlab.missing()
    if why:
        pytest.skip(why)
    if not shutil.which("redis-server"):
        pytest.skip("redis-server is not installed")
    try:
        yield sshlab.up()
    finally:
        sshlab.down()
        shutil.rmtree(base, ignore_errors=True)


def test_site_yml_over_ssh_to_three_hosts_with_mutual_tls_idempotent_and_a_certificate_rotation(lab, tmp_path):
    playbook = REPO / ".venv" / "bin" / "ansible-playbook"
    if not playbook.exists():
        pytest.skip("ansible-playbook is not installed (the dev extra)")
    py = {"3.8": pyenv_python("3.8"), "3.10": pyenv_python("3.10"), "3.11": pyenv_python("3.11")}
    t0 = time.monotonic()
    wheels = {v: wheelhouse(p, "controller" if v == "3.11" else "agent", f"py{v}") for v, p in py.items()}
    fresh = tmp_path / "jetfleet-wheel"
    procs.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(fresh), str(REPO)], check=True)
    version = re.search(r"jetfleet-([^-]+)-", next(fresh.glob("jetfleet-*.whl")).name).group(1)
    print(f"\nwheelhouses and the jetfleet wheel: {time.monotonic() - t0:.0f} s")

    ctl, a1, a2 = (lab.hosts[n] for n in ("controller", "agent1", "agent2"))
    secrets_dir = tmp_path / "secrets"

    def secrets() -> dict[str, str]:
        """The secrets the roles generated on this control node (none before the first run)."""
        return {k: (secrets_dir / f).read_text().split()[0] for k, f in GENERATED.items() if (secrets_dir / f).exists()}

    pki = tmp_path / "pki"
    init_ca(pki)
    issue(pki, "controller", "jf-ctl", sans=[ctl.address])
    issue(pki, "agent", "xavier-01", sans=[a1.address])
    issue(pki, "agent", "orin-01", sans=[a2.address])
    issue(pki, "operator", "alice")
    boards = {"agent1": ("xavier-jp5", "nvpmodel", py["3.8"], "xavier-01"),
              "agent2": ("orin-jp6", "sysfs", py["3.10"], "orin-01")}
    found = {}
    for host, (layout, _, _, _) in boards.items():
        root = lab.base / host / "board"
        build_tree(root, layout)
        found[host] = snapshot(root)

    def where(host: str, role: str) -> dict:
        h = lab.base / host
        p = f"jetfleet_{role}_"
        return {p + "prefix": str(h / "opt/jetfleet"), p + "etc": str(h / "etc/jetfleet"), p + "log_dir": str(h / "log"),
                p + "systemd_dir": str(h / "etc/systemd/system"), p + "service_manager": "daemon"}

    hostvars = {"controller": {**where("controller", "controller"), "ansible_host": ctl.address,
                               "ansible_python_interpreter": py["3.11"], "jetfleet_controller_python": py["3.11"],
                               "jetfleet_controller_data_dir": str(lab.base / "controller/var/lib/jetfleet"),
                               "jetfleet_controller_prometheus_dir": str(lab.base / "controller/etc/prometheus"),
                               "jetfleet_controller_grafana_dir": str(lab.base / "controller/etc/grafana"),
                               "jetfleet_controller_grafana_dashboards_dir": str(lab.base / "controller/grafana"),
                               "jetfleet_controller_manage_packages": False, "jetfleet_controller_cert_name": "jf-ctl",
                               "jetfleet_controller_package": f"jetfleet[controller]=={version}",
                               "jetfleet_controller_pip_extra_args":
                                   f"--no-index --find-links {fresh} --find-links {wheels['3.11']} --find-links /opt/wheels"}}
    for host, (_layout, route, python, device_id) in boards.items():
        root = lab.base / host / "board"
        v = "3.8" if python == py["3.8"] else "3.10"
        hostvars[host] = {**where(host, "agent"), "ansible_host": lab.hosts[host].address,
                          "ansible_python_interpreter": python, "jetfleet_agent_python": python,
                          "jetfleet_agent_device_id": device_id, "jetfleet_agent_root": str(root),
                          "jetfleet_agent_route": route, "jetfleet_agent_verbose": 1,
                          "jetfleet_agent_state_dir": str(lab.base / host / "state"),
                          "jetfleet_agent_path": install_tools(root).split(os.pathsep)[0] + ":/usr/sbin:/usr/bin:/sbin:/bin",
                          "jetfleet_agent_package": f"jetfleet[agent]=={version}",
                          "jetfleet_agent_pip_extra_args": f"--no-index --find-links {fresh} --find-links {wheels[v]}"}
    inventory = {"all": {
        "vars": {"ansible_user": "root", "ansible_ssh_private_key_file": str(lab.key), "ansible_become": False,
                 "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
                 "jetfleet_agent_pki_dir": str(pki), "jetfleet_controller_pki_dir": str(pki),
                 "jetfleet_agent_controller_address": f"{ctl.address}:50051", "jetfleet_agent_metrics_tls": True,
                 # the roles' defaults: no password in the inventory, so Redis's and the metrics endpoints' are
                 # generated on the control node (issue 29) and must reach every host that needs them
                 "jetfleet_controller_secrets_dir": str(secrets_dir), "jetfleet_agent_secrets_dir": str(secrets_dir)},
        "children": {"controller": {"hosts": {"controller": hostvars["controller"]}},
                     "agents": {"hosts": {h: hostvars[h] for h in boards}}}}}
    inv = tmp_path / "inventory.yml"
    inv.write_text(json.dumps(inventory))
    # no SSH connection sharing: its master processes detach and outlive the test (ControlPersist), and the
    # suite's sweep fails a run that leaves any (seen: two `ssh: ~/.ansible/cp/... [mux]` after the slow suite)
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_HOST_KEY_CHECKING": "False", "ANSIBLE_PIPELINING": "True",
           "ANSIBLE_SSH_ARGS": "-o ControlMaster=no", "PATH": f"{REPO / '.venv' / 'bin'}:{os.environ['PATH']}"}

    def play(*args: str) -> str:
        t = time.monotonic()
        log = tmp_path / f"ansible-{len(list(tmp_path.glob('ansible-*.log')))}.log"
        with open(log, "w") as f:   # streamed, so a run that hangs can be read while it does
            rc = procs.run([str(playbook), "-i", str(inv), *args], cwd=ANSIBLE, stdout=f, stderr=procs.STDOUT,
                           env=env, timeout=3000).returncode
        out = log.read_text()
        print(f"ansible-playbook {' '.join(args)}: {time.monotonic() - t:.0f} s ({log})")
        assert rc == 0, out[-8000:]
        for secret in secrets().values():
            assert secret not in out, "a secret was printed"
        return out

    first = play("site.yml")
    assert re.search(r"agent1\s*:\s*ok=\d+\s+changed=[1-9]", first)
    operator = {"JETFLEET_TLS_CA": str(pki / "ca.crt"), "JETFLEET_TLS_CERT": str(pki / "alice.crt"),
                "JETFLEET_TLS_KEY": str(pki / "alice.key")}

    def devices() -> dict:
        out = procs.run([sys.executable, "-m", "jetfleet.cli", "devices", "ls", "--controller", f"{ctl.address}:50051",
                              "--output", "json"], env={**os.environ, **operator})
        if out.returncode != 0:
            return {}
        return {d["device_id"]: d for d in json.loads(out.stdout)}

    def wait(predicate, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.5)
        logs = {h: (lab.base / h / "log").glob("*.log") for h in ("controller", "agent1", "agent2")}
        raise AssertionError(f"timed out waiting for {what}; logs: " + "\n".join(
            f"{f}: {f.read_text()[-1500:]}" for fs in logs.values() for f in fs))

    wait(lambda: {k for k, d in devices().items() if d["online"]} == {"xavier-01", "orin-01"}, 90,
         "both agents online over mutual TLS")
    ds = devices()
    assert ds["xavier-01"]["software"]["python"].startswith("3.8.")     # JetPack 5's Python
    assert ds["orin-01"]["software"]["python"].startswith("3.10.")      # JetPack 6's
    assert ds["xavier-01"]["software"]["jetpack"] == "5.1.2" and ds["orin-01"]["software"]["l4t"] == "36.3.0"

    # Prometheus's view: the agents' HTTPS endpoints, from the controller's http_sd behind basic auth
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    generated = secrets()
    assert set(generated) == set(GENERATED) and all(len(v) == 32 for v in generated.values())

    def basic_auth(password: str) -> dict:
        return {"Authorization": "Basic " + base64.b64encode(f"prometheus:{password}".encode()).decode()}

    basic = basic_auth(generated["metrics"])

    def https(url: str, auth: dict = basic) -> str:
        return urllib.request.urlopen(urllib.request.Request(url, headers=auth), context=ctx, timeout=10).read().decode()

    groups = json.loads(https(f"https://{ctl.address}:9400/sd/agents"))
    assert sorted(t for g in groups for t in g["targets"]) == [f"{a1.address}:9401", f"{a2.address}:9401"]
    assert {g["labels"]["device"]: g["labels"]["board_model"] for g in groups} == {"xavier-01": "agx-xavier",
                                                                                   "orin-01": "agx-orin"}
    assert "jetfleet_agent_power_watts" in https(f"https://{a1.address}:9401/metrics", basic_auth(generated["agents"]))
    # what Prometheus is given to scrape the agents is the password the agents were given
    prom_dir = lab.base / "controller/etc/prometheus"
    assert (prom_dir / "jetfleet-agents.password").read_text() == generated["agents"]

    # The store is Redis with the password from the inventory; nothing on the controller host shows it
    ps = lab.ssh("controller", "ps -eo args")
    assert generated["redis"] not in ps.stdout and "redis-server" in ps.stdout
    log = (lab.base / "controller/log/controller.log").read_text()
    assert "store redis://:***@127.0.0.1:6379/0" in log and generated["redis"] not in log

    # A mode by NVIDIA's name on the nvpmodel board, then the second run: nothing changes
    out = procs.run([sys.executable, "-m", "jetfleet.cli", "mode", "set", "xavier-01", "MODE_15W", "--controller",
                          f"{ctl.address}:50051", "--output", "json"],
                    env={**os.environ, **operator})
    assert out.returncode == 0 and json.loads(out.stdout)["confirmed"] == "4/1190.4/624.75/1331.2", out.stderr
    second = play("site.yml")
    for host in ("controller", "agent1", "agent2"):
        assert re.search(rf"{host}\s*:\s*ok=\d+\s+changed=0\s", second), second[-3000:]

    # Rotation: a new certificate for agent1 only; it restarts (putting its board back) and reconnects with it
    old_pem = (lab.base / "agent1/etc/jetfleet/pki/xavier-01.crt").read_text()
    old_pid = (lab.base / "agent1/state/agent.pid").read_text().strip()
    agent2_pid = (lab.base / "agent2/state/agent.pid").read_text().strip()
    rotated = play("rotate-certs.yml", "--limit", "agent1", "-e",
                   json.dumps({"jetfleet_certs_cli": f"{sys.executable} -m jetfleet.cli",
                               "jetfleet_agent_cert_sans": [a1.address]}))
    assert re.search(r"agent1\s*:\s*ok=\d+\s+changed=[1-9]", rotated) and "agent2" not in rotated.split("PLAY RECAP")[-1]
    new_pem = (lab.base / "agent1/etc/jetfleet/pki/xavier-01.crt").read_text()
    assert new_pem != old_pem and new_pem == (pki / "xavier-01.crt").read_text()
    assert (lab.base / "agent1/state/agent.pid").read_text().strip() != old_pid
    assert (lab.base / "agent2/state/agent.pid").read_text().strip() == agent2_pid
    # The restart puts the board back as found: the old agent at SIGTERM or, if the stop had to SIGKILL it, the new one
    # at its start (the playbook returns once the new agent is launched, not once it has read its state file)
    wait(lambda: snapshot(lab.base / "agent1/board") == found["agent1"], 60, "agent1's board back as found")
    agent_log = "\n".join(f.read_text() for f in (lab.base / "agent1/log").glob("*.log"))
    print("agent1 restored at " + ("its next start (the stop was a SIGKILL)" if "a previous agent left the board changed"
                                   in agent_log else "SIGTERM"))
    wait(lambda: devices().get("xavier-01", {}).get("online") is True, 60, "xavier-01 back with its new certificate")
    print(f"rollout test: {time.monotonic() - t0:.0f} s in all")
