"""Leave the board as found: what the agent changed goes back on close and after a crash, and the fan is
handed back to nvfancontrol the way NVIDIA documents a profile change."""

from __future__ import annotations

import json
import sys

import pytest

from jetfleet.agent.device.fan import PROFILE
from jetfleet.agent.device.jetson import JetsonBoard, JetsonOptions
from jetfleet.shared.catalog import PowerMode
from jetfleet.shared.errors import DeviceError

from .jetson_trees import FAN_PWM, LAYOUTS, build_tree, install_tools, snapshot, tool_calls

pytestmark = pytest.mark.boards
STATE = "var/lib/jetfleet/found-state.json"


def open_board(root, route="sysfs"):
    return JetsonBoard(root, JetsonOptions(route=route, command_path=install_tools(root)))


def some_mode(b):
    cat = b.catalog
    return PowerMode(3, cat.cpu_mhz[4], cat.gpu_mhz[2], cat.mem_mhz[0])


# Every layout on both routes here; on the boards' own Pythons (make test-boards) the pairs boards run there.
# (the nvpmodel route only where the layout has an nvpmodel.conf on paper)
MATRIX = ([(lay, route) for lay in sorted(LAYOUTS) for route in ("sysfs", "nvpmodel")
           if route == "sysfs" or LAYOUTS[lay].nvpmodel] if sys.version_info >= (3, 11)
          else [("xavier-jp5", "nvpmodel"), ("orin-jp6", "sysfs"), ("orin-nano-jp6", "nvpmodel")])


@pytest.mark.parametrize(("layout", "route"), MATRIX)
def test_close_puts_back_everything_the_agent_changed(layout, route, tmp_path):
    build_tree(tmp_path, layout)
    before = snapshot(tmp_path)
    b = open_board(tmp_path, route)
    b.apply_mode(some_mode(b))
    b.apply_mode(b.catalog.maxn)
    assert snapshot(tmp_path) != before and (tmp_path / STATE).exists()
    b.close()
    assert snapshot(tmp_path) == before
    assert not (tmp_path / STATE).exists()


def test_the_found_state_is_recorded_before_the_first_write(tmp_path):
    build_tree(tmp_path, "orin-jp5")
    b = open_board(tmp_path, "nvpmodel")
    assert not (tmp_path / STATE).exists()
    b.apply_mode(some_mode(b))
    found = json.loads((tmp_path / STATE).read_text())
    assert found["nvpmodel"] == [2, "MODE_30W"]                 # the board's default mode, as nvpmodel -q says
    assert found["cpus"]["9"]["online"] is False and found["cpus"]["9"]["max"] == 2201600  # MODE_30W runs 8 cores
    assert found["cpus"]["0"]["max"] == 1728000 and found["cpus"]["0"]["governor"] == "schedutil"
    assert found["gpu"]["governor"] == "nvhost_podgov" and found["emc"]["locked"] == 0
    assert found["fan"]["nvfancontrol"] is True and "FAN_DEFAULT_PROFILE quiet" in found["fan"]["conf"]


def test_the_fan_goes_through_nvfancontrol_and_is_handed_back(tmp_path):
    build_tree(tmp_path, "orin-jp6")
    conf = (tmp_path / "etc/nvfancontrol.conf").read_text()
    status = (tmp_path / "var/lib/nvfancontrol/status").read_text()
    b = open_board(tmp_path)
    b.apply_mode(some_mode(b))
    b.apply_mode(b.catalog.maxn)   # once at maximum, later modes leave the daemon alone
    during = (tmp_path / "etc/nvfancontrol.conf").read_text()
    assert f"FAN_DEFAULT_PROFILE {PROFILE}" in during and "FAN_PROFILE quiet {" in during
    assert (tmp_path / "var/lib/nvfancontrol/status").read_text().strip() == f"FAN1:FAN_PROFILE:{PROFILE}"
    assert (tmp_path / FAN_PWM).read_text().strip() == "255"    # set by the daemon, from jetfleet's profile
    assert [c for c in tool_calls(tmp_path) if c.startswith("systemctl") and "is-active" not in c] == [
        "systemctl stop nvfancontrol", "systemctl start nvfancontrol"]
    b.close()
    assert (tmp_path / "etc/nvfancontrol.conf").read_text() == conf
    assert (tmp_path / "var/lib/nvfancontrol/status").read_text() == status
    assert (tmp_path / "run/fake-systemd/nvfancontrol.active").exists()
    assert (tmp_path / FAN_PWM).read_text().strip() == "62"     # the quiet profile's PWM at 45 °C again


def test_without_nvfancontrol_the_pwm_is_written_and_put_back(tmp_path):
    build_tree(tmp_path, "xavier-jp4")
    b = open_board(tmp_path)
    b.apply_mode(some_mode(b))
    assert (tmp_path / FAN_PWM).read_text().strip() == "255"
    assert not [c for c in tool_calls(tmp_path) if c.startswith("systemctl")]
    b.close()
    assert (tmp_path / FAN_PWM).read_text().strip() == "80"


def test_fan_leave_does_not_touch_the_fan(tmp_path):
    build_tree(tmp_path, "orin-jp5")
    b = JetsonBoard(tmp_path, JetsonOptions(fan_max=False, command_path=install_tools(tmp_path)))
    b.apply_mode(some_mode(b))
    assert (tmp_path / FAN_PWM).read_text().strip() == "62"
    assert not [c for c in tool_calls(tmp_path) if c.startswith("systemctl") and "is-active" not in c]


def test_after_a_crash_the_next_start_puts_the_board_back_first(tmp_path):
    build_tree(tmp_path, "orin-jp5")
    before = snapshot(tmp_path)
    crashed = open_board(tmp_path, "nvpmodel")
    crashed.apply_mode(some_mode(crashed))          # ... and the agent dies here: no close()
    assert snapshot(tmp_path) != before
    again = open_board(tmp_path, "nvpmodel")
    assert again.recover() is True
    assert snapshot(tmp_path) == before and not (tmp_path / STATE).exists()
    assert again.recover() is False                 # nothing left to do
    again.close()
    assert snapshot(tmp_path) == before


def test_a_board_that_was_not_changed_is_not_touched_on_close(tmp_path):
    build_tree(tmp_path, "orin-jp6")
    before = snapshot(tmp_path)
    b = open_board(tmp_path, "nvpmodel")
    b.close()
    assert snapshot(tmp_path) == before and tool_calls(tmp_path) == []


def test_a_restore_that_fails_keeps_the_state_file_for_the_next_start(tmp_path, monkeypatch):
    build_tree(tmp_path, "orin-jp5")
    before = snapshot(tmp_path)
    b = open_board(tmp_path, "nvpmodel")
    b.apply_mode(some_mode(b))
    monkeypatch.setenv("FAKE_NVPMODEL_REBOOT", "2")  # nvpmodel wants a reboot to go back to MODE_30W
    with pytest.raises(DeviceError, match=r"could not fully restore the board \(nvpmodel: nvpmodel needs a reboot"):
        b.close()
    assert (tmp_path / STATE).exists()
    monkeypatch.delenv("FAKE_NVPMODEL_REBOOT")
    assert open_board(tmp_path, "nvpmodel").recover() is True
    assert snapshot(tmp_path) == before


def test_a_state_file_that_is_not_jetfleets_is_refused_by_name(tmp_path):
    build_tree(tmp_path, "orin-jp6")
    (tmp_path / "var/lib/jetfleet").mkdir(parents=True)
    (tmp_path / STATE).write_text("not json")
    with pytest.raises(DeviceError, match="found-state.json is not a jetfleet state file"):
        open_board(tmp_path).recover()
