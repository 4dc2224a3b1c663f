"""The agent's side of training sessions (``jetfleet.session``): a Unix socket on the board that the operator's own
training process joins, one JSON line per request (``shared/session_wire.py``).

Only the board's users reach it: the socket is created under a temporary name, given its mode (0600 or 0660) and
only then renamed into place, so it is never reachable with looser permissions; a live agent already serving the
path is never displaced. The peer's pid and uid come from the kernel (SO_PEERCRED), not from the message.

One training session at a time on a board, and none while the agent runs a command for the controller (a board
does one thing at a time): a second is refused naming the one that holds the board. A session counts the steps its
process reports; the agent asks for the next steps to be timed (at the start and then every ``time_every``-th
report) and keeps the timings. On an emulated board (``capabilities.emulated_steps``) each reported step takes the
twin's time for the user's model in the current mode, at the lab's speed, before the report is answered: the
board's clock, power and energy follow the user's loop. Energy windows are integrated from the board's rails
(``energy.py``), with or without a job. A process that goes away without closing (killed, crashed) is recorded as
lost, with its windows closed."""

from __future__ import annotations

import asyncio
import logging
import math
import os
import socket
import struct
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from jetfleet.agent.device.base import Device
from jetfleet.agent.energy import EnergyMeter
from jetfleet.shared import session_wire as wire
from jetfleet.shared.compat import to_thread
from jetfleet.shared.errors import AlreadyExists, FailedPrecondition, InvalidArgument, JetfleetError
from jetfleet.shared.workloads import MAX_MINIBATCHES, WORKLOADS, WorkloadSpec

log = logging.getLogger(__name__)
SOCKET_MODES = (0o600, 0o660)
MAX_TIMINGS_KEPT = 1024
MAX_CPU_MS_PER_SAMPLE = 1000.0


@dataclass(frozen=True)
class SessionConfig:
    """Where the socket is and how sessions are asked to report."""

    path: str = wire.DEFAULT_SOCKET
    mode: int = 0o660
    batch_steps: int = 64            # steps per report at most
    flush_s: float = 1.0             # a report at least this often (wall seconds) while steps come
    time_steps: int = 32             # steps timed one by one (or in groups) when the agent asks
    time_every: int = 8              # ask again every this many reports

    def check(self) -> None:
        """InvalidArgument naming the setting that is out of range."""
        if self.mode not in SOCKET_MODES:
            raise InvalidArgument(f"session socket mode {oct(self.mode)}: allowed 0o600 (the agent's user) or "
                                  "0o660 (and its group)", field="session_socket_mode")
        if not self.path or len(self.path.encode()) > 100:
            raise InvalidArgument(f"session socket path {self.path[:40]!r}: 1..100 bytes (a Unix socket's limit)",
                                  field="session_socket")


