"""The nvpmodel route, the way the papers set a power mode, and the board's own named presets.

A board's ``/etc/nvpmodel.conf`` declares its knobs (``< PARAM TYPE=CLOCK NAME=CPU_A78_0 >`` with the
sysfs files behind them) and NVIDIA's power modes (``< POWER_MODEL ID=2 NAME=MODE_30W >`` blocks of
``PARAM ARG VALUE`` lines). jetfleet reads the presets from there, so ``MODE_30W`` means on each board
what nvpmodel means by it, and sets any other mode as the papers did: a custom block (cores online,
TPC power gating off, per-cluster CPU min = max, GPU min = max, EMC max, DLA/PVA unrestricted) in a
copy of the board's file, ``nvpmodel -f COPY -m ID``, then pins the clocks through sysfs. The
board's own file is never written.

Units as in nvpmodel.conf: CPU clocks in kHz, GPU, EMC and engine clocks in Hz; ``-1`` (or 2^31 - 1)
means no limit, and ``EMC MAX_FREQ 0`` means the highest EMC rate."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from jetfleet.agent.device.sysfs import Sysfs
from jetfleet.agent.device.system import SystemCommands
from jetfleet.shared.catalog import Catalog, PowerMode
from jetfleet.shared.errors import DeviceError

log = logging.getLogger(__name__)

NO_LIMIT = 2147483647
PAPERS_ID = 14                    # the papers' custom block: ID=14 NAME=pm_new
CUSTOM_NAME = "JETFLEET"
_HEADER = re.compile(r"^<\s*(\w+)\s*(.*?)\s*>$")
_ATTR = re.compile(r"(\w+)=(\S+)")


@dataclass(frozen=True)
class Param:
    """A knob the conf declares: ``CLOCK`` or ``FILE``, its name, and the sysfs file behind each argument."""

    kind: str
    name: str
    files: dict[str, str]                  # argument (MIN_FREQ, MAX_FREQ, FREQ_TABLE, CORE_3, ...) -> absolute path


@dataclass(frozen=True)
class PowerModel:
    """One ``< POWER_MODEL ID=N NAME=X >`` block: its settings as (param, argument, value) in file order."""

    id: int
    name: str
    settings: tuple[tuple[str, str, int], ...]

    def value(self, param: str, arg: str) -> int | None:
        """The block's value for ``param arg``, or None if it does not set it."""
        for p, a, v in self.settings:
            if p == param and a == arg:
                return v
        return None


@dataclass(frozen=True)
class NvpConf:
    """A parsed nvpmodel.conf: its knobs, its power models and its default mode."""

    params: dict[str, Param]
    models: tuple[PowerModel, ...]
    default_id: int | None
    text: str

    def model(self, mode_id: int) -> PowerModel:
        """The power model with ``mode_id``; DeviceError if the conf has none."""
        for m in self.models:
            if m.id == mode_id:
                return m
        raise DeviceError(f"nvpmodel.conf has no POWER_MODEL ID={mode_id}", field="nvpmodel")

    def by_name(self, name: str) -> PowerModel | None:
        """The power model called ``name`` (case-insensitive), or None."""
        for m in self.models:
            if m.name.lower() == name.lower():
                return m
        return None

    def cpu_clusters(self) -> list[tuple[str, int]]:
        """(CLOCK param, first CPU) of each CPU cluster, in CPU order (CPU_A78_0 -> cpu0, CPU_A78_1 -> cpu4, ...)."""
        out = []
        for p in self.params.values():
            if p.kind != "CLOCK" or not p.name.startswith("CPU"):
                continue
            m = next((re.search(r"/cpu(\d+)/", f) for f in p.files.values() if re.search(r"/cpu(\d+)/", f)), None)
            if m:
                out.append((p.name, int(m.group(1))))
        return sorted(out, key=lambda c: c[1])

    def free_id(self, preferred: int = PAPERS_ID) -> int:
        """``preferred`` if no preset uses it, else the next ID after the highest one."""
        ids = {m.id for m in self.models}
        return preferred if preferred not in ids else max(ids) + 1


