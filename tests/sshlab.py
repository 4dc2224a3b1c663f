"""Test hosts for a real Ansible rollout on this machine: one network namespace per host, joined by veth
pairs to a bridge, each with its own sshd; Ansible reaches them over real SSH from the root namespace.

The hosts share this machine's filesystem, so each host's files live under its own directory (the roles'
prefixes point there); what the hosts do not share is the network (each has its own address, loopback
and ports) and the processes Ansible starts in them. Everything is torn down by process id and name."""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import procs

# Each lab's link and namespace names carry a tag of their own: this process's id and a count of the labs it has
# started. Two labs of one run never share a name, which matters because a namespace removed with `ip netns del`
# is destroyed by the kernel later (its links with it), so a lab started right after another ended could find the
# previous lab's links still there under a pid-only tag ("RTNETLINK answers: File exists", seen in CI).
_LABS = itertools.count(1)


def run(*cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return procs.run(list(cmd), check=check)


@dataclass
class Host:
    name: str
    ns: str
    address: str
    sshd: procs.Child | None = None


@dataclass
class SshLab:
    """Hosts named ``names`` on 10.77.N.0/24 (``subnet`` = N), reachable as root with ``key``."""

    base: Path
    names: list[str]
    subnet: int
    hosts: dict[str, Host] = field(default_factory=dict)
    bridge: str = ""
    links: list[str] = field(default_factory=list)   # the root namespace's ends of the hosts' veth pairs

    @property
    def key(self) -> Path:
        return self.base / "id_ed25519"

    def missing(self) -> str:
        """Why this machine cannot host the lab ('' if it can)."""
        if os.geteuid() != 0:
            return "network namespaces and sshd need root"
        for tool in ("ip", "ssh", "ssh-keygen", "start-stop-daemon"):
            if not shutil.which(tool):
                return f"{tool} is not installed"
        if not Path("/usr/sbin/sshd").exists():
            return "sshd is not installed (apt-get install openssh-server; make test-slow does it when root)"
        probe = f"jfprobe{os.getpid()}"
        if run("ip", "netns", "add", probe, check=False).returncode != 0:
            return "this machine does not allow network namespaces"
        run("ip", "netns", "del", probe, check=False)
        return ""

    def up(self) -> SshLab:
        tag = f"{os.getpid() % 10000}{next(_LABS)}"   # names stay within IFNAMSIZ (15): jfbr + 4 + count
        self.bridge = f"jfbr{tag}"
        self.base.mkdir(parents=True, exist_ok=True)
        run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.key))
        (self.base / "authorized_keys").write_text(self.key.with_suffix(".pub").read_text())
        os.chmod(self.base / "authorized_keys", 0o600)
        Path("/run/sshd").mkdir(exist_ok=True)   # sshd's privilege-separation directory
        run("ip", "link", "add", self.bridge, "type", "bridge")
        run("ip", "addr", "add", f"10.77.{self.subnet}.1/24", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        for i, name in enumerate(self.names):
            h = Host(name, f"jf{i}n{tag}", f"10.77.{self.subnet}.{10 + i}")
            self.hosts[name] = h
            veth, peer = f"jf{i}v{tag}", f"jf{i}p{tag}"
            run("ip", "netns", "add", h.ns)
            run("ip", "link", "add", veth, "type", "veth", "peer", "name", peer)
            self.links.append(peer)
            run("ip", "link", "set", veth, "netns", h.ns)
            run("ip", "link", "set", peer, "master", self.bridge)
            run("ip", "link", "set", peer, "up")
            for args in (["addr", "add", f"{h.address}/24", "dev", veth], ["link", "set", veth, "up"],
                         ["link", "set", "lo", "up"]):
                run("ip", "netns", "exec", h.ns, "ip", *args)
            self._sshd(h)
        for h in self.hosts.values():
            self.wait_ssh(h)
        return self

    def _sshd(self, h: Host) -> None:
        d = self.base / h.name
        d.mkdir(exist_ok=True)
        run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "host_key"))
        cfg = d / "sshd_config"
        cfg.write_text(f"ListenAddress {h.address}\nPort 22\nHostKey {d / 'host_key'}\nPermitRootLogin prohibit-password\n"
                       f"AuthorizedKeysFile {self.base / 'authorized_keys'}\nPasswordAuthentication no\nUsePAM no\n"
                       "StrictModes no\nPidFile none\nSubsystem sftp internal-sftp\nMaxSessions 30\nMaxStartups 30\n")
        with open(d / "sshd.log", "wb") as log:   # the lab outlives a test: it ends its sshds itself (close)
            h.sshd = procs.spawn(["ip", "netns", "exec", h.ns, "/usr/sbin/sshd", "-D", "-e", "-f", str(cfg)],
                                 stdout=procs.DEVNULL, stderr=log, scope="session")

    def ssh(self, host: str, command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        h = self.hosts[host]
        return run("ssh", "-i", str(self.key), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o",
                   "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=5",
                   f"root@{h.address}", command, check=check)

    def wait_ssh(self, h: Host, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.ssh(h.name, "true", check=False).returncode == 0:
                return
            time.sleep(0.2)
        raise RuntimeError(f"sshd on {h.address} did not answer: {(self.base / h.name / 'sshd.log').read_text()}")

    def pids(self, host: str) -> list[int]:
        out = run("ip", "netns", "pids", self.hosts[host].ns, check=False).stdout
        return [int(p) for p in out.split()]

    def down(self) -> None:
        """Stop every process in the hosts' namespaces (by pid), then remove the namespaces and links."""
        for h in self.hosts.values():
            for sig in (signal.SIGTERM, signal.SIGKILL):
                for pid in self.pids(h.name):
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        pass
                deadline = time.monotonic() + 15
                while self.pids(h.name) and time.monotonic() < deadline:
                    time.sleep(0.1)
            if h.sshd is not None:
                h.sshd.wait(10)
                h.sshd.end()
            run("ip", "netns", "del", h.ns, check=False)
        for link in self.links:   # removed now, not whenever the kernel gets to the namespace it paired with
            run("ip", "link", "del", link, check=False)
        if self.bridge:
            run("ip", "link", "del", self.bridge, check=False)
