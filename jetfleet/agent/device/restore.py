"""Leave the board as it was found.

Before its first change to a board the agent records what it found (the nvpmodel mode, each core's
online state, clock limits and governor, the GPU's limits and governor, the EMC lock, the fan) in a
state file, written atomically. A clean exit (SIGTERM, Ctrl-C) puts all of it back and removes the
file; after a crash the file is still there, and the next start puts the board back before anything
else. Only values that differ from the board's are written."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from jetfleet.agent.device.fan import Fan
from jetfleet.agent.device.nvpmodel import NvpModel
from jetfleet.agent.device.sysfs import Sysfs
from jetfleet.shared.errors import DeviceError

log = logging.getLogger(__name__)

CPU = "sys/devices/system/cpu"
EMC = "sys/kernel/debug/bpmp/debug/clk/emc"
STATE_VERSION = 1


def set_limits(fs: Sysfs, lo_file: str, hi_file: str, lo: int, hi: int) -> None:
    """Write a (min, max) pair in the order the kernel accepts: never min above the current max."""
    if (fs.read_int(lo_file), fs.read_int(hi_file)) == (lo, hi):
        return
    if lo > fs.read_int(hi_file):
        fs.write(hi_file, hi)
        fs.write(lo_file, lo)
    else:
        fs.write(lo_file, lo)
        fs.write(hi_file, hi)


class FoundState:
    """The board's state before jetfleet touched it: recorded once, restored on exit or after a crash."""

    def __init__(self, fs: Sysfs, cpus: list[int], gpu_node: str, fan: Fan, nvpmodel: NvpModel, *,
                 state_file: Path) -> None:
        self.fs, self.cpus, self.gpu, self.fan, self.nvpmodel = fs, cpus, gpu_node, fan, nvpmodel
        self.state = Sysfs("/")             # the state file is the agent's own, on this machine (not under the board root)
        self.state_rel = str(state_file)
        self.found: dict[str, Any] | None = None

    # --- recording ---------------------------------------------------------------------------------
    def capture(self) -> dict[str, Any]:
        """What the board is doing now (JSON-ready)."""
        fs = self.fs
        cpus: dict[str, Any] = {}
        for c in self.cpus:
            d = f"{CPU}/cpu{c}"
            online = not fs.exists(f"{d}/online") or fs.read_int(f"{d}/online") == 1
            entry: dict[str, Any] = {"online": online}
            try:  # an offline core's policy keeps its limits; jetfleet may bring it up and change them
                entry.update(min=fs.read_int(f"{d}/cpufreq/scaling_min_freq"),
                             max=fs.read_int(f"{d}/cpufreq/scaling_max_freq"))
                if fs.exists(f"{d}/cpufreq/scaling_governor"):
                    entry["governor"] = fs.read(f"{d}/cpufreq/scaling_governor")
            except DeviceError:
                if online:
                    raise
            cpus[str(c)] = entry
        gpu: dict[str, Any] = {"min": fs.read_int(f"{self.gpu}/min_freq"), "max": fs.read_int(f"{self.gpu}/max_freq")}
        if fs.exists(f"{self.gpu}/governor"):
            gpu["governor"] = fs.read(f"{self.gpu}/governor")
        nvp = self.nvpmodel.query()
        return {"version": STATE_VERSION, "nvpmodel": list(nvp) if nvp else None, "cpus": cpus, "gpu": gpu,
                "emc": {"rate": fs.read_int(f"{EMC}/rate"), "locked": fs.read_int(f"{EMC}/mrq_rate_locked")},
                "fan": self.fan.capture()}

    def before_change(self) -> dict[str, Any]:
        """Record the found state (once) before the first change; returns it."""
        if self.found is None:
            found = self.capture()
            self.state.replace_file(self.state_rel, json.dumps(found, indent=1))
            self.found = found
            log.info("recorded the board's state before jetfleet's first change in %s", self.state_rel)
        return self.found

    # --- restoring ---------------------------------------------------------------------------------
    def recover(self) -> bool:
        """At start: if a previous agent died without restoring, put the board back now. True if it did."""
        if not self.state.exists(self.state_rel):
            return False
        try:
            found = json.loads(self.state.read_text(self.state_rel))
        except ValueError:
            raise DeviceError(f"{self.state_rel} is not a jetfleet state file; move it away to start",
                              field="state") from None
        log.warning("a previous agent left the board changed: restoring the state it found")
        self._apply_and_forget(found)
        return True

    def restore(self) -> None:
        """On exit: put back what was found (nothing to do if jetfleet changed nothing)."""
        if self.found is not None:
            self._apply_and_forget(self.found)
            self.found = None

    def _apply_and_forget(self, found: dict[str, Any]) -> None:
        errors = self.apply(found)
        if errors:  # keep the file: the next start tries again
            raise DeviceError(f"could not fully restore the board ({'; '.join(errors)}); {self.state_rel} "
                              "keeps what was found, and the next start tries again (remove it to give up)",
                              field="state")
        self.state.remove(self.state_rel)
        log.info("board restored to the state jetfleet found")

    def apply(self, found: dict[str, Any]) -> list[str]:
        """Write ``found`` back: nvpmodel mode, cores, CPU and GPU limits and governors, EMC, fan. Returns what failed."""
        errors: list[str] = []

        def step(what: str, fn: Any, *args: Any) -> None:
            try:
                fn(*args)
            except DeviceError as e:
                errors.append(f"{what}: {e.message}")

        if found.get("nvpmodel") and self.nvpmodel.installed:
            step("nvpmodel", self.nvpmodel.set_preset, int(found["nvpmodel"][0]))
        cpus = {int(c): v for c, v in found["cpus"].items()}
        for c, v in sorted(cpus.items()):
            step(f"cpu{c}", self._cpu, c, v)
        for c, v in sorted(cpus.items()):
            if not v["online"]:
                step(f"cpu{c}", self._online, c, False)
        step("gpu", self._gpu, found["gpu"])
        step("emc", self._emc, found["emc"])
        step("fan", self.fan.restore, found["fan"])
        return errors

    def _is_online(self, c: int) -> bool:
        f = f"{CPU}/cpu{c}/online"
        return not self.fs.exists(f) or self.fs.read_int(f) == 1

    def _online(self, c: int, up: bool) -> None:
        if self._is_online(c) != up:
            self.fs.write(f"{CPU}/cpu{c}/online", 1 if up else 0)

    def _cpu(self, c: int, v: dict[str, Any]) -> None:
        """Limits and governor of one core. A core found offline whose limits jetfleet changed is brought up to
        put them back (its policy is inactive while offline); the caller takes it down again."""
        d = f"{CPU}/cpu{c}/cpufreq"
        if not v["online"]:
            if "min" not in v:
                return
            same = (self.fs.read_int(f"{d}/scaling_min_freq"), self.fs.read_int(f"{d}/scaling_max_freq")) == (
                int(v["min"]), int(v["max"]))
            if same and self.fs.read(f"{d}/scaling_governor") == v.get("governor", self.fs.read(f"{d}/scaling_governor")):
                return
        self._online(c, True)
        set_limits(self.fs, f"{d}/scaling_min_freq", f"{d}/scaling_max_freq", int(v["min"]), int(v["max"]))
        if "governor" in v and self.fs.read(f"{d}/scaling_governor") != v["governor"]:
            self.fs.write(f"{d}/scaling_governor", v["governor"])

    def _gpu(self, v: dict[str, Any]) -> None:
        set_limits(self.fs, f"{self.gpu}/min_freq", f"{self.gpu}/max_freq", int(v["min"]), int(v["max"]))
        if "governor" in v and self.fs.read(f"{self.gpu}/governor") != v["governor"]:
            self.fs.write(f"{self.gpu}/governor", v["governor"])

    def _emc(self, v: dict[str, Any]) -> None:
        # The rate goes back first, then the lock: unlocked, the EMC scales on its own from there.
        if self.fs.read_int(f"{EMC}/rate") != int(v["rate"]):
            self.fs.write(f"{EMC}/rate", int(v["rate"]))
        if self.fs.read_int(f"{EMC}/mrq_rate_locked") != int(v["locked"]):
            self.fs.write(f"{EMC}/mrq_rate_locked", int(v["locked"]))