def parse_conf(text: str, source: str = "nvpmodel.conf") -> NvpConf:
    """Parse nvpmodel.conf text; DeviceError naming the line of anything malformed."""
    params: dict[str, Param] = {}
    models: list[PowerModel] = []
    default_id: int | None = None
    section: tuple[str, dict[str, str]] | None = None
    settings: list[tuple[str, str, int]] = []

    def close() -> None:
        if section and section[0] == "POWER_MODEL":
            attrs = section[1]
            models.append(PowerModel(int(attrs["ID"]), attrs.get("NAME", attrs["ID"]), tuple(settings)))

    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        head = _HEADER.match(line)
        if head:
            close()
            attrs = dict(_ATTR.findall(head.group(2)))
            kind = head.group(1).upper()
            try:
                if kind == "POWER_MODEL":
                    int(attrs["ID"])
                elif kind == "PARAM":
                    params[attrs["NAME"]] = Param(attrs.get("TYPE", "FILE").upper(), attrs["NAME"], {})
                elif kind == "PM_CONFIG":
                    default_id = int(attrs["DEFAULT"])
            except (KeyError, ValueError):
                raise DeviceError(f"{source} line {n}: malformed section header {raw.strip()!r}",
                                  field="nvpmodel") from None
            section, settings = (kind, attrs), []
            continue
        words = line.split()
        if section is None:
            raise DeviceError(f"{source} line {n}: {raw.strip()!r} is outside any section", field="nvpmodel")
        if section[0] == "PARAM" and len(words) == 2:
            params[section[1]["NAME"]].files[words[0]] = words[1]
        elif section[0] == "POWER_MODEL" and len(words) == 3:
            value = words[2]
            ivalue = 1 if value.lower() == "on" else 0 if value.lower() in ("off", "auto") else None
            try:
                settings.append((words[0], words[1], int(value) if ivalue is None else ivalue))
            except ValueError:
                raise DeviceError(f"{source} line {n}: {words[2]!r} is not a number", field="nvpmodel") from None
        elif section[0] in ("PARAM", "POWER_MODEL"):
            raise DeviceError(f"{source} line {n}: cannot read {raw.strip()!r}", field="nvpmodel")
    close()
    return NvpConf(params, tuple(models), default_id, text)


def _at_most(table: Sequence[float], cap: float) -> float:
    """The highest table value not above ``cap`` (what a clock capped at ``cap`` runs at), else the lowest."""
    below = [v for v in table if v <= cap + 1e-6]
    return max(below) if below else min(table)


def preset_mode(model: PowerModel, conf: NvpConf, catalog: Catalog) -> PowerMode:
    """The mode a preset gives with its clocks at their caps, on this board's tables (``catalog``)."""
    online = [v for p, a, v in model.settings if p == "CPU_ONLINE"]
    cores = sum(1 for v in online if v) if online else max(catalog.cores)
    clusters = conf.cpu_clusters()
    cpu_cap = model.value(clusters[0][0], "MAX_FREQ") if clusters else None
    gpu_cap, emc_cap = model.value("GPU", "MAX_FREQ"), model.value("EMC", "MAX_FREQ")

    def capped(cap: int | None, table: Sequence[float], per_mhz: float, zero_is_max: bool = False) -> float:
        if cap is None or cap < 0 or cap >= NO_LIMIT or (zero_is_max and cap == 0):
            return max(table)
        return _at_most(table, cap / per_mhz)

    return PowerMode(cores, capped(cpu_cap, catalog.cpu_mhz, 1e3), capped(gpu_cap, catalog.gpu_mhz, 1e6),
                     capped(emc_cap, catalog.mem_mhz, 1e6, zero_is_max=True))


