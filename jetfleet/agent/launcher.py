"""Processes the agent launches from its job templates (``templates.py``) for ``job submit --template``.

One process per launch (the job's id), started by the first training command that names it and adopted by that
command and the job's next ones exactly as an attached session is (``attach.py``). The process gets, in its
environment, the session socket (``JETFLEET_SESSION_SOCKET``, which ``jetfleet.session`` reads), the name its
session must use (``JETFLEET_WORKLOAD``: the template's name), the job's length (``JETFLEET_JOB_MINIBATCHES``) and
id (``JETFLEET_JOB_ID``). It runs in its own session and process group, as the template's user if one is set,
with stdin closed; stdout and stderr go to one pipe whose last ``tail_lines`` lines are kept (each cut at
``MAX_LINE_CHARS``: bounded memory whatever it prints).

It is spawned (``os.posix_spawn``), never forked: on the boards' Python 3.8 ``subprocess`` forks, and a fork with
gRPC loaded runs gRPC's fork handlers, which can hang or abort the agent (grpc/grpc#37259). posix_spawn has no
chdir and no user switch, so coreutils' ``env -C DIR`` changes directory and util-linux's ``setpriv`` drops to the
template's user (its groups too) before the command is executed.

Stopping it (a cancelled or failed job, the agent stopping) sends SIGTERM to its process group and, when anything
of the group is still there after the configuration's ``kill_grace_s``, SIGKILL to the group."""

from __future__ import annotations

import asyncio
import logging
import os
import pwd
import shutil
import signal
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import IO

from jetfleet.agent.templates import JobTemplate, TemplatesConfig
from jetfleet.shared.errors import FailedPrecondition, InvalidArgument
from jetfleet.shared.proto import agent_pb2, common_pb2
from jetfleet.shared.session_wire import SOCKET_ENV, check_name

log = logging.getLogger(__name__)
TAIL_LINES = 40
MAX_LINE_CHARS = 400
MAX_LAUNCHES_KEPT = 64          # ended launches kept for their exit status and tail
POLL_S = 0.05                   # how often a stopping group is looked at


@dataclass
class Launched:
    """One launched process and what it printed last."""

    launch_id: str
    template: JobTemplate
    minibatches: int                        # the job's steps left to it: after them, it is expected to exit
    proc: Spawned
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    trained: int = 0                        # steps the job's commands adopted from it (the board's count)
    stopped: str = ""                       # why the agent stopped it ('' unless it did)
    _reader: threading.Thread | None = None

    @property
    def pid(self) -> int:
        """The process's pid (its process group's id too)."""
        return int(self.proc.pid)

    @property
    def returncode(self) -> int | None:
        """Its exit status once it has exited (negative: the signal that killed it), else None."""
        return self.proc.poll()

    def exit_text(self) -> str:
        """How it ended, in words ('' while it runs)."""
        rc = self.returncode
        if rc is None:
            return ""
        how = f"killed by signal {-rc} ({_signame(-rc)})" if rc < 0 else f"exited with status {rc}"
        return how + (f" (stopped by the agent: {self.stopped})" if self.stopped else "")

    def last_line(self) -> str:
        """The last line it printed ('' if none yet)."""
        self.drain(0.0)
        return self.tail[-1] if self.tail else ""

    def lines(self) -> list[str]:
        """Its output tail, oldest first."""
        return list(self.tail)

    def drain(self, timeout_s: float) -> None:
        """Once it and its group are gone, wait up to ``timeout_s`` for its last output to be read (the pipe is at
        its end then: a short wait; while a child of it lives on, holding the pipe, nothing is waited for)."""
        if self.returncode is not None and self._reader is not None and not _group_alive(self.pid):
            self._reader.join(timeout_s)

    def ended_text(self) -> str:
        """Its end and the last line it printed, for an error message."""
        self.drain(1.0)
        last = self.last_line()
        return (f"the launched {self.template.name!r} (pid {self.pid}) {self.exit_text()}"
                + (f"; its output ends: {last}" if last else "; it printed nothing"))


