"""Optional telemetry through jetson-stats (``pip install jetfleet[jtop]``; AGPL-3.0, so never a
hard dependency). It needs the jtop root service running; its clients share one sampling
interval (its author advises >= 500 ms), so this source is for boards where the agent must not
read sysfs itself. Its ``avg`` fields are not averages over our window and are ignored: we take
the instantaneous ``power`` of each rail."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from jetfleet.agent.device.base import TelemetrySample
from jetfleet.shared.catalog import Catalog, PowerMode
from jetfleet.shared.errors import DeviceError

MIN_INTERVAL_S = 0.5


def sample_from_jtop(catalog: Catalog, mode: PowerMode, power: Mapping[str, Any],
                     temperature: Mapping[str, Any], t_s: float) -> TelemetrySample:
    """Map jtop's ``jetson.power`` / ``jetson.temperature`` dicts (jetson-stats 4.x) to a sample."""
    labels = set(catalog.rail_labels())
    rails = {name: float(r["power"]) / 1000.0 for name, r in power.get("rail", {}).items()
             if name in labels and r.get("online", True)}
    temps = {name: float(t["temp"]) for name, t in temperature.items()
             if t.get("online", True) and float(t.get("temp", -256)) > -256}
    return TelemetrySample(t_s=t_s, rails_w=rails, total_w=catalog.total_power_w(rails),
                           cpu_mhz=mode.cpu_mhz, gpu_mhz=mode.gpu_mhz, mem_mhz=mode.mem_mhz,
                           cores_online=mode.cores, temps_c=temps)


class JtopTelemetry:
    """Samples through a running jtop service. ``interval_s`` is clamped to >= 0.5 s."""

    def __init__(self, catalog: Catalog, interval_s: float = MIN_INTERVAL_S) -> None:
        try:
            from jtop import jtop  # type: ignore[import-not-found]
        except ImportError:
            raise DeviceError("jetson-stats is not installed: pip install 'jetfleet[jtop]'",
                              field="telemetry") from None
        self.catalog = catalog
        self._jetson = jtop(interval=max(MIN_INTERVAL_S, interval_s))
        self._jetson.start()

    def sample(self, mode: PowerMode) -> TelemetrySample:
        j = self._jetson
        if not j.ok():
            raise DeviceError("the jtop service stopped answering (is jtop.service running?)",
                              field="telemetry")
        return sample_from_jtop(self.catalog, mode, j.power, j.temperature, time.time())

    def close(self) -> None:
        self._jetson.close()
