"""Telemetry through jetson-stats (``--telemetry jtop``; ``pip install jetfleet[jtop]``, AGPL-3.0, so never
a hard dependency). It needs the jtop root service running; its clients share one sampling interval
(its author advises >= 500 ms, so this source samples no faster). Its ``avg`` fields are not averages
over our window and are ignored: each rail's instantaneous ``power`` is taken. Temperatures are
normalised like the sysfs source's; clocks, cores and loads come from jtop's cpu, gpu and memory
readings (jetson-stats 4.x attribute layout)."""

from __future__ import annotations

import re
import time
from typing import Any, Callable, Mapping

from jetfleet.agent.device.base import TelemetrySample
from jetfleet.agent.device.telemetry import TelemetrySource
from jetfleet.agent.device.thermal import OFF_C, normalise
from jetfleet.shared.catalog import Catalog
from jetfleet.shared.errors import DeviceError

MIN_INTERVAL_S = 0.5
JtopFactory = Callable[[float], Any]   # interval (s) -> a jtop client, not yet started


def default_jtop(interval_s: float) -> Any:
    """jetson-stats' client; DeviceError naming the extra to install when it is missing."""
    try:
        from jtop import jtop  # type: ignore[import-not-found]
    except ImportError:
        raise DeviceError("--telemetry jtop needs jetson-stats: pip install 'jetfleet[jtop]' (and its jtop.service)",
                          field="telemetry") from None
    return jtop(interval=interval_s)


def sample_from_jtop(catalog: Catalog, jetson: Any, t_s: float, mem_mhz: float = 0.0) -> TelemetrySample:
    """One sample from a jtop client's ``power``, ``temperature``, ``cpu``, ``gpu`` and ``memory`` readings.

    ``mem_mhz`` is used when jtop has no EMC reading on this board."""
    labels = set(catalog.rail_labels())
    power: Mapping[str, Any] = jetson.power
    rails = {name: float(r["power"]) / 1000.0 for name, r in power.get("rail", {}).items()
             if name in labels and r.get("online", True)}
    temperature: Mapping[str, Any] = jetson.temperature
    temps = normalise((name, float(t.get("temp", OFF_C))) for name, t in temperature.items() if t.get("online", True))
    cores = [c for c in jetson.cpu.get("cpu", []) if c.get("online")]
    cpu_mhz = max((float(c.get("freq", {}).get("cur", 0)) for c in cores), default=0.0) / 1000.0
    idle = [float(c["idle"]) for c in cores if "idle" in c]
    gpus: dict[str, Any] = dict(jetson.gpu)
    gpu: Mapping[str, Any] = next(iter(gpus.values()), {})
    emc = jetson.memory.get("EMC", {})
    return TelemetrySample(
        t_s=t_s, rails_w=rails, total_w=catalog.total_power_w(rails), cpu_mhz=cpu_mhz,
        gpu_mhz=float(gpu.get("freq", {}).get("cur", 0)) / 1000.0,
        mem_mhz=float(emc["cur"]) / 1000.0 if emc.get("online", True) and "cur" in emc else mem_mhz,
        cores_online=len(cores), temps_c=temps,
        cpu_util=(sum(100.0 - i for i in idle) / len(idle) / 100.0) if idle else 0.0,
        gpu_util=float(gpu.get("status", {}).get("load", 0.0)) / 100.0)


_MISMATCH = re.compile(r"service: \[([^\]]*)\] and client: \[([^\]]*)\]")


def start_error(e: Exception) -> DeviceError:
    """Why the jtop client could not start, and what to do. jetson-stats refuses a client whose version differs
    from its root service's (``Mismatch version jtop service: [4.2.7] and client: [4.3.1]``): the agent's venv
    and the system-wide service each have their own copy, so the two drift apart on an upgrade."""
    m = _MISMATCH.search(str(e))
    if m:
        service, client = m.groups()
        return DeviceError(f"jetson-stats {client} in the agent's environment does not match the board's jtop service "
                           f"{service}, and jtop refuses to mix them: install the service's version beside the agent "
                           f"(VENV/bin/pip install 'jetson-stats=={service}'), or move the service to {client} (sudo "
                           f"pip3 install 'jetson-stats=={client}' && sudo systemctl restart jtop.service); or run "
                           "with --telemetry sysfs", field="telemetry")
    return DeviceError(f"the jtop service did not answer ({type(e).__name__}: {str(e)[:200]}): is jetson-stats "
                       "installed system-wide and jtop.service running (sudo systemctl status jtop)? Or run with "
                       "--telemetry sysfs", field="telemetry")


class JtopTelemetry(TelemetrySource):
    """Samples through a running jtop service; its interval is clamped to >= 0.5 s."""

    name = "jtop"

    def __init__(self, catalog: Catalog, *, interval_s: float = MIN_INTERVAL_S, factory: JtopFactory = default_jtop,
                 mem_mhz: Callable[[], float] = lambda: 0.0) -> None:
        self.catalog = catalog
        self.interval_s = max(MIN_INTERVAL_S, interval_s)
        self._mem_mhz = mem_mhz
        self._jetson = factory(self.interval_s)
        try:
            self._jetson.start()
        except Exception as e:  # noqa: BLE001 - jetson-stats raises its own JtopException (not importable here)
            raise start_error(e) from None

    def sample(self) -> TelemetrySample:
        """jtop's latest reading; DeviceError if its service stopped answering."""
        j = self._jetson
        if not j.ok():
            raise DeviceError("the jtop service stopped answering (is jtop.service running?)", field="telemetry")
        return sample_from_jtop(self.catalog, j, time.time(), self._mem_mhz())

    def close(self) -> None:
        """Stop the jtop client."""
        self._jetson.close()
