"""``--telemetry jtop``: the real board samples through a jetson-stats client. jetson-stats is AGPL and
needs its root service, so the client here is a fake with jetson-stats 4.x's attributes (power,
temperature, cpu, gpu, memory; ok/start/close), fed from the fixture tree's values."""

from __future__ import annotations

import pytest

from jetfleet.agent.device.jetson import JetsonBoard, JetsonOptions
from jetfleet.agent.device.jtop_source import default_jtop, sample_from_jtop
from jetfleet.shared.catalog import get_catalog
from jetfleet.shared.errors import DeviceError

from .jetson_trees import build_tree, install_tools

pytestmark = pytest.mark.boards


class FakeJtop:
    """What a jetson-stats 4.x client exposes, for an Orin Nano at 15W running a training step."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.started = self.closed = False
        self.alive = True
        self.power = {"rail": {"VDD_IN": {"volt": 5000, "curr": 1400, "power": 7000, "online": True, "avg": 1},
                               "VDD_SOC": {"volt": 5000, "curr": 300, "power": 1500, "online": True, "avg": 1},
                               "VDD_CPU_GPU_CV": {"power": 1800, "online": False}},   # an offline sensor
                      "tot": {"power": 7000, "avg": 6900, "name": "VDD_IN"}}
        self.temperature = {"CPU": {"temp": 47.0, "online": True}, "GPU": {"temp": 46.5, "online": True},
                            "CV0": {"temp": -256.0, "online": False}, "SOC0": {"temp": 46.0, "online": True},
                            "Tj": {"temp": 47.5, "online": True}, "PMIC": {"temp": 100.0, "online": True}}
        self.cpu = {"total": {}, "cpu": [{"online": True, "freq": {"min": 115200, "max": 1510400, "cur": 1510400},
                                          "idle": 40.0} for _ in range(4)]
                    + [{"online": False, "freq": {}} for _ in range(2)]}
        self.gpu = {"gpu": {"type": "integrated", "status": {"load": 45.0}, "freq": {"cur": 624750}}}
        self.memory = {"RAM": {}, "EMC": {"online": True, "cur": 2133000, "val": 12}}

    def start(self) -> None:
        self.started = True

    def ok(self) -> bool:
        return self.alive

    def close(self) -> None:
        self.closed = True


def test_a_jtop_reading_maps_to_a_sample_like_the_sysfs_one():
    cat = get_catalog("orin-nano")
    s = sample_from_jtop(cat, FakeJtop(0.5), 3.0)
    assert s.rails_w == {"VDD_IN": 7.0, "VDD_SOC": 1.5} and s.total_w == 7.0   # instant power, not jtop's "avg"
    assert s.temps_c == {"cpu": 47.0, "gpu": 46.5, "soc0": 46.0, "tj": 47.5}     # off CV0 and the PMIC left out
    assert (s.cores_online, s.cpu_mhz, s.gpu_mhz, s.mem_mhz) == (4, 1510.4, 624.75, 2133.0)
    assert s.cpu_util == pytest.approx(0.6) and s.gpu_util == pytest.approx(0.45)


def test_the_board_samples_through_jtop_when_asked(tmp_path):
    build_tree(tmp_path, "orin-nano-jp6")
    made = []

    def factory(interval_s):
        made.append(FakeJtop(interval_s))
        return made[0]

    b = JetsonBoard(tmp_path, JetsonOptions(telemetry="jtop", jtop_interval_s=0.1,
                                            command_path=install_tools(tmp_path)), jtop_factory=factory)
    assert made[0].interval == 0.5 and made[0].started          # clamped to jtop's shared interval
    s = b.sample()
    assert s.rails_w["VDD_IN"] == 7.0 and s.temps_c["cpu"] == 47.0
    made[0].memory = {}                                          # a board where jtop has no EMC reading
    assert b.sample().mem_mhz == 2133.0                          # the EMC clock from sysfs instead
    made[0].alive = False
    with pytest.raises(DeviceError, match="jtop service stopped answering"):
        b.sample()
    b.close()
    assert made[0].closed


def test_without_jetson_stats_the_error_names_the_extra(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_jtop(name, *args, **kwargs):
        if name == "jtop":
            raise ImportError("No module named 'jtop'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_jtop)
    with pytest.raises(DeviceError, match=r"pip install 'jetfleet\[jtop\]'"):
        default_jtop(0.5)


class JtopException(Exception):
    """jetson-stats' own error type (jtop.core.exceptions.JtopException)."""


@pytest.mark.parametrize("message,needles", [
    ("Mismatch version jtop service: [4.2.7] and client: [4.3.1]. Please run:\n\nsudo systemctl restart jtop.service",
     ["jetson-stats 4.3.1 in the agent's environment", "jtop service 4.2.7", "pip install 'jetson-stats==4.2.7'"]),
    ("The jtop.service is not active. Please run:\nsudo systemctl start jtop.service",
     ["jtop service did not answer", "is not active", "--telemetry sysfs"]),
])
def test_a_jtop_client_that_cannot_start_says_why_and_what_to_do(tmp_path, message, needles):
    build_tree(tmp_path, "orin-nano-jp6")

    class Refusing(FakeJtop):
        def start(self) -> None:
            raise JtopException(message)

    with pytest.raises(DeviceError) as e:
        JetsonBoard(tmp_path, JetsonOptions(telemetry="jtop", command_path=install_tools(tmp_path)),
                    jtop_factory=Refusing)
    assert e.value.field == "telemetry" and all(n in e.value.message for n in needles), e.value.message