def custom_block(conf: NvpConf, mode: PowerMode, mode_id: int, n_cpus: int, *, name: str = CUSTOM_NAME,
                 emc_hz: int | None = None) -> str:
    """The papers' custom POWER_MODEL block for ``mode``, written with this board's own knob names."""
    khz, gpu_hz = int(round(mode.cpu_mhz * 1000)), int(round(mode.gpu_mhz * 1e6))
    lines = [f"< POWER_MODEL ID={mode_id} NAME={name} >"]
    lines += [f"CPU_ONLINE CORE_{c} {1 if c < mode.cores else 0}" for c in range(n_cpus)]
    if "TPC_POWER_GATING" in conf.params:
        lines.append("TPC_POWER_GATING TPC_PG_MASK 0")
    if "GPU_POWER_CONTROL_ENABLE" in conf.params:
        lines.append("GPU_POWER_CONTROL_ENABLE GPU_PWR_CNTL_EN on")
    for param, first in conf.cpu_clusters():
        if first < mode.cores:  # clusters with no online core are left alone, as in NVIDIA's own blocks
            lines += [f"{param} MIN_FREQ {khz}", f"{param} MAX_FREQ {khz}"]
    lines += [f"GPU MIN_FREQ {gpu_hz}", f"GPU MAX_FREQ {gpu_hz}"]
    if "GPU_POWER_CONTROL_DISABLE" in conf.params:
        lines.append("GPU_POWER_CONTROL_DISABLE GPU_PWR_CNTL_DIS auto")
    lines.append(f"EMC MAX_FREQ {emc_hz if emc_hz is not None else int(round(mode.mem_mhz * 1e6))}")
    engines = [p.name for p in conf.params.values()
               if p.kind == "CLOCK" and p.name not in ("GPU", "EMC") and not p.name.startswith("CPU")]
    lines += [f"{e} MAX_FREQ -1" for e in engines]  # DLA, PVA, CVNAS: no cap, as the papers left them
    return "\n".join(lines) + "\n"


def with_block(conf: NvpConf, block: str) -> str:
    """The conf's text with ``block`` added before its ``< PM_CONFIG >`` section (or at the end)."""
    lines = conf.text.splitlines()
    at = next((i for i, ln in enumerate(lines) if ln.strip().startswith("< PM_CONFIG")), len(lines))
    return "\n".join([*lines[:at], "", "# added by the jetfleet agent", block, *lines[at:]]) + "\n"


class NvpModel:
    """nvpmodel on this board: the board's conf (read, never written), queries and mode switches."""

    def __init__(self, fs: Sysfs, commands: SystemCommands, *, copy: Path, conf_rel: str = "etc/nvpmodel.conf",
                 custom_id: int = PAPERS_ID) -> None:
        self.fs, self.commands = fs, commands
        self.conf_rel, self.copy = conf_rel, copy   # the copy is the agent's own file, on this machine
        self.conf = parse_conf(fs.read(conf_rel), str(fs.path(conf_rel))) if fs.exists(conf_rel) else None
        self.custom_id = self.conf.free_id(custom_id) if self.conf else custom_id

    @property
    def installed(self) -> bool:
        """True when the board has both an nvpmodel.conf and the nvpmodel tool."""
        return self.conf is not None and self.commands.which("nvpmodel") is not None

    def query(self) -> tuple[int, str] | None:
        """(ID, name) of the mode nvpmodel reports (``nvpmodel -q``), or None where it cannot say."""
        if not self.installed:
            return None
        out = self.commands.run(["nvpmodel", "-q"], check=False)
        ids = [ln.strip() for ln in out.stdout.splitlines() if ln.strip().isdigit()]
        name = re.search(r"NV Power Mode:\s*(\S+)", out.stdout)
        if out.returncode != 0 or not ids:
            log.warning("nvpmodel -q did not report a mode: %s", (out.stderr or out.stdout).strip())
            return None
        return int(ids[-1]), name.group(1) if name else ""

    def _switch(self, conf: Path, mode_id: int) -> None:
        out = self.commands.run(["nvpmodel", "-f", str(conf), "-m", str(mode_id)], check=False)
        said = (out.stdout + out.stderr).strip()
        if "reboot" in said.lower():
            raise DeviceError(f"nvpmodel needs a reboot to enter mode {mode_id} and jetfleet never reboots a board "
                              f"(nvpmodel said: {said.splitlines()[0]})", field="mode")
        if out.returncode != 0:
            raise DeviceError(f"nvpmodel -m {mode_id} failed (exit {out.returncode}): {said or 'no output'}",
                              field="mode")

    def set_preset(self, mode_id: int) -> None:
        """``nvpmodel -f BOARD_CONF -m ID``: one of NVIDIA's presets, exactly as the board's file defines it."""
        assert self.conf is not None
        self.conf.model(mode_id)
        self._switch(self.fs.path(self.conf_rel), mode_id)

    def set_custom(self, mode: PowerMode, n_cpus: int, emc_hz: int | None = None) -> None:
        """Write the custom block for ``mode`` into the copy of the board's conf and switch to it."""
        assert self.conf is not None
        block = custom_block(self.conf, mode, self.custom_id, n_cpus, emc_hz=emc_hz)
        Sysfs("/").replace_file(str(self.copy), with_block(self.conf, block))
        self._switch(self.copy, self.custom_id)
