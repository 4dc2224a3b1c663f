"""The real Jetson backend. Every path is under an injected root, so tests run this code on fixture
trees laid out like a board's /sys, /proc, /etc and debugfs, with fake nvpmodel/systemctl programs.

- cores: ``sys/devices/system/cpu/cpuN/online`` (cpu0 cannot go offline)
- CPU: cpufreq, min = max = target on every online core's policy
- GPU: the devfreq node found by matching its frequency table to the GPU table (its name changes
  between JetPack releases: 17000000.ga10b, 17000000.gpu, 17000000.gv11b), min = max = target
- EMC: BPMP debugfs clock ``sys/kernel/debug/bpmp/debug/clk/emc`` (rate + mrq_rate_locked)
- two routes to a mode: ``sysfs`` writes the nodes above directly; ``nvpmodel`` (the papers' route)
  first enters a custom nvpmodel block, or NVIDIA's own preset when one was asked for by name, then
  pins the clocks the same way (``nvpmodel.py``)
- presets: the board's own nvpmodel.conf names them (MODE_30W, MAXN, ...); without one, the catalog's
- fan at maximum while measuring, through nvfancontrol where it runs (``fan.py``)
- the state found before the first change is restored on close and after a crash (``restore.py``)
- telemetry from sysfs or jetson-stats (``telemetry.py``, ``jtop_source.py``)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from jetfleet.agent.device.base import (
    BoardInfo,
    ConcurrentSteps,
    Device,
    KernelRun,
    MinibatchCallback,
    RunResult,
    TelemetrySample,
)
from jetfleet.agent.device.fan import Fan
from jetfleet.agent.device.jtop_source import JtopFactory, JtopTelemetry, default_jtop
from jetfleet.agent.device.nvpmodel import PAPERS_ID, NvpModel, preset_mode
from jetfleet.agent.device.restore import FoundState
from jetfleet.agent.device.software import board_software
from jetfleet.agent.device.sysfs import Sysfs, parse_cpu_list
from jetfleet.agent.device.system import SystemCommands
from jetfleet.agent.device.telemetry import SysfsTelemetry, TelemetrySource
from jetfleet.shared import defaults
from jetfleet.shared.catalog import Catalog, PowerMode, builtin_catalogs
from jetfleet.shared.errors import DeviceError, InvalidArgument

log = logging.getLogger(__name__)

CPU = "sys/devices/system/cpu"
EMC = "sys/kernel/debug/bpmp/debug/clk/emc"
ROUTES = ("sysfs", "nvpmodel")
TELEMETRY = ("sysfs", "jtop")


@dataclass(frozen=True)
class JetsonOptions:
    """How the agent drives a real board; built once by the CLI. Paths are relative to the board's root."""

    route: str = "sysfs"                       # how a mode is set: sysfs, or nvpmodel (the papers' way)
    telemetry: str = "sysfs"                   # where samples come from: sysfs, or jtop (jetson-stats)
    fan_max: bool = True                       # fan at maximum while modes are set (the papers' protocol)
    state_dir: str = "var/lib/jetfleet"        # the found-state file and the nvpmodel.conf copy (absolute: on this
                                               # machine; relative: under the board's root)
    nvpmodel_conf: str = "etc/nvpmodel.conf"   # the board's own file: read, never written
    custom_mode_id: int = PAPERS_ID            # the custom block's ID (the next free one if a preset has it)
    command_path: str | None = None         # PATH for nvpmodel/systemctl (None: the agent's own)
    command_timeout_s: float = 60.0
    jtop_interval_s: float = 0.5

    def check(self) -> None:
        """InvalidArgument naming the option that is not allowed."""
        if self.route not in ROUTES:
            raise InvalidArgument(f"route {self.route!r}: expected one of {', '.join(ROUTES)}", field="route")
        if self.telemetry not in TELEMETRY:
            raise InvalidArgument(f"telemetry {self.telemetry!r}: expected one of {', '.join(TELEMETRY)}",
                                  field="telemetry")
        if not 0 < self.custom_mode_id < 1000:
            raise InvalidArgument("custom_mode_id must be 1..999", field="custom_mode_id")


def detect_model(fs: Sysfs) -> Catalog:
    """The built-in catalog whose device-tree match is in ``/proc/device-tree/model``; DeviceError if none is."""
    text = fs.read("proc/device-tree/model")
    # The longest match wins, so a "Jetson Orin Nano" is never taken for a "Jetson Nano".
    hits = [(len(m), cat.model) for cat in builtin_catalogs().values() for m in cat.device_tree_match
            if m.lower() in text.lower()]
    if hits:
        return builtin_catalogs()[max(hits)[1]]
    known = ", ".join(sorted(builtin_catalogs()))
    raise DeviceError(f"board {text!r} is not a known Jetson model ({known}); add a catalog file",
                      field="board")