@dataclass
class BoardSession:
    """One training process's session on this board."""

    session_id: str
    workload: str
    pid: int
    uid: int
    paced: bool                      # steps take the twin's time (an emulated board)
    started_s: float                 # the board's clock
    power_budget_w: float | None = None
    deadline_s: float | None = None
    minibatches: int | None = None
    steps: int = 0
    reports: int = 0
    last_step_s: float = 0.0
    # the board's clock when the report being paced now began (None between reports): a command adopting the
    # session counts that report's time from here (the twin's clock moves while it paces, before the steps count)
    pacing_from_s: float | None = None
    ended: str = ""                  # "" while it runs, "closed", or "lost: why"
    timed: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=MAX_TIMINGS_KEPT))
    windows: dict[str, tuple[float, EnergyMeter]] = field(default_factory=dict)
    _time_next: int = 0              # steps to ask to have timed at the next reply
    attach_until: int = 0            # the step count at which the command adopting it ends (0: none adopts it)
    stop_asked: bool = False         # its replies ask the process to stop (the job it was launched for is done)

    def seconds_per_step(self) -> float:
        """Median seconds per step over the kept timings (a group counts as its mean step); NaN with none."""
        per = sorted(s / n for n, s in self.timed)
        return per[len(per) // 2] if per else math.nan


class SessionServer:
    """The board's session socket (module docstring). ``busy()`` names what else holds the board ('' if nothing)."""

    def __init__(self, device: Device, config: SessionConfig, *, busy: Callable[[], str] = lambda: "",
                 on_change: Callable[[BoardSession], None] | None = None) -> None:
        config.check()
        self.device, self.config, self.busy = device, config, busy
        self.on_change = on_change
        self.sessions: dict[str, BoardSession] = {}
        self._server: asyncio.AbstractServer | None = None
        self._handlers: set[asyncio.Task[None]] = set()   # one per connection, ended by stop()
        self._waiters: set[asyncio.Event] = set()           # ``wait_change`` callers

    @property
    def live(self) -> BoardSession | None:
        """The session that holds the board now, if any."""
        return next((s for s in self.sessions.values() if not s.ended), None)

    def find(self, workload: str) -> BoardSession | None:
        """The live session training ``workload``, if any."""
        live = self.live
        return live if live is not None and live.workload == workload else None

    def last_ended(self, workload: str) -> BoardSession | None:
        """The most recent session of ``workload`` that has ended, if any."""
        return next((s for s in reversed(list(self.sessions.values())) if s.workload == workload and s.ended), None)

    async def wait_change(self, timeout_s: float) -> None:
        """Until a session starts, reports steps or ends, or ``timeout_s`` wall seconds pass."""
        ev = asyncio.Event()
        self._waiters.add(ev)
        try:
            await asyncio.wait_for(ev.wait(), timeout_s)
        except asyncio.TimeoutError:
            pass
        finally:
            self._waiters.discard(ev)

    def ask_timing(self, session_id: str, steps: int) -> None:
        """Ask the session to time its next ``steps`` steps (told in its next reply)."""
        self.sessions[session_id]._time_next = max(1, steps)

    # --- the socket -----------------------------------------------------------------------------------
    async def start(self) -> None:
        """Listen on the configured path with the configured mode (module docstring)."""
        path = self.config.path
        if await to_thread(_answers, path):
            raise AlreadyExists(f"another agent serves sessions at {path}", field="session_socket")
        parent = os.path.dirname(path) or "."
        os.makedirs(parent, mode=0o755, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        if os.path.lexists(tmp):
            os.unlink(tmp)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(tmp)
            os.chmod(tmp, self.config.mode)
            os.replace(tmp, path)
            sock.listen(16)
        except OSError:
            sock.close()
            if os.path.lexists(tmp):
                os.unlink(tmp)
            raise
        self._server = await asyncio.start_unix_server(self._serve, sock=sock, limit=wire.MAX_LINE_BYTES + 1)
        log.info("training sessions on %s (mode %s)", path, oct(self.config.mode))

    async def stop(self) -> None:
        """Stop listening, remove the socket and close every open energy window."""
        for s in self.sessions.values():
            self._end(s, s.ended or "lost: the agent stopped")
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
            if os.path.lexists(self.config.path):
                os.unlink(self.config.path)
        handlers = list(self._handlers)
        for task in handlers:
            task.cancel()
        if handlers:
            await asyncio.wait(handlers)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        pid, uid = _peer(writer.get_extra_info("socket"))
        session: BoardSession | None = None
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            while True:
                try:
                    line = await reader.readline()
                except (ValueError, asyncio.LimitOverrunError):
                    await _reply(writer, _error(InvalidArgument(
                        f"message longer than {wire.MAX_LINE_BYTES} bytes", field="message")))
                    return
                if not line:
                    return
                try:
                    msg = wire.decode(line)
                    reply, session = await self._handle(msg, session, pid, uid)
                except JetfleetError as e:
                    reply = _error(e)
                await _reply(writer, reply)
                if session is not None and session.ended:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            if session is not None and not session.ended:
                self._end(session, "lost: the process went away without closing its session (exited or killed)")
            self._handlers.discard(task)
            writer.close()

    # --- requests ---------------------------------------------------------------------------------------
    async def _handle(self, msg: wire.Message, s: BoardSession | None, pid: int,
                      uid: int) -> tuple[wire.Message, BoardSession | None]:
        op = msg.get("op")
        if op not in wire.OPS:
            raise InvalidArgument(f"op {str(op)[:20]!r}: allowed {', '.join(wire.OPS)}", field="op")
        if op == "hello":
            if s is not None:
                raise FailedPrecondition("this connection has a session already", field="op")
            s = await self._hello(msg, pid, uid)
            return {"ok": True, "session_id": s.session_id, "board": self.device.describe().model,
                    "paced": s.paced, "batch_steps": self.config.batch_steps, "flush_s": self.config.flush_s,
                    "time_steps": self._take_timing(s)}, s
        if s is None:
            raise FailedPrecondition("say hello first", field="op")
        if op == "steps":
            await self._steps(s, msg)
            left = s.attach_until - s.steps
            batch = min(left, self.config.batch_steps) if left > 0 else self.config.batch_steps
            return {"ok": True, "time_steps": self._take_timing(s), "batch_steps": batch, "stop": s.stop_asked}, s
        if op == "begin":
            name = wire.check_name(msg.get("name"), "name")
            if name in s.windows:
                raise InvalidArgument(f"window {name!r} is open already", field="name")
            if len(s.windows) >= wire.MAX_WINDOWS:
                raise InvalidArgument(f"{wire.MAX_WINDOWS} windows are open; end one first", field="name")
            meter = EnergyMeter(self.device)
            s.windows[name] = (meter.start(), meter)
            return {"ok": True}, s
        if op == "end":
            name = wire.check_name(msg.get("name"), "name")
            if name not in s.windows:
                raise InvalidArgument(f"no window {name!r} is open (open: {', '.join(sorted(s.windows)) or 'none'})",
                                      field="name")
            t0, meter = s.windows.pop(name)
            now = self.device.now_s()
            energy = await to_thread(meter.energy_j, now)
            meter.stop()
            seconds = now - t0
            mean = energy / seconds if seconds > 0 else self.device.sample().total_w   # no time passed: power now
            return {"ok": True, "seconds": seconds, "energy_j": energy, "mean_w": mean}, s
        self._end(s, "closed")   # op == "close"
        return {"ok": True}, s

    async def _hello(self, msg: wire.Message, pid: int, uid: int) -> BoardSession:
        workload = wire.check_name(msg.get("workload"), "workload")
        budget = wire.optional_float(msg, "power_budget_w", 1.0, 1000.0)
        deadline = wire.optional_float(msg, "deadline_s", 1.0, 365 * 86400.0)
        n = msg.get("minibatches")
        minibatches = None if n is None else wire.check_count(n, "minibatches", 1, 10**12)
        paced = self.device.capabilities.emulated_steps
        if paced:
            self._emulate(workload, msg)
        holder = self.live
        if holder is not None:
            raise FailedPrecondition(f"the board is held by training session {holder.session_id} ({holder.workload}, "
                                     f"pid {holder.pid}): one training at a time", field="session")
        other = self.busy()
        if other:
            raise FailedPrecondition(f"the board is busy: {other}", field="session")
        s = BoardSession(uuid.uuid4().hex[:12], workload, pid, uid, paced, self.device.now_s(), budget, deadline,
                         minibatches, _time_next=self.config.time_steps)
        self.sessions[s.session_id] = s
        while len(self.sessions) > 64:   # ended sessions are kept a while for `devices show` and tests
            oldest = next(k for k, v in self.sessions.items() if v.ended)
            del self.sessions[oldest]
        log.info("training session %s: %s (pid %d, uid %d)%s", s.session_id, workload, pid, uid,
                 " paced by the twin" if paced else "")
        self._changed(s)
        return s

    def _emulate(self, workload: str, msg: wire.Message) -> None:
        """On an emulated board: the user's model (its cost from the hello) offered to the twin; a name the board
        knows already (a built-in, a plugin) needs none."""
        cost = msg.get("cost")
        if cost is None:
            if self.device.emulated_workload(workload) is None:
                raise InvalidArgument(f"this board is emulated: pass model= and example_input= to the Session so the "
                                      f"twin can time {workload!r} (or name a workload it has: "
                                      f"{', '.join(sorted(WORKLOADS))} or an installed plugin)", field="model")
            return
        cost = wire.check_cost(cost)
        cpu = wire.optional_float(msg, "cpu_ms_per_sample", 0.0, MAX_CPU_MS_PER_SAMPLE) or 0.0
        kind, size = cost["input"].split()
        spec = WorkloadSpec(workload, "the operator's own model (a training session)", "the operator's own", cpu,
                            kind, int(size), 2, minibatch_size=int(cost["minibatch_size"]), workers=0)
        self.device.add_workload(spec, cost)

    async def _steps(self, s: BoardSession, msg: wire.Message) -> None:
        n = wire.check_count(msg.get("n"), "n", 0, wire.MAX_STEPS_PER_REPORT)
        timed = wire.check_timings(msg.get("timed", []))
        if s.paced and n:
            s.pacing_from_s = self.device.now_s()
            try:
                await to_thread(self._pace, s.workload, n)
            finally:
                s.pacing_from_s = None
        s.steps += n
        s.reports += 1
        s.last_step_s = self.device.now_s()
        for steps, seconds in timed:
            s.timed.append((int(steps), seconds))
        if s.reports % self.config.time_every == 0 and not s._time_next:
            s._time_next = self.config.time_steps
        self._changed(s)

    def _pace(self, workload: str, n: int) -> None:
        spec = self.device.emulated_workload(workload)
        assert spec is not None   # checked at hello
        done = 0
        while done < n:   # in chunks the twin's run accepts, one segment each
            chunk = min(n - done, MAX_MINIBATCHES)
            self.device.step_training(workload, minibatch_size=spec.minibatch_size, workers=spec.workers, steps=chunk)
            done += chunk

    def _take_timing(self, s: BoardSession) -> int:
        n, s._time_next = s._time_next, 0
        return n

    def _end(self, s: BoardSession, why: str) -> None:
        if not s.ended:
            s.ended = why
            (log.info if why == "closed" else log.warning)("training session %s (%s, pid %d): %s after %d steps",
                                                            s.session_id, s.workload, s.pid, why, s.steps)
        for _t0, meter in s.windows.values():
            meter.stop()
        s.windows.clear()
        self._changed(s)

    def _changed(self, s: BoardSession) -> None:
        for ev in self._waiters:
            ev.set()
        if self.on_change is not None:
            self.on_change(s)


def _answers(path: str) -> bool:
    """Whether something accepts connections at ``path`` now."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
        return True
    except OSError:
        return False
    finally:
        probe.close()


def _peer(sock: socket.socket | None) -> tuple[int, int]:
    """(pid, uid) of the process at the other end, from the kernel (0, 0 where it cannot tell)."""
    opt = getattr(socket, "SO_PEERCRED", None)
    if sock is None or opt is None:
        return 0, 0
    pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, opt, struct.calcsize("3i")))
    return pid, uid


def _error(e: JetfleetError) -> wire.Message:
    return {"ok": False, "error": e.message, "field": e.field or ""}


async def _reply(writer: asyncio.StreamWriter, msg: wire.Message) -> None:
    writer.write(wire.encode(msg))
    await writer.drain()


__all__ = ["BoardSession", "SessionConfig", "SessionServer"]
