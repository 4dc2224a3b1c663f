"""The real Jetson backend. Every path is under an injected root, so tests run this code on fixture
trees laid out like a board's /sys, /proc and debugfs.

- cores: ``sys/devices/system/cpu/cpuN/online`` (cpu0 cannot go offline)
- CPU: cpufreq, min = max = target on every online core's policy
- GPU: the devfreq node found by matching its frequency table to the GPU table (its name changes
  between JetPack releases: 17000000.ga10b, 17000000.gpu, 17000000.gv11b), min = max = target
- EMC: BPMP debugfs clock ``sys/kernel/debug/bpmp/debug/clk/emc`` (rate + mrq_rate_locked)
- rails: INA3221 hwmon (``in*_label``, mV x mA), or the older iio layout (``ina3221x``,
  ``rail_name_N``, ``in_power N_input`` mW), filtered by the board model's explicit rail map
- temperatures: thermal zones; GPU load: the devfreq device's ``load`` (per mille)
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import replace
from pathlib import Path

from jetfleet.agent.device.base import BoardInfo, Device, MinibatchCallback, RunResult, TelemetrySample
from jetfleet.agent.device.sysfs import Sysfs, parse_cpu_list
from jetfleet.shared.catalog import Catalog, PowerMode, builtin_catalogs
from jetfleet.shared.errors import DeviceError, InvalidArgument

log = logging.getLogger(__name__)

CPU = "sys/devices/system/cpu"
EMC = "sys/kernel/debug/bpmp/debug/clk/emc"


def detect_model(fs: Sysfs) -> Catalog:
    text = fs.read("proc/device-tree/model")
    for cat in builtin_catalogs().values():
        if any(m.lower() in text.lower() for m in cat.device_tree_match):
            return cat
    known = ", ".join(sorted(builtin_catalogs()))
    raise DeviceError(f"board {text!r} is not a known Jetson model ({known}); add a catalog file",
                      field="board")


class JetsonBoard(Device):
    def __init__(self, root: Path | str = "/", *, fan_max: bool = True) -> None:
        self.fs = Sysfs(root)
        self.fan_max = fan_max
        base = detect_model(self.fs)
        self.cpus = parse_cpu_list(self.fs.read(f"{CPU}/present"))
        self.gpu = self._find_gpu_devfreq(base)
        self.catalog = self._board_catalog(base)
        self.rails = self._find_rails()
        self.thermal_zones = self.fs.glob("sys/class/thermal/thermal_zone*")
        self._prev_stat: list[tuple[int, int]] | None = None

    # --- discovery -------------------------------------------------------------------------------
    def _find_gpu_devfreq(self, base: Catalog) -> str:
        best, best_score = "", 0
        nodes = self.fs.glob("sys/class/devfreq/*")
        for node in nodes:
            if not self.fs.exists(f"{node}/available_frequencies"):
                continue
            mhz = {round(hz / 1e6, 2) for hz in self.fs.read_ints(f"{node}/available_frequencies")}
            score = len(mhz & {round(v, 2) for v in base.gpu_mhz})
            if score > best_score:
                best, best_score = node, score
        if not best:
            names = ", ".join(Path(n).name for n in nodes) or "none"
            raise DeviceError(f"no devfreq node has the {base.model} GPU frequency table (found: {names})",
                              field="gpu_mhz")
        log.info("GPU devfreq node: %s", best)
        return best

    def _board_catalog(self, base: Catalog) -> Catalog:
        """The board's own tables are the truth; presets, rails and grids come from the model."""
        cpu = [khz / 1000.0 for khz in self.fs.read_ints(f"{CPU}/cpu0/cpufreq/scaling_available_frequencies")]
        gpu = [round(hz / 1e6, 3) for hz in self.fs.read_ints(f"{self.gpu}/available_frequencies")]
        mem = list(base.mem_mhz)
        if self.fs.exists(f"{EMC}/possible_rates"):
            mem = [round(hz / 1e6, 1) for hz in self.fs.read_ints(f"{EMC}/possible_rates")]
        cores = list(range(1, len(self.cpus) + 1))
        cat = replace(base, cores=tuple(cores), cpu_mhz=tuple(sorted(cpu)), gpu_mhz=tuple(sorted(gpu)),
                      mem_mhz=tuple(sorted(mem)))
        if cat.size != base.size:
            log.warning("board tables differ from the %s catalog: %d modes here, %d built in",
                        base.model, cat.size, base.size)
        presets = {}
        for name, mode in base.presets.items():
            try:
                presets[name] = cat.validate(mode)
            except InvalidArgument:  # a preset this board cannot run is left out, not guessed
                log.warning("preset %s (%s) is not available on this board", name, mode)
        grids = {g: {k: tuple(v for v in vals if v in cat.knob_values(k)) for k, vals in spec.items()}
                 for g, spec in base.grid_specs.items()}
        return replace(cat, presets=presets, grid_specs=grids)

    def _find_rails(self) -> dict[str, tuple[str, str | None]]:
        """label -> (power or voltage file, current file or None for an iio mW file)."""
        wanted = set(self.catalog.rail_labels())
        found: dict[str, tuple[str, str | None]] = {}
        for label_file in self.fs.glob("sys/bus/i2c/drivers/ina3221/*/hwmon/hwmon*/in*_label"):
            label = self.fs.read(label_file)
            n = re.search(r"in(\d+)_label$", label_file)
            if label in wanted and n:
                d = str(Path(label_file).parent)
                found[label] = (f"{d}/in{n.group(1)}_input", f"{d}/curr{n.group(1)}_input")
        for name_file in self.fs.glob("sys/bus/i2c/drivers/ina3221x/*/iio:device*/rail_name_*"):
            label = self.fs.read(name_file)
            channel = name_file.rsplit("_", 1)[1]
            if label in wanted:
                found[label] = (f"{Path(name_file).parent}/in_power{channel}_input", None)
        missing = wanted - set(found)
        if missing:
            log.warning("rails of %s not found on this board: %s", self.catalog.model, ", ".join(sorted(missing)))
        return found

    # --- Device ------------------------------------------------------------------------------------
    def describe(self) -> BoardInfo:
        sw = {"kernel": self.fs.read("proc/sys/kernel/osrelease")}
        if self.fs.exists("etc/nv_tegra_release"):
            m = re.search(r"R(\d+).*REVISION:\s*([\d.]+)", self.fs.read("etc/nv_tegra_release"))
            if m:
                sw["l4t"] = f"{m.group(1)}.{m.group(2)}"
        serial = self.fs.read("proc/device-tree/serial-number") if self.fs.exists(
            "proc/device-tree/serial-number") else "unknown"
        return BoardInfo(self.catalog.model, serial, sw, self.catalog, emulated=False)

    def _online(self) -> list[int]:
        return [c for c in self.cpus
                if not self.fs.exists(f"{CPU}/cpu{c}/online") or self.fs.read_int(f"{CPU}/cpu{c}/online") == 1]

    def _pinned(self, lo: str, hi: str, cur: str) -> int:
        a, b = self.fs.read_int(lo), self.fs.read_int(hi)
        return a if a == b else self.fs.read_int(cur)

    def read_mode(self) -> PowerMode:
        online = self._online()
        c0 = f"{CPU}/cpu{online[0]}/cpufreq"
        cpu_khz = self._pinned(f"{c0}/scaling_min_freq", f"{c0}/scaling_max_freq", f"{c0}/scaling_cur_freq")
        gpu_hz = self._pinned(f"{self.gpu}/min_freq", f"{self.gpu}/max_freq", f"{self.gpu}/cur_freq")
        emc_hz = self.fs.read_int(f"{EMC}/rate")
        mem = _snap(emc_hz / 1e6, self.catalog.mem_mhz)
        return PowerMode(len(online), cpu_khz / 1000.0, round(gpu_hz / 1e6, 3), mem)

    def _write_mode(self, mode: PowerMode) -> None:
        extra = [c for c in self.cpus if c != 0]
        want_online = set(self.cpus[: mode.cores])
        cpu_khz = int(round(mode.cpu_mhz * 1000))
        gpu_hz = self._table_value(f"{self.gpu}/available_frequencies", mode.gpu_mhz * 1e6, "gpu_mhz")
        cpu_khz = self._table_value(f"{CPU}/cpu0/cpufreq/scaling_available_frequencies", cpu_khz, "cpu_mhz")
        # Pre-flight: everything we will write exists and is writable, before the first write.
        targets = [f"{CPU}/cpu{c}/online" for c in extra]
        targets += [f"{CPU}/cpu{c}/cpufreq/scaling_{w}_freq" for c in sorted(want_online) for w in ("min", "max")]
        targets += [f"{self.gpu}/min_freq", f"{self.gpu}/max_freq", f"{EMC}/rate", f"{EMC}/mrq_rate_locked"]
        for t in targets:
            self.fs.check_writable(t)
        fan = self.fs.glob("sys/devices/platform/pwm-fan/hwmon/hwmon*/pwm1") if self.fan_max else []
        for c in extra:  # bring cores up first so their policies can be pinned
            if c in want_online:
                self.fs.write(f"{CPU}/cpu{c}/online", 1)
        for c in sorted(want_online):
            self._pin(f"{CPU}/cpu{c}/cpufreq/scaling_min_freq", f"{CPU}/cpu{c}/cpufreq/scaling_max_freq", cpu_khz)
        for c in extra:
            if c not in want_online:
                self.fs.write(f"{CPU}/cpu{c}/online", 0)
        self._pin(f"{self.gpu}/min_freq", f"{self.gpu}/max_freq", gpu_hz)
        self.fs.write(f"{EMC}/mrq_rate_locked", 1)
        self.fs.write(f"{EMC}/rate", int(round(mode.mem_mhz * 1e6)))
        for f in fan:
            self.fs.write(f, 255)  # the papers ran with the fan at maximum

    def _table_value(self, table: str, target: float, knob: str) -> int:
        values = self.fs.read_ints(table)
        best = min(values, key=lambda v: abs(v - target))
        if abs(best - target) > max(1.0, target * 1e-4):
            raise DeviceError(f"{knob} {target} is not in the board's table {table}", field=knob)
        return best

    def _pin(self, lo: str, hi: str, value: int) -> None:
        """min = max = value, in the order the kernel accepts (never min > max)."""
        if value >= self.fs.read_int(lo):
            self.fs.write(hi, value)
            self.fs.write(lo, value)
        else:
            self.fs.write(lo, value)
            self.fs.write(hi, value)

    def sample(self) -> TelemetrySample:
        rails: dict[str, float] = {}
        for label, (a, b) in self.rails.items():
            rails[label] = (self.fs.read_int(a) * self.fs.read_int(b) / 1e6) if b else self.fs.read_int(a) / 1e3
        temps = {}
        for zone in self.thermal_zones:
            try:
                temps[self.fs.read(f"{zone}/type")] = self.fs.read_int(f"{zone}/temp") / 1000.0
            except DeviceError:
                continue  # some zones refuse reads while their sensor is off
        online = self._online()
        load = f"{self.gpu}/device/load"
        return TelemetrySample(
            t_s=time.time(), rails_w=rails, total_w=self.catalog.total_power_w(rails),
            cpu_mhz=self.fs.read_int(f"{CPU}/cpu{online[0]}/cpufreq/scaling_cur_freq") / 1000.0,
            gpu_mhz=self.fs.read_int(f"{self.gpu}/cur_freq") / 1e6,
            mem_mhz=self.fs.read_int(f"{EMC}/rate") / 1e6, cores_online=len(online), temps_c=temps,
            cpu_util=self._cpu_util(), gpu_util=self.fs.read_int(load) / 1000.0 if self.fs.exists(load) else 0.0)

    def _cpu_util(self) -> float:
        if not self.fs.exists("proc/stat"):
            return 0.0
        now: list[tuple[int, int]] = []
        for line in self.fs.read("proc/stat").splitlines():
            if re.match(r"cpu\d+ ", line):
                v = [int(x) for x in line.split()[1:]]
                idle = v[3] + (v[4] if len(v) > 4 else 0)
                now.append((sum(v), idle))
        prev, self._prev_stat = self._prev_stat, now
        if not prev or len(prev) != len(now):
            return 0.0
        busy = [1.0 - (i1 - i0) / (t1 - t0) for (t0, i0), (t1, i1) in zip(prev, now, strict=True) if t1 > t0]
        return sum(busy) / len(busy) if busy else 0.0

    def run_minibatches(self, workload: str, n: int, *, minibatch_size: int = 16, workers: int = 4,
                        on_minibatch: MinibatchCallback | None = None) -> RunResult:
        from jetfleet.agent.workloads.training import run_training  # torch only when training

        start = time.time()
        times = run_training(workload, n, minibatch_size=minibatch_size, workers=workers,
                             on_minibatch=on_minibatch)
        return RunResult(workload, times, start, time.time())


def _snap(value: float, table: tuple[float, ...]) -> float:
    """EMC rates read back as e.g. 3199000000 or 665600000 Hz: map to the table's MHz value."""
    best = min(table, key=lambda v: abs(v - value))
    return best if abs(best - value) < 0.5 else round(value, 1)
