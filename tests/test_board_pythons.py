"""The agent as a real process on this interpreter (CPython 3.8 and 3.10 under `make test-boards`, the boards'
Pythons; 3.11 under `make test`) against a controller process on the controller's Python
($JETFLEET_CONTROLLER_PYTHON, else this one when it is 3.11+): an emulated board, and the real backend
on a fixture tree with fake nvpmodel/systemctl, stopped by SIGTERM and by SIGKILL."""

from __future__ import annotations

import os
import platform
import re
import signal
import sys
import threading

import pytest

from jetfleet.client import OperatorClient

from . import procs
from .jetson_trees import build_tree, install_tools, snapshot, tool_calls
from .waiting import wait_until

pytestmark = pytest.mark.boards
CONTROLLER_PY = os.environ.get("JETFLEET_CONTROLLER_PYTHON") or (sys.executable if sys.version_info >= (3, 11) else "")


def wait_for(predicate, timeout_s, what):
    wait_until(predicate, timeout_s, what)


class Drained:
    """A child process whose output a thread keeps reading, so a chatty child never blocks on a full pipe;
    ``output()`` is what it printed so far (for the assertion messages)."""

    def __init__(self, argv, env=None, first_line=False):
        self.proc = procs.spawn(argv, stdout=procs.PIPE, stderr=procs.STDOUT, env=env)
        self.lines = [self.proc.stdout.readline()] if first_line else []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    def output(self):
        return "".join(self.lines)

    def stop(self, sig=signal.SIGTERM, timeout_s=20):
        """Send ``sig`` and wait; a child that outlives the wait is killed. Returns its exit status."""
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout_s)
        except procs.subprocess.TimeoutExpired:
            self.proc.end()
            raise AssertionError(f"{self.proc.args[2:5]} did not stop within {timeout_s} s:\n{self.output()}") from None
        finally:
            self.reader.join(5)


@pytest.fixture
def controller(tmp_path):
    if not CONTROLLER_PY:
        pytest.skip("no Python 3.11+ for the controller: set JETFLEET_CONTROLLER_PYTHON (make test-boards does)")
    ctl = Drained([CONTROLLER_PY, "-m", "jetfleet.cli", "controller", "serve", "--listen", "127.0.0.1:0",
                   "--store", str(tmp_path / "data")], first_line=True)
    try:
        m = re.search(r"listening on 127.0.0.1:(\d+)", ctl.lines[0])
        if not m:
            ctl.proc.wait(20)
            ctl.reader.join(5)
            raise AssertionError("the controller did not start:\n" + ctl.output())
        yield f"127.0.0.1:{m.group(1)}"
    finally:
        if ctl.proc.poll() is None:
            ctl.stop()


def agent(address, *args, env=None):
    return Drained([sys.executable, "-m", "jetfleet.cli", "agent", "run", "--controller", address, *args], env=env)


def online(c, device_id):
    return any(d.device_id == device_id and d.online for d in c.list_devices())


if sys.version_info < (3, 11):   # defined only on the boards' Pythons (not a skip: on 3.11+ the controller runs)
    def test_the_controller_says_it_needs_python_3_11():
        out = procs.run([sys.executable, "-m", "jetfleet.cli", "controller", "serve"])
        assert out.returncode == 2 and "the controller needs Python 3.11 or newer" in out.stderr


def test_an_emulated_board_served_by_this_python(controller):
    a = agent(controller, "--device", "emulated:agx-xavier:3", "--speed", "inf", "--id", "xavier-emu")
    try:
        with OperatorClient(controller) as c:
            wait_for(lambda: online(c, "xavier-emu"), 30, "the agent to connect")
            d = c.get_device("xavier-emu")
            assert d.software["python"] == platform.python_version()      # this interpreter drives the board
            assert c.set_mode("xavier-emu", "MODE_15W").confirmed.cores == 4
            wait_for(lambda: c.get_device("xavier-emu").last_telemetry is not None, 15, "telemetry")
        table = procs.run([sys.executable, "-m", "jetfleet.cli", "devices", "ls", "--controller", controller])
        # (the CLI's tables on this Python too)
        assert table.returncode == 0 and re.search(r"xavier-emu\s+agx-xavier\s+online\s+4/1190.4", table.stdout), table
    finally:
        assert a.stop() == 0, a.output()


def test_a_real_board_on_the_nvpmodel_route_is_left_as_found_after_sigterm_and_after_sigkill(controller, tmp_path):
    root = tmp_path / "board"
    build_tree(root, "orin-jp5")
    before = snapshot(root)
    env = {**os.environ, "PATH": install_tools(root)}
    state = tmp_path / "state"
    args = ["--device", "auto", "--root", str(root), "--route", "nvpmodel", "--id", "orin-lab", "--state-dir", str(state)]
    a = agent(controller, *args, env=env)
    try:
        with OperatorClient(controller) as c:
            wait_for(lambda: online(c, "orin-lab"), 30, "the agent to connect")
            shown = c.get_device("orin-lab")
            sw = shown.software
            assert (sw["l4t"], sw["jetpack"], sw["python"]) == ("35.4.1", "5.1.2", platform.python_version())
            assert (shown.emulated, shown.speed, shown.speed_text) == (False, 1.0, "real time")   # `devices ls`'s SPEED
            r = c.set_mode("orin-lab", "mode_15w")           # NVIDIA's preset, by the name the board's conf gives it
            assert (r.confirmed.cores, r.confirmed.cpu_mhz, r.confirmed.gpu_mhz) == (4, 1113.6, 420.75)
            assert f"nvpmodel -f {root / 'etc/nvpmodel.conf'} -m 1" in tool_calls(root)
            c.set_mode("orin-lab", "2/1190.4/624.75/665.6")  # any other mode: the papers' custom block
            assert tool_calls(root)[-1].startswith("systemctl") or tool_calls(root)[-1].endswith("-m 14")
            assert snapshot(root) != before
    finally:
        assert a.stop() == 0, a.output()
    assert snapshot(root) == before                           # SIGTERM: everything put back

    a = agent(controller, *args, env=env)
    try:
        with OperatorClient(controller) as c:
            wait_for(lambda: online(c, "orin-lab"), 30, "the agent to connect")
            c.set_mode("orin-lab", "4/1497.6/828.75/3199")
    finally:
        a.stop(signal.SIGKILL)                                # SIGKILL: no chance to clean up
    assert snapshot(root) != before and (state / "found-state.json").exists()
    a = agent(controller, *args, env=env)                     # the next start restores before it dials
    try:
        with OperatorClient(controller) as c:
            wait_for(lambda: online(c, "orin-lab"), 30, "the agent to reconnect")
            assert snapshot(root) == before
            assert not (state / "found-state.json").exists()
    finally:
        assert a.stop() == 0, a.output()
    assert snapshot(root) == before
