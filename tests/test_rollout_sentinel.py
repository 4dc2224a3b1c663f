"""A lab of two controllers under Redis Sentinel, rolled out for real: ``site.yml`` over real SSH to three test hosts
on this machine (network namespaces with their own sshd, tests/sshlab.py). ctl-a runs the Redis master, a Sentinel and
a controller; ctl-b the replica, a Sentinel and a controller; mon the third Sentinel. No agents (the agents' list of
controllers is checked where the role renders it, tests/test_ansible.py). Services run under start-stop-daemon.

After the run `jetfleet controller status` shows one leader and one standby; a second run changes nothing; the Redis
master killed -9, Sentinel promotes the replica and the controllers lead on it; a third run starts the dead Redis again
without undoing the failover (the Sentinel-owned files are written once): it comes back as the new master's replica.
Slow (minutes): `make test-slow`."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import pytest

from jetfleet.shared.tls import init_ca, issue

from . import procs
from .harness import wait_until
from .sshlab import SshLab
from .test_rollout import pyenv_python, wheelhouse

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]
REPO = Path(__file__).resolve().parents[1]
ANSIBLE = REPO / "deploy" / "ansible"
HOSTS = ["ctl-a", "ctl-b", "mon"]


@pytest.fixture
def lab():
    base = Path(f"/tmp/jf-sentinel-{os.getpid()}")   # short paths: sshd and AF_UNIX sockets live under it
    shutil.rmtree(base, ignore_errors=True)
    sshlab = SshLab(base, HOSTS, subnet=100 + (os.getpid() + 50) % 100)
    why = sshlab.missing() or ("" if shutil.which("redis-server") else "redis-server is not installed")
    if why:
        pytest.skip(why)
    try:
        yield sshlab.up()
    finally:
        sshlab.down()
        shutil.rmtree(base, ignore_errors=True)


def status(store: str) -> dict:
    """`jetfleet controller status --output json` from the control node ({} while it cannot answer)."""
    out = procs.run([sys.executable, "-m", "jetfleet.cli", "controller", "status", "--store", store, "--output", "json"])
    return json.loads(out.stdout) if out.returncode == 0 else {}


def test_two_controllers_and_a_sentinel_trio_roll_out_idempotently_and_survive_a_redis_failover(lab, tmp_path):
    import redis

    playbook = REPO / ".venv" / "bin" / "ansible-playbook"
    if not playbook.exists():
        pytest.skip("ansible-playbook is not installed (the dev extra)")
    py = pyenv_python("3.11")
    t0 = time.monotonic()
    wheels = wheelhouse(py, "controller", "py3.11")
    fresh = tmp_path / "jetfleet-wheel"
    procs.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(fresh), str(REPO)], check=True)
    version = re.search(r"jetfleet-([^-]+)-", next(fresh.glob("jetfleet-*.whl")).name).group(1)
    address = {h: lab.hosts[h].address for h in HOSTS}
    pki = tmp_path / "pki"
    init_ca(pki)
    for h in ("ctl-a", "ctl-b"):
        issue(pki, "controller", h, sans=[address[h]])
    secrets_dir = tmp_path / "secrets"

    def hostvars(h: str) -> dict:
        d = lab.base / h
        v = {"ansible_host": address[h], "ansible_python_interpreter": py, "jetfleet_redis_etc": str(d / "etc/jetfleet"),
             "jetfleet_redis_data_dir": str(d / "redis"), "jetfleet_redis_log_dir": str(d / "log"),
             "jetfleet_redis_systemd_dir": str(d / "etc/systemd/system")}
        if h != "mon":
            p = "jetfleet_controller_"
            v.update({p + "prefix": str(d / "opt/jetfleet"), p + "etc": str(d / "etc/jetfleet"), p + "log_dir": str(d / "log"),
                      p + "systemd_dir": str(d / "etc/systemd/system"), p + "service_manager": "daemon",
                      p + "python": py, p + "data_dir": str(d / "var/lib/jetfleet"),
                      p + "prometheus_dir": str(d / "etc/prometheus"), p + "grafana_dir": str(d / "etc/grafana"),
                      p + "grafana_dashboards_dir": str(d / "grafana"), p + "manage_packages": False,
                      p + "cert_name": h, p + "listen": f"{address[h]}:50051",
                      p + "package": f"jetfleet[controller]=={version}",
                      p + "pip_extra_args": f"--no-index --find-links {fresh} --find-links {wheels} --find-links /opt/wheels"})
        return v

    inventory = {"all": {
        "vars": {"ansible_user": "root", "ansible_ssh_private_key_file": str(lab.key), "ansible_become": False,
                 "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null",
                 "jetfleet_controller_pki_dir": str(pki), "jetfleet_controller_secrets_dir": str(secrets_dir),
                 "jetfleet_redis_service_manager": "daemon", "jetfleet_redis_manage_packages": False,
                 # a quick failover for the test (the role's default is 5000 ms: well above network hiccups)
                 "jetfleet_redis_down_after_ms": 1000, "jetfleet_redis_failover_timeout_ms": 4000},
        "hosts": {h: hostvars(h) for h in HOSTS},
        "children": {"jetfleet_redis": {"hosts": {"ctl-a": {}, "ctl-b": {}}},
                     "jetfleet_sentinels": {"hosts": {h: {} for h in HOSTS}},
                     "jetfleet_controllers": {"hosts": {"ctl-a": {}, "ctl-b": {}}}}}}
    inv = tmp_path / "inventory.yml"
    inv.write_text(json.dumps(inventory))
    # no SSH connection sharing: its master processes detach and outlive the test (ControlPersist), and the
    # suite's sweep fails a run that leaves any (seen: two `ssh: ~/.ansible/cp/... [mux]` after the slow suite)
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_HOST_KEY_CHECKING": "False", "ANSIBLE_PIPELINING": "True",
           "ANSIBLE_SSH_ARGS": "-o ControlMaster=no", "PATH": f"{REPO / '.venv' / 'bin'}:{os.environ['PATH']}"}

    def password() -> str:
        return (secrets_dir / "redis.password").read_text().split()[0]

    def play() -> str:
        t = time.monotonic()
        log = tmp_path / f"ansible-{len(list(tmp_path.glob('ansible-*.log')))}.log"
        with open(log, "w") as f:   # streamed, so a run that hangs can be read while it does
            rc = procs.run([str(playbook), "-i", str(inv), "site.yml"], cwd=ANSIBLE, stdout=f, stderr=procs.STDOUT,
                           env=env, timeout=2000).returncode
        out = log.read_text()
        print(f"ansible-playbook site.yml: {time.monotonic() - t:.0f} s ({log})")
        assert rc == 0, out[-8000:]
        assert password() not in out, "the Redis password was printed"
        return out

    def logs() -> str:
        return "\n".join(f"{f}: {f.read_text()[-1500:]}" for h in HOSTS for f in (lab.base / h / "log").glob("*.log"))

    play()
    store = re.search(r"JETFLEET_STORE='([^']+)'", (lab.base / "ctl-a/etc/jetfleet/controller.env").read_text()).group(1)
    sentinels = ",".join(f"{address[h]}:26379" for h in HOSTS)
    assert store == f"redis+sentinel://:{password()}@{sentinels}/jetfleet"
    for h, f in (("ctl-a", "redis.conf"), ("ctl-b", "redis.conf"), ("mon", "sentinel.conf")):
        assert oct((lab.base / h / "etc/jetfleet/redis-sentinel" / f).stat().st_mode & 0o777) == "0o600"
    assert (lab.base / "mon/etc/systemd/system/jetfleet-sentinel.service").exists()   # rendered, not run (no systemd)
    ps = lab.ssh("ctl-a", "ps -eo args").stdout
    assert "redis-server" in ps and password() not in ps

    controllers = {f"{address[h]}:50051" for h in ("ctl-a", "ctl-b")}

    def leader_and_standby() -> bool:
        s = status(store)
        return bool(s.get("leader")) and {s["leader"]["address"], *(c["address"] for c in s["standbys"])} == controllers

    try:
        wait_until(leader_and_standby, 120, "one controller leading and the other standing by")
    except AssertionError:
        raise AssertionError(f"{status(store)}\n{logs()}") from None
    text = procs.run([sys.executable, "-m", "jetfleet.cli", "controller", "status", "--store", store]).stdout
    print(text)
    assert re.search(r"^leader \S+:50051 \(pid \d+ on .*fencing token 1,", text, re.M), text
    assert len(re.findall(r"^standby \S+:50051 \(pid \d+", text, re.M)) == 1 and password() not in text, text

    second = play()
    for h in HOSTS:
        assert re.search(rf"{h}\s*:\s*ok=\d+\s+changed=0\s", second), second[-3000:]

    # The Redis master dies: Sentinel promotes ctl-b's replica; a controller leads on it
    def redis_at(h: str) -> redis.Redis:
        return redis.Redis(host=address[h], password=password(), socket_timeout=1, decode_responses=True)

    def role(h: str) -> str:
        try:
            return str(redis_at(h).info("replication")["role"])
        except redis.RedisError:
            return "down"

    assert (role("ctl-a"), role("ctl-b")) == ("master", "slave")
    pid = int((lab.base / "ctl-a/redis/redis.pid").read_text())
    os.kill(pid, 9)
    killed = time.monotonic()
    wait_until(lambda: role("ctl-b") == "master", 60, "Sentinel to promote ctl-b's replica")
    wait_until(lambda: bool(status(store).get("leader")), 60, "a controller leading on the promoted replica")
    print(f"Redis master killed -9: replica promoted and a controller leading {time.monotonic() - killed:.1f} s later")

    # A third run starts the dead Redis (and any controller that stopped acting) again; the failover stands
    play()
    def follows_ctl_b() -> bool:
        try:
            return redis_at("ctl-a").info("replication").get("master_host") == address["ctl-b"]
        except redis.RedisError:
            return False

    wait_until(follows_ctl_b, 60, "the old master back as the new master's replica")
    assert role("ctl-b") == "master"
    wait_until(leader_and_standby, 120, "one controller leading and the other standing by again")
    print(f"rollout test: {time.monotonic() - t0:.0f} s in all")