class Launcher:
    """Starts the templates of the agent's configuration and stops what it started (module docstring)."""

    def __init__(self, config: TemplatesConfig, socket_path: str, *, tail_lines: int = TAIL_LINES) -> None:
        self.config, self.socket_path, self.tail_lines = config, socket_path, tail_lines
        self.launches: dict[str, Launched] = {}

    def templates(self) -> list[common_pb2.TemplateInfo]:
        """What the hello lists: each template's name and the --arg names it takes."""
        return [common_pb2.TemplateInfo(name=t.name, args=list(t.args), arg_rules=[r.text() for r in t.rules])
                for t in self.config.templates]

    def check(self, r: agent_pb2.LaunchTemplate) -> None:
        """InvalidArgument naming the field when ``r`` names a template this agent does not have, or args it does
        not take (nothing is started)."""
        check_name(r.launch_id, "run_training.launch.launch_id")
        template = self.config.get(r.template)
        template.argv(dict(r.args), self._builtin(r, template))

    def ensure(self, r: agent_pb2.LaunchTemplate) -> Launched:
        """The process of launch ``r.launch_id``: started now by its first command, the same one afterwards."""
        known = self.launches.get(r.launch_id)
        if known is not None:
            return known
        template = self.config.get(r.template)
        argv = template.argv(dict(r.args), self._builtin(r, template))
        env = dict(os.environ)
        env.update(template.env)
        env.update({SOCKET_ENV: self.socket_path, "JETFLEET_WORKLOAD": template.name,
                    "JETFLEET_JOB_MINIBATCHES": str(r.minibatches - r.done), "JETFLEET_JOB_ID": r.launch_id})
        proc = Spawned(template, argv, env)
        launched = Launched(r.launch_id, template, int(r.minibatches - r.done), proc, deque(maxlen=self.tail_lines))
        launched._reader = threading.Thread(target=_read_tail, args=(proc.stdout, launched.tail), daemon=True,
                                            name=f"tail-{proc.pid}")
        launched._reader.start()
        self.launches[r.launch_id] = launched
        while len(self.launches) > MAX_LAUNCHES_KEPT:
            oldest = next((k for k, v in self.launches.items() if v.returncode is not None), None)
            if oldest is None:
                break
            del self.launches[oldest]
        log.info("launched template %s for %s: pid %d: %s", template.name, r.launch_id, proc.pid, " ".join(argv))
        return launched

    async def wait_exit(self, launched: Launched, timeout_s: float) -> int | None:
        """Its exit status once it exits within ``timeout_s`` (wall seconds), else None."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while launched.returncode is None and loop.time() < deadline:
            await asyncio.sleep(min(POLL_S, max(0.0, deadline - loop.time())))
        return launched.returncode

    async def finish(self, launched: Launched) -> None:
        """The launch trained its job's length: it must exit 0 within its template's ``exit_wait_s`` (else it is
        stopped); FailedPrecondition naming how it ended otherwise."""
        wait_s = launched.template.exit_wait_s
        rc = await self.wait_exit(launched, wait_s)
        if rc is None:
            await self.stop(launched.launch_id, f"still running {wait_s:g} s after the job's length")
            raise FailedPrecondition(f"the launched {launched.template.name!r} (pid {launched.pid}) trained the job's "
                                     f"{launched.minibatches} steps but had not exited {wait_s:g} s later: stopped "
                                     "(give its command {minibatches}, or read $JETFLEET_JOB_MINIBATCHES)",
                                     field="run_training.launch")
        launched.drain(1.0)
        if rc != 0:
            raise FailedPrecondition(f"{launched.ended_text()} after training the job's {launched.minibatches} steps",
                                     field="run_training.launch")

    async def stop(self, launch_id: str, why: str) -> bool:
        """SIGTERM to the launch's process group, SIGKILL after the grace period to whatever of it is left; True
        when there was a live launch of that id."""
        launched = self.launches.get(launch_id)
        if launched is None or (launched.returncode is not None and not _group_alive(launched.pid)):
            return False
        launched.stopped = launched.stopped or why
        log.info("stopping launch %s (pid %d, template %s): %s", launch_id, launched.pid, launched.template.name, why)
        _signal_group(launched.pid, signal.SIGTERM)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.kill_grace_s
        while loop.time() < deadline and (launched.returncode is None or _group_alive(launched.pid)):
            await asyncio.sleep(POLL_S)
        if launched.returncode is None or _group_alive(launched.pid):
            log.warning("launch %s (pid %d) still there %.1f s after SIGTERM: SIGKILL to its group", launch_id,
                        launched.pid, self.config.kill_grace_s)
            _signal_group(launched.pid, signal.SIGKILL)
            while launched.returncode is None:
                await asyncio.sleep(POLL_S)
        launched.drain(1.0)
        return True

    def alive(self) -> list[str]:
        """The ids of the launches whose process (or a process of its group) still runs (heartbeats list them)."""
        return [k for k, v in self.launches.items() if v.returncode is None or _group_alive(v.pid)]

    async def stop_all(self, why: str) -> None:
        """Stop every launch still running (the agent is stopping)."""
        live = self.alive()
        if live:
            await asyncio.gather(*(self.stop(k, why) for k in live))

    def _builtin(self, r: agent_pb2.LaunchTemplate, template: JobTemplate) -> dict[str, str]:
        if not 1 <= r.minibatches <= 10**9:
            raise InvalidArgument(f"launch.minibatches={r.minibatches}: allowed 1..{10**9}",
                                  field="run_training.launch.minibatches")
        if r.done >= r.minibatches:
            raise InvalidArgument(f"launch.done={r.done}: below its minibatches ({r.minibatches})",
                                  field="run_training.launch.done")
        return {"workload": template.name, "minibatches": str(r.minibatches - r.done), "job_id": r.launch_id}


class Spawned:
    """A template's process, spawned in a session of its own (module docstring), reaped by a thread of its own."""

    def __init__(self, template: JobTemplate, argv: list[str], env: dict[str, str]) -> None:
        exe = argv[0] if os.sep in argv[0] else shutil.which(argv[0], path=env.get("PATH", os.defpath))
        if exe is None:
            raise FailedPrecondition(f"template {template.name!r}: {argv[0]!r} is not on this board's PATH",
                                     field="run_training.launch.template")
        cmd = [exe, *argv[1:]]
        if template.user:   # checked at load: the agent runs as root and the user exists
            pw = pwd.getpwnam(template.user)
            cmd = [_tool("setpriv"), f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--init-groups", "--", *cmd]
        if template.cwd:
            cmd = [_tool("env"), "-C", template.cwd, *cmd]
        r, w = os.pipe()   # non-inheritable; dup2 gives the child its end
        actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0), (os.POSIX_SPAWN_DUP2, w, 1),
                   (os.POSIX_SPAWN_DUP2, w, 2)]
        try:
            # setsid: a session and process group of its own; SIGPIPE back to its default (Python ignores it here)
            self.pid = os.posix_spawn(cmd[0], cmd, env, file_actions=actions, setsid=True,
                                      setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT))
        except OSError as e:
            os.close(r)
            raise FailedPrecondition(f"template {template.name!r} could not start {argv[0]!r}: {e.strerror or e}",
                                     field="run_training.launch.template") from None
        finally:
            os.close(w)
        self.stdout: IO[bytes] = open(r, "rb")
        self._rc: int | None = None
        threading.Thread(target=self._reap, name=f"reap-{self.pid}", daemon=True).start()

    def _reap(self) -> None:
        _, status = os.waitpid(self.pid, 0)
        self._rc = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)

    def poll(self) -> int | None:
        """Its exit status once it has exited (negative: the signal that killed it), else None."""
        return self._rc


def _tool(name: str) -> str:
    return shutil.which(name) or f"/usr/bin/{name}"


def _read_tail(pipe: IO[bytes], tail: deque[str]) -> None:
    """Keep the last lines of the pipe (each line cut at MAX_LINE_CHARS; a longer one is read in pieces)."""
    try:
        for raw in iter(lambda: pipe.readline(4096), b""):
            text = raw.decode("utf-8", "replace").rstrip("\r\n")
            if text:
                tail.append(text[:MAX_LINE_CHARS])
    except (OSError, ValueError):
        pass
    finally:
        pipe.close()


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _group_alive(pgid: int) -> bool:
    """Whether any live process of the group is left. A zombie does not count: an orphan of the group is reaped
    by the board's init, which in a container without one may never happen."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:   # a member runs as another user (the template's): it is there
        pass
    try:
        names = os.listdir("/proc")
    except OSError:           # no /proc: whatever answers counts
        return True
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()   # after the command name, which may hold spaces
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


def _signame(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


__all__ = ["Launched", "Launcher"]
