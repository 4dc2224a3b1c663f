"""Telemetry sources of a real board: its own sysfs (the default) or jetson-stats (``--telemetry jtop``).

Both give the same TelemetrySample: rails of the board's rail map in W, clocks in MHz, online cores,
temperatures normalised like jtop's (``thermal.py``), CPU and GPU load."""

from __future__ import annotations

import abc
import logging
import re
import time
from pathlib import Path

from jetfleet.agent.device.base import TelemetrySample
from jetfleet.agent.device.sysfs import Sysfs
from jetfleet.agent.device.thermal import normalise
from jetfleet.shared.catalog import Catalog
from jetfleet.shared.errors import DeviceError

log = logging.getLogger(__name__)

CPU = "sys/devices/system/cpu"
EMC = "sys/kernel/debug/bpmp/debug/clk/emc"


class TelemetrySource(abc.ABC):
    """Where a real board's samples come from."""

    name = "sysfs"

    @abc.abstractmethod
    def sample(self) -> TelemetrySample:
        """Read the sensors now."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the source (a jtop client, file handles)."""


def find_rails(fs: Sysfs, catalog: Catalog) -> dict[str, tuple[str, str | None]]:
    """label -> (power or voltage file, current file or None for an iio mW file), for the rails of the rail map."""
    wanted = set(catalog.rail_labels())
    found: dict[str, tuple[str, str | None]] = {}
    for label_file in fs.glob("sys/bus/i2c/drivers/ina3221/*/hwmon/hwmon*/in*_label"):
        label = fs.read(label_file)
        n = re.search(r"in(\d+)_label$", label_file)
        if label in wanted and n:
            d = str(Path(label_file).parent)
            found[label] = (f"{d}/in{n.group(1)}_input", f"{d}/curr{n.group(1)}_input")
    for name_file in fs.glob("sys/bus/i2c/drivers/ina3221x/*/iio:device*/rail_name_*"):
        label = fs.read(name_file)
        channel = name_file.rsplit("_", 1)[1]
        if label in wanted:
            found[label] = (f"{Path(name_file).parent}/in_power{channel}_input", None)
    missing = wanted - set(found)
    if missing:
        log.warning("rails of %s not found on this board: %s", catalog.model, ", ".join(sorted(missing)))
    return found


class SysfsTelemetry(TelemetrySource):
    """Samples INA3221 rails, clocks, cores, thermal zones and loads straight from sysfs and procfs.

    Every path is resolved once, when the source is built (the files a board exposes do not come and go;
    a CPU's ``online`` file exists or not for good): a sample is one open/read/close per file."""

    def __init__(self, fs: Sysfs, catalog: Catalog, cpus: list[int], gpu_node: str) -> None:
        self.fs, self.catalog, self.cpus, self.gpu = fs, catalog, cpus, gpu_node
        self.rails = find_rails(fs, catalog)
        self.thermal_zones = fs.glob("sys/class/thermal/thermal_zone*")
        self._prev_stat: list[tuple[int, int]] | None = None
        at = fs.locate
        # (label, (path, rel), (path, rel) or None): the rail's power/voltage file and its current file
        self._rails = [(label, (at(a), a), (at(b), b) if b else None) for label, (a, b) in self.rails.items()]
        # (cpu, its online file or None: cpu0 has none, it is always up), its scaling_cur_freq
        self._online = [(c, (at(f"{CPU}/cpu{c}/online"), f"{CPU}/cpu{c}/online")
                         if fs.exists(f"{CPU}/cpu{c}/online") else None) for c in cpus]
        self._freq = {c: (at(f"{CPU}/cpu{c}/cpufreq/scaling_cur_freq"), f"{CPU}/cpu{c}/cpufreq/scaling_cur_freq")
                      for c in cpus}
        self._gpu_freq = (at(f"{gpu_node}/cur_freq"), f"{gpu_node}/cur_freq")
        self._emc = (at(f"{EMC}/rate"), f"{EMC}/rate")
        load = f"{gpu_node}/device/load"
        self._gpu_load = (at(load), load) if fs.exists(load) else None
        self._stat = at("proc/stat") if fs.exists("proc/stat") else None
        self._zones = [(zone, (at(f"{zone}/temp"), f"{zone}/temp")) for zone in self.thermal_zones]
        self._zone_types: dict[str, str] = {}   # read once each (a zone may refuse reads while its sensor is off)

    def files(self) -> list[str]:
        """The files one sample reads (the first online CPU's clock included), for comparing with plain reads."""
        out = [p for _, a, b in self._rails for p in ([a[0], b[0]] if b else [a[0]])]
        out += [f[0] for _, f in self._online if f is not None]
        out += [self._freq[self.online()[0]][0], self._gpu_freq[0], self._emc[0]]
        out += [t[0] for _, t in self._zones]
        out += [self._gpu_load[0]] if self._gpu_load else []
        out += [self._stat] if self._stat else []
        return out

    def online(self) -> list[int]:
        """The CPUs online now (cpu0 has no ``online`` file: it is always up)."""
        read = self.fs.read_int_at
        return [c for c, f in self._online if f is None or read(*f) == 1]

    def temperatures(self) -> dict[str, float]:
        """Thermal zones in °C by normalised name, off sensors and PMIC readings left out."""
        raw = []
        for zone, temp in self._zones:
            try:
                kind = self._zone_types.get(zone)
                if kind is None:
                    kind = self._zone_types[zone] = self.fs.read(f"{zone}/type")
                raw.append((kind, self.fs.read_int_at(*temp) / 1000.0))
            except DeviceError:
                continue  # some zones refuse reads while their sensor is off
        return normalise(raw)

    def sample(self) -> TelemetrySample:
        """Rails (W), clocks (MHz), cores, temperatures (°C), loads (CPU: since the last call, 0 on the first)."""
        read = self.fs.read_int_at
        rails: dict[str, float] = {}
        for label, a, b in self._rails:
            rails[label] = (read(*a) * read(*b) / 1e6) if b else read(*a) / 1e3
        online = self.online()
        return TelemetrySample(
            t_s=time.time(), rails_w=rails, total_w=self.catalog.total_power_w(rails),
            cpu_mhz=read(*self._freq[online[0]]) / 1000.0, gpu_mhz=read(*self._gpu_freq) / 1e6,
            mem_mhz=read(*self._emc) / 1e6, cores_online=len(online), temps_c=self.temperatures(),
            cpu_util=self._cpu_util(), gpu_util=read(*self._gpu_load) / 1000.0 if self._gpu_load else 0.0)

    def _cpu_util(self) -> float:
        if self._stat is None:
            return 0.0
        try:
            with open(self._stat, "rb") as f:
                text = f.read().decode(errors="replace")
        except OSError:
            text = self.fs.read("proc/stat")   # its error names the file
        now: list[tuple[int, int]] = []
        for line in text.splitlines():
            if line.startswith("cpu") and line[3:4].isdigit():
                v = [int(x) for x in line.split()[1:]]
                idle = v[3] + (v[4] if len(v) > 4 else 0)
                now.append((sum(v), idle))
        prev, self._prev_stat = self._prev_stat, now
        if not prev or len(prev) != len(now):
            return 0.0
        busy = [1.0 - (i1 - i0) / (t1 - t0) for (t0, i0), (t1, i1) in zip(prev, now) if t1 > t0]
        return sum(busy) / len(busy) if busy else 0.0