class JetsonBoard(Device):
    """A real Jetson under ``root``; its catalog is the board's own tables and its presets its own nvpmodel.conf."""

    def __init__(self, root: Path | str = "/", options: JetsonOptions = JetsonOptions(), *,
                 jtop_factory: JtopFactory | None = None, plugins: Mapping[str, Any] | None = None) -> None:
        options.check()
        self.options = options
        self.plugins = dict(plugins or {})   # workload plugins installed on this board, by name
        self.fs = Sysfs(root)
        self.commands = SystemCommands(path=options.command_path, timeout_s=options.command_timeout_s)
        base = detect_model(self.fs)
        self.cpus = parse_cpu_list(self.fs.read(f"{CPU}/present"))
        self.gpu = self._find_gpu_devfreq(base)
        state = Path(options.state_dir) if Path(options.state_dir).is_absolute() else self.fs.path(options.state_dir)
        self.nvpmodel = NvpModel(self.fs, self.commands, conf_rel=options.nvpmodel_conf,
                                 copy=state / "nvpmodel.conf", custom_id=options.custom_mode_id)
        if options.route == "nvpmodel" and not self.nvpmodel.installed:
            raise DeviceError(f"--route nvpmodel needs nvpmodel on PATH and {self.fs.path(options.nvpmodel_conf)}; "
                              "this board has not both (use --route sysfs)", field="route")
        self.catalog = self._board_catalog(base)
        self.fan = Fan(self.fs, self.commands)
        self.found = FoundState(self.fs, self.cpus, self.gpu, self.fan, self.nvpmodel,
                                state_file=state / "found-state.json")
        self.telemetry: TelemetrySource = SysfsTelemetry(self.fs, self.catalog, self.cpus, self.gpu)
        if options.telemetry == "jtop":
            self.telemetry = JtopTelemetry(self.catalog, interval_s=options.jtop_interval_s,
                                           factory=jtop_factory or default_jtop,
                                           mem_mhz=lambda: self.fs.read_int(f"{EMC}/rate") / 1e6)
        self._info: BoardInfo | None = None

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
        """The board's own tables are the truth; rails and grids come from the model, presets from nvpmodel.conf."""
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
        conf = self.nvpmodel.conf
        if conf is not None:  # NVIDIA's names and values, as this board's nvpmodel means them
            presets = {m.name: preset_mode(m, conf, cat) for m in conf.models}
        else:
            presets = {}
            for name, mode in base.presets.items():
                try:
                    presets[name] = cat.validate(mode)
                except InvalidArgument:  # a preset this board cannot run is left out, not guessed
                    log.warning("preset %s (%s) is not available on this board", name, mode)
        grids = {g: {k: tuple(v for v in vals if v in cat.knob_values(k)) for k, vals in spec.items()}
                 for g, spec in base.grid_specs.items()}
        return replace(cat, presets=presets, grid_specs=grids)

    # --- Device ------------------------------------------------------------------------------------
    def describe(self) -> BoardInfo:
        """Model, serial (``unknown`` if the device tree has none), kernel, L4T, JetPack, CUDA, torch and jetfleet
        versions, and the board's catalog."""
        if self._info is None:
            serial = self.fs.read("proc/device-tree/serial-number") if self.fs.exists(
                "proc/device-tree/serial-number") else "unknown"
            self._info = BoardInfo(self.catalog.model, serial, board_software(self.fs), self.catalog, emulated=False)
        return self._info

    def recover(self) -> bool:
        """At start: put the board back if a previous agent crashed after changing it. True if it did."""
        return self.found.recover()

    def _online(self) -> list[int]:
        return [c for c in self.cpus
                if not self.fs.exists(f"{CPU}/cpu{c}/online") or self.fs.read_int(f"{CPU}/cpu{c}/online") == 1]

    def _clock_mhz(self, node: str, lo: str, hi: str, cur: str, per_mhz: float, table: tuple[float, ...]) -> float:
        """A clock as the board runs it, as a value of its table: the pinned value when min = max is a table
        value, else the current frequency (a preset caps a clock between table values, and the kernel then
        runs it at a table value below the cap), snapped to the nearest table value."""
        a, b = self.fs.read_int(f"{node}/{lo}"), self.fs.read_int(f"{node}/{hi}")
        if a == b and any(abs(v - a / per_mhz) < 1e-3 for v in table):
            return a / per_mhz
        value = self.fs.read_int(f"{node}/{cur}") / per_mhz
        return min(table, key=lambda v: abs(v - value))

    def read_mode(self) -> PowerMode:
        """The mode read back from the board: online cores, CPU and GPU clocks (pinned, else current), EMC rate."""
        online = self._online()
        cpu = self._clock_mhz(f"{CPU}/cpu{online[0]}/cpufreq", "scaling_min_freq", "scaling_max_freq",
                              "scaling_cur_freq", 1e3, self.catalog.cpu_mhz)
        gpu = self._clock_mhz(self.gpu, "min_freq", "max_freq", "cur_freq", 1e6, self.catalog.gpu_mhz)
        mem = _snap(self.fs.read_int(f"{EMC}/rate") / 1e6, self.catalog.mem_mhz)
        return PowerMode(len(online), cpu, gpu, mem)

    def _write_mode(self, mode: PowerMode) -> None:
        self._apply(mode, "")

    def _write_preset(self, name: str, mode: PowerMode) -> None:
        self._apply(mode, name)

    def _apply(self, mode: PowerMode, preset: str) -> None:
        extra = [c for c in self.cpus if c != 0]
        want_online = set(self.cpus[: mode.cores])
        gpu_hz = self._table_value(f"{self.gpu}/available_frequencies", mode.gpu_mhz * 1e6, "gpu_mhz")
        cpu_khz = self._table_value(f"{CPU}/cpu0/cpufreq/scaling_available_frequencies", mode.cpu_mhz * 1000, "cpu_mhz")
        # Pre-flight: everything we will write exists and is writable, before the first write.
        targets = [f"{CPU}/cpu{c}/online" for c in extra]
        targets += [f"{CPU}/cpu{c}/cpufreq/scaling_{w}_freq" for c in sorted(want_online) for w in ("min", "max")]
        targets += [f"{self.gpu}/min_freq", f"{self.gpu}/max_freq", f"{EMC}/rate", f"{EMC}/mrq_rate_locked"]
        for t in targets:
            self.fs.check_writable(t)
        found = self.found.before_change()
        if self.options.route == "nvpmodel":
            conf = self.nvpmodel.conf
            named = conf.by_name(preset) if conf is not None and preset else None
            if named is not None:
                self.nvpmodel.set_preset(named.id)       # NVIDIA's block, TPC gating and engine caps included
            else:
                top = max(self.catalog.mem_mhz)
                self.nvpmodel.set_custom(mode, len(self.cpus),
                                         emc_hz=0 if mode.mem_mhz == top else int(round(mode.mem_mhz * 1e6)))
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
        if self.options.fan_max:
            self.fan.to_max(found["fan"])  # the papers ran with the fan at maximum

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
        """A sample from the telemetry source (sysfs, or jtop)."""
        return self.telemetry.sample()

    def run_minibatches(self, workload: str, n: int, *, minibatch_size: int = defaults.MINIBATCH_SIZE,
                        workers: int = defaults.WORKERS, on_minibatch: MinibatchCallback | None = None) -> RunResult:
        """Train with torch on this board (torch is imported only now); ``start_s`` and ``end_s`` are wall-clock times."""
        from jetfleet.agent.workloads.training import run_training  # torch only when training

        start = time.time()
        times = run_training(workload, n, minibatch_size=minibatch_size, workers=workers,
                             on_minibatch=on_minibatch, plugin=self.plugins.get(workload))
        return RunResult(workload, times, start, time.time())

    def run_kernel(self, kernel: str, seconds: float) -> KernelRun:
        """A roofline micro-benchmark with torch on this board's GPU (torch is imported only now)."""
        from jetfleet.agent.workloads.ert import run

        if kernel not in ("idle", "compute", "memory"):
            raise InvalidArgument(f"kernel {kernel[:32]!r} is not one of idle, compute, memory", field="kernel")
        try:
            flops, nbytes, start, end = run(kernel, seconds)
        except RuntimeError as e:
            raise DeviceError(f"roofline {kernel} kernel failed: {e}", field="kernel") from e
        return KernelRun(kernel, flops, nbytes, start, end, "torch-cuda")

    def run_inference(self, workload: str, n: int, *, batch_size: int = 1,
                      on_batch: MinibatchCallback | None = None) -> RunResult:
        """Serve ``n`` batches with torch on this board (eval mode, no_grad); each entry is one batch's latency."""
        from jetfleet.agent.workloads.inference import run_inference  # torch only when serving

        start = time.time()
        times = run_inference(workload, n, batch_size=batch_size, on_batch=on_batch,
                              plugin=self.plugins.get(workload))
        return RunResult(workload, times, start, time.time())

    def open_concurrent(self, training: str, inference: str, *, minibatch_size: int = defaults.MINIBATCH_SIZE,
                        workers: int = defaults.WORKERS) -> ConcurrentSteps:
        """Real torch on this board: a training session and a loaded inference model, stepped one at a time."""
        from jetfleet.agent.workloads.concurrent import TorchConcurrentSteps  # torch only when serving

        return TorchConcurrentSteps(training, inference, minibatch_size=minibatch_size, workers=workers,
                                    plugins=self.plugins)

    def close(self) -> None:
        """Stop the telemetry source and put the board back as it was found (DeviceError if that failed)."""
        try:
            self.telemetry.close()
        finally:
            self.found.restore()


def _snap(value: float, table: tuple[float, ...]) -> float:
    """EMC rates read back as e.g. 3199000000 or 665600000 Hz: map to the table's MHz value."""
    best = min(table, key=lambda v: abs(v - value))
    return best if abs(best - value) < 0.5 else round(value, 1)
