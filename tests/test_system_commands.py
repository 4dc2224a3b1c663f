"""The board's tools as separate programs: a timeout ends the tool and everything it started, and a missing
or failing tool is a DeviceError naming it."""

from __future__ import annotations

import os
import shutil
import time

import pytest

from jetfleet.agent.device.system import SystemCommands
from jetfleet.shared.errors import DeviceError

from . import procs
from .waiting import wait_until

pytestmark = pytest.mark.boards


def tool(bin_dir, name, body):
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(bin_dir)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:   # a zombie has ended
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:   # reaped between the two looks
        return False


def test_a_tool_that_hangs_is_ended_with_what_it_started(tmp_path):
    pid_file = tmp_path / "child.pid"
    # exits at once but leaves a child holding its output, as a careless daemon start would
    path = tool(tmp_path, "nvpmodel", f"{shutil.which('sleep')} 600 &\necho $! > {pid_file}\necho started\n")
    started = time.monotonic()
    with pytest.raises(DeviceError, match=r"nvpmodel -m 1 did not finish within 1 s") as e:
        SystemCommands(path=path, timeout_s=1).run(["nvpmodel", "-m", "1"])
    assert e.value.field == "nvpmodel" and time.monotonic() - started < 30
    # The error comes once the child's end closed the output it held, but a killed process closes its files before
    # it is marked ended: on a loaded CPython 3.8 the child was still "R" (running its exit) in 10 of 60 runs,
    # ended ~1.3 ms later. So the test waits for the end, with a deadline far beyond that: a child that survived
    # the kill (a tool that left the group) fails here.
    child = int(pid_file.read_text())
    wait_until(lambda: not alive(child), 30, "the tool's child to end after the timeout killed its group")


def test_a_tool_is_run_with_stdin_closed_and_its_output_returned(tmp_path):
    path = tool(tmp_path, "nvpmodel", "read answer || echo 'no input'\necho \"asked $1\"\n")
    r = SystemCommands(path=path, timeout_s=20).run(["nvpmodel", "-q"])
    assert (r.returncode, r.stdout) == (0, "no input\nasked -q\n")


def test_a_missing_or_failing_tool_is_an_error_naming_it(tmp_path):
    with pytest.raises(DeviceError, match="systemctl is not installed on this board"):
        SystemCommands(path=str(tmp_path), timeout_s=5).run(["systemctl", "is-active", "nvfancontrol"])
    path = tool(tmp_path, "systemctl", "echo 'Unit nvfancontrol.service not found.' >&2\nexit 5\n")
    with pytest.raises(DeviceError, match=r"systemctl start nvfancontrol failed \(exit 5\): Unit nvfancontrol"):
        SystemCommands(path=path, timeout_s=20).run(["systemctl", "start", "nvfancontrol"])
    assert SystemCommands(path=path, timeout_s=20).run(["systemctl", "start", "x"], check=False).returncode == 5


def test_a_tool_is_started_without_a_fork_so_no_librarys_fork_handler_runs(tmp_path):
    """gRPC's fork handlers wait for its threads: a fork while the agent's channel was busy could wait forever
    (grpc/grpc#37259; seen here on CPython 3.8 with grpcio 1.70). Tools are spawned, never forked."""
    forks = procs.forks()
    path = tool(tmp_path, "nvpmodel", "echo ok\n")
    before = len(forks)
    assert SystemCommands(path=path, timeout_s=20).run(["nvpmodel", "-q"]).stdout == "ok\n"
    # (on CPython 3.8 the previous subprocess.Popen forked: this failed there; 3.10+ Popen uses vfork)
    assert len(forks) == before, "running a tool forked this process"


def test_a_tool_runs_without_fork_on_any_python_and_with_sigpipe_at_its_default(tmp_path, monkeypatch):
    import _posixsubprocess

    def no_fork(*_a, **_k):
        raise AssertionError("a board tool was started by forking this process")

    monkeypatch.setattr(os, "fork", no_fork)
    monkeypatch.setattr(_posixsubprocess, "fork_exec", no_fork)
    path = tool(tmp_path, "nvpmodel", f"{shutil.which('grep')} SigIgn /proc/$$/status\n")
    r = SystemCommands(path=path, timeout_s=20).run(["nvpmodel", "-q"])
    ignored = int(r.stdout.split()[1], 16)
    assert not ignored & (1 << (13 - 1)), "SIGPIPE is ignored in the tool (a pipe's writer would not end quietly)"
