"""The board's own tools (nvpmodel, systemctl for nvfancontrol), run as separate programs found on PATH.

Tests put fake executables first on PATH; on a board these are NVIDIA's and systemd's. Nothing from the
wire ever reaches an argument list: the arguments are built here from validated modes and fixed names."""

from __future__ import annotations

import logging
import os
import selectors
import shutil
import signal
import time
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
        # posix_spawn, not fork: a fork runs the atfork handlers of every library loaded, and gRPC's wait for
        # its own threads (grpc/grpc#37259: with the agent's channel busy, a fork could wait forever; seen on
        # CPython 3.8 with grpcio 1.70). The tool gets a session of its own, so a timeout kills everything it
        # started: a tool that leaves a child holding its output (a daemon started by systemctl, a shell
        # wrapper) would otherwise keep the read waiting forever.
        try:
            pid, pipes = _spawn(cmd, env)
        except OSError as e:
            raise DeviceError(f"cannot run {argv[0]}: {e.strerror}", field=argv[0]) from None
        deadline = time.monotonic() + self.timeout_s
        try:
            status = _wait(pid, deadline) if pipes.read_until(deadline) else None
        except BaseException:
            _kill_group(pid, pipes)
            raise
        if status is None:
            _kill_group(pid, pipes)
            raise DeviceError(f"{' '.join(argv)} did not finish within {self.timeout_s:.0f} s", field=argv[0])
        out, err = pipes.text(0), pipes.text(1)
        log.debug("%s -> %d %s %s", " ".join(argv), status, out.strip(), err.strip())
        result = CommandResult(status, out, err)
        if check and status != 0:
            said = (err.strip() or out.strip()).splitlines()
            raise DeviceError(f"{' '.join(argv)} failed (exit {status}): {said[-1] if said else 'no output'}",
                              field=argv[0])
        return result


class _Pipes:
    """The read ends of a tool's stdout and stderr, and what came through them."""

    def __init__(self, fds: tuple[int, int]) -> None:
        self.fds = fds
        self.open = set(fds)
        self.got: dict[int, list[bytes]] = {fd: [] for fd in fds}

    def read_until(self, deadline: float) -> bool:
        """Read until every writer closed its end (True; each read end is closed then) or ``deadline`` (False)."""
        with selectors.DefaultSelector() as sel:
            for fd in self.open:
                sel.register(fd, selectors.EVENT_READ)
            while self.open:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                for key, _ in sel.select(left):
                    data = os.read(key.fd, 65536)
                    if data:
                        self.got[key.fd].append(data)
                    else:
                        sel.unregister(key.fd)
                        self.close(key.fd)
        return True

    def close(self, *fds: int) -> None:
        for fd in fds or tuple(self.open):
            if fd in self.open:
                self.open.discard(fd)
                os.close(fd)

    def text(self, i: int) -> str:
        return b"".join(self.got[self.fds[i]]).decode("utf-8", "replace")


def _spawn(cmd: list[str], env: dict[str, str]) -> tuple[int, _Pipes]:
    """Start ``cmd`` in a new session with stdin from /dev/null; its pid and its stdout and stderr."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        # SIGPIPE and SIGXFSZ back to their defaults (Python ignores them, and an ignored signal is inherited):
        # a tool whose reader went away ends quietly, as from a shell
        pid = os.posix_spawn(cmd[0], cmd, env, setsid=True, setsigdef=(signal.SIGPIPE, signal.SIGXFSZ), file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, out_w, 1),
            (os.POSIX_SPAWN_DUP2, err_w, 2)])
    except BaseException:
        os.close(out_r)
        os.close(err_r)
        raise
    finally:
        os.close(out_w)
        os.close(err_w)
    return pid, _Pipes((out_r, err_r))


def _wait(pid: int, deadline: float) -> int | None:
    """The exit status of ``pid`` (minus the signal that ended it), or None if it is still running at ``deadline``."""
    delay = 0.0005
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:   # reaped by someone else (SIGCHLD ignored by an embedder): its status is lost
            raise DeviceError(f"the exit status of process {pid} was lost (reaped elsewhere)", field="pid") from None
        if done:
            return os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)
        if time.monotonic() >= deadline:
            return None
        time.sleep(delay)   # it closed its output and is exiting: polled as subprocess's own wait(timeout) does
        delay = min(2 * delay, 0.05)


def _kill_group(pid: int, pipes: _Pipes) -> None:
    """SIGKILL the tool's session and reap it; its output is read for at most 5 s more (a child that left the
    group may still hold it), then no longer."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        pipes.read_until(time.monotonic() + 5)
    finally:
        pipes.close()
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
