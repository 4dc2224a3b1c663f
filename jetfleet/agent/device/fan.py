"""The fan: at maximum while jetfleet measures (as the papers did), and handed back as it was found.

Where NVIDIA's fan daemon (nvfancontrol) runs, the fan is driven through it, never by writing the PWM
under its feet: jetfleet adds a profile that holds the PWM at its maximum to ``/etc/nvfancontrol.conf``,
makes it the default, and restarts the daemon the way NVIDIA documents a profile change (stop, edit,
remove ``/var/lib/nvfancontrol/status``, start). Leaving, it puts back the file and the status exactly
as they were and restarts the daemon. Where no daemon runs, the PWM files are written directly and
their values restored."""

from __future__ import annotations

import logging
import re
from typing import Any

from jetfleet.agent.device.sysfs import Sysfs
from jetfleet.agent.device.system import SystemCommands
from jetfleet.shared.errors import DeviceError

log = logging.getLogger(__name__)

PROFILE = "jetfleet_max"
PWM_MAX = 255
PWM_GLOB = "sys/devices/platform/pwm-fan/hwmon/hwmon*/pwm1"
SERVICE = "nvfancontrol"
_DEFAULT = re.compile(r"^(\s*)FAN_DEFAULT_PROFILE\s+(\S+)\s*$")
_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$")


def max_profile_conf(text: str) -> str:
    """nvfancontrol.conf text with a ``jetfleet_max`` profile (PWM at its maximum at every temperature) made the
    default of every fan; the original profiles stay in the file untouched."""
    rpms = [int(m.group(4)) for m in map(_ROW.match, text.splitlines()) if m]
    rpm = max(rpms, default=0)
    out: list[str] = []
    for line in text.splitlines():
        m = _DEFAULT.match(line)
        if not m:
            out.append(line)
            continue
        pad = m.group(1)
        out += [f"{pad}FAN_PROFILE {PROFILE} {{", f"{pad}        #TEMP   HYST    PWM     RPM",
                f"{pad}        0       0       {PWM_MAX}     {rpm}", f"{pad}        105     0       {PWM_MAX}     {rpm}",
                f"{pad}}}", f"{pad}FAN_DEFAULT_PROFILE {PROFILE}"]
    return "\n".join(out) + "\n"


class Fan:
    """The board's fan through nvfancontrol where it runs, else through its PWM files."""

    def __init__(self, fs: Sysfs, commands: SystemCommands, *, conf_rel: str = "etc/nvfancontrol.conf",
                 status_rel: str = "var/lib/nvfancontrol/status") -> None:
        self.fs, self.commands = fs, commands
        self.conf_rel, self.status_rel = conf_rel, status_rel
        self.pwm_files = fs.glob(PWM_GLOB)
        self._at_max = False

    def _daemon_running(self) -> bool:
        if not self.fs.exists(self.conf_rel) or self.commands.which("systemctl") is None:
            return False
        out = self.commands.run(["systemctl", "is-active", SERVICE], check=False)
        return out.stdout.strip() == "active"

    def capture(self) -> dict[str, Any]:
        """What the fan is doing now, to restore later (JSON-ready)."""
        running = self._daemon_running()
        state: dict[str, Any] = {"nvfancontrol": running,
                                 "pwm": {f: self.fs.read_int(f) for f in self.pwm_files}}
        if running:
            state["conf"] = self.fs.read_text(self.conf_rel)
            state["status"] = self.fs.read_text(self.status_rel) if self.fs.exists(self.status_rel) else None
        return state

    def to_max(self, found: dict[str, Any]) -> None:
        """Run the fan at its maximum (once per mode session: later calls do nothing)."""
        if self._at_max:
            return
        if found.get("nvfancontrol"):
            self.commands.run(["systemctl", "stop", SERVICE])
            self.fs.replace_file(self.conf_rel, max_profile_conf(found["conf"]), mode=0o644)
            self.fs.remove(self.status_rel)
            self.commands.run(["systemctl", "start", SERVICE])
            log.info("fan: nvfancontrol runs profile %s (PWM %d)", PROFILE, PWM_MAX)
        else:
            for f in self.pwm_files:
                self.fs.write(f, PWM_MAX)
        self._at_max = True

    def restore(self, found: dict[str, Any]) -> None:
        """Give the fan back as ``found``: nvfancontrol's file, status and service, or the PWM values."""
        if found.get("nvfancontrol"):
            if self.commands.which("systemctl") is None:
                raise DeviceError("systemctl is missing: cannot hand the fan back to nvfancontrol", field="fan")
            self.commands.run(["systemctl", "stop", SERVICE], check=False)
            self.fs.replace_file(self.conf_rel, found["conf"], mode=0o644)
            status: str | None = found.get("status")
            if status is None:
                self.fs.remove(self.status_rel)
            else:
                self.fs.replace_file(self.status_rel, status, mode=0o644)
            self.commands.run(["systemctl", "start", SERVICE])
        else:
            for f, value in found.get("pwm", {}).items():
                if self.fs.exists(f) and self.fs.read_int(f) != value:
                    self.fs.write(f, value)
        self._at_max = False
