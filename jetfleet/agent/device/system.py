"""The board's own tools (nvpmodel, systemctl for nvfancontrol), run as separate programs found on PATH.

Tests put fake executables first on PATH; on a board these are NVIDIA's and systemd's. Nothing from the
wire ever reaches an argument list: the arguments are built here from validated modes and fixed names."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from typing import Sequence

from jetfleet.shared.errors import DeviceError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CommandResult:
    """A finished command: exit status and what it printed."""

    returncode: int
    stdout: str
    stderr: str


class SystemCommands:
    """Runs board tools with a timeout and stdin closed (nvpmodel asks for a reboot on stdin; never answer it)."""

    def __init__(self, *, path: str | None = None, timeout_s: float = 60.0) -> None:
        self.path = path          # PATH to search (None: this process's)
        self.timeout_s = timeout_s

    def which(self, tool: str) -> str | None:
        """The executable ``tool`` would run, or None if it is not installed."""
        return shutil.which(tool, path=self.path)

    def run(self, argv: Sequence[str], *, check: bool = True) -> CommandResult:
        """Run ``argv``; DeviceError naming the command if it is missing, times out, or (with ``check``) fails."""
        exe = self.which(argv[0])
        if exe is None:
            raise DeviceError(f"{argv[0]} is not installed on this board (not on PATH)", field=argv[0])
        env = dict(os.environ)
        if self.path is not None:
            env["PATH"] = self.path
        cmd: list[str] = [exe, *argv[1:]]
        # Its own session, so a timeout kills everything it started: a tool that leaves a child holding its
        # output (a daemon started by systemctl, a shell wrapper) would otherwise keep the read waiting forever.
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, env=env, start_new_session=True)
        except OSError as e:
            raise DeviceError(f"cannot run {argv[0]}: {e.strerror}", field=argv[0]) from None
        try:
            out, err = proc.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise DeviceError(f"{' '.join(argv)} did not finish within {self.timeout_s:.0f} s", field=argv[0]) from None
        except BaseException:
            _kill_group(proc)
            raise
        log.debug("%s -> %d %s %s", " ".join(argv), proc.returncode, out.strip(), err.strip())
        result = CommandResult(proc.returncode, out, err)
        if check and proc.returncode != 0:
            said = (err.strip() or out.strip()).splitlines()
            raise DeviceError(f"{' '.join(argv)} failed (exit {proc.returncode}): {said[-1] if said else 'no output'}",
                              field=argv[0])
        return result


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """SIGKILL ``proc`` and its process group, then reap it without waiting on pipes a stray child may hold."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    try:
        proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:   # a child that left the group still holds a pipe: stop reading it
        for f in (proc.stdout, proc.stderr):
            if f is not None:
                f.close()
        proc.wait()
