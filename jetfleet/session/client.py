"""A training process's session with its board's agent (``jetfleet.session``'s docstring says how to use it).

Cheap by design: ``step()`` adds to a counter and reads a monotonic clock; the steps go to the agent in one report
every ``batch_steps`` steps or ``flush_s`` seconds, whichever comes first, and the agent's reply says whether to
time the next steps one by one. Only those steps are timed, and only then is CUDA synchronised (when torch is
imported and has initialised CUDA): the rest of training stays asynchronous. Steps shorter than ``MIN_GROUP_S``
are timed in groups (a timer's resolution and the call itself would swamp one alone), synchronised at the group's
ends only.

On an emulated board the agent paces the reports: a report returns once the twin has run those steps of the
user's model in the board's current mode (at the lab's speed), so the board's clock, power and energy follow the
user's real loop."""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable

from jetfleet.shared import session_wire as wire
from jetfleet.shared.errors import InvalidArgument, JetfleetError

log = logging.getLogger(__name__)
MIN_GROUP_S = 0.005          # shorter steps are timed in groups at least this long
REPLY_TIMEOUT_S = 600.0      # a paced report on a slow lab may take a while; a dead agent closes the socket


class SessionError(JetfleetError):
    """The agent refused a request (``field`` names what), or the link to it broke."""

    code = "FAILED_PRECONDITION"


class NoAgentError(SessionError):
    """No agent answers on the session socket."""

    code = "UNAVAILABLE"


@dataclass(frozen=True)
class EnergyWindow:
    """What a board drew between ``begin(name)`` and ``end(name)``: from its rails via the agent. Unmanaged
    (``strict=False`` with no agent) only the seconds are known, and ``energy_j``/``mean_w`` are None."""

    name: str
    seconds: float            # the board's clock (an emulated board's: at its speed)
    energy_j: float | None
    mean_w: float | None


def socket_path(path: str | None = None) -> str:
    """The session socket: ``path``, else $JETFLEET_SESSION_SOCKET, else the agent's default."""
    return path or os.environ.get(wire.SOCKET_ENV, "") or wire.DEFAULT_SOCKET


def _cuda_sync() -> Callable[[], None] | None:
    """torch.cuda.synchronize when torch is already imported and has initialised CUDA; else None (no GPU work to
    wait for, and importing torch here would cost seconds)."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None) if torch is not None else None
    try:
        if cuda is not None and cuda.is_available() and cuda.is_initialized():
            return cuda.synchronize  # type: ignore[no-any-return]
    except Exception:  # noqa: BLE001 - a broken CUDA install must not stop training; time without syncing
        log.warning("torch.cuda could not be queried: step times may include queued GPU work", exc_info=True)
    return None


class Session:
    """One training process's session (module docstring). Use it as a context manager, or call ``close()``."""

    def __init__(self, workload: str, *, path: str | None = None, power_budget_w: float | None = None,
                 deadline_s: float | None = None, minibatches: int | None = None, model: Any = None,
                 example_input: Any = None, cpu_ms_per_sample: float = 0.0, strict: bool = True,
                 connect_timeout_s: float = 5.0) -> None:
        wire.check_name(workload, "workload")
        if power_budget_w is not None and deadline_s is not None:
            raise InvalidArgument("give one goal: power_budget_w or deadline_s, not both", field="goal")
        if (model is None) != (example_input is None):
            raise InvalidArgument("give the model and one example input together (or neither)", field="model")
        self.workload = workload
        self.path = socket_path(path)
        self.managed = False
        self.session_id = ""
        self.board = ""
        self.steps = 0                  # steps counted by step() (reported or not)
        # The agent asks the process to end its training (a job launched from a template has trained its length):
        # a loop that checks it after step() stops there and exits 0.
        self.stop_requested = False
        self._pending = 0
        self._batch = 64
        self._flush_s = 1.0
        self._last_flush = time.perf_counter()
        self._time_left = 0             # non-zero while timing: steps the agent asked to have timed
        self._to_time = 0               # of those, still to time
        self._timed: list[list[float]] = []
        self._group_start = 0.0
        self._group_steps = 0
        self._sync: Callable[[], None] | None = None
        self._windows: dict = {}        # name -> perf_counter at begin (unmanaged)
        self._sock: socket.socket | None = None
        hello: wire.Message = {"op": "hello", "v": wire.VERSION, "workload": workload, "pid": os.getpid(),
                               "power_budget_w": power_budget_w, "deadline_s": deadline_s,
                               "minibatches": minibatches}
        if model is not None:
            from jetfleet.session.model_cost import model_cost  # torch, only when a model is given

            hello["cost"] = model_cost(model, example_input)
            hello["cpu_ms_per_sample"] = cpu_ms_per_sample
        try:
            self._connect(connect_timeout_s)
        except NoAgentError as e:
            if strict:
                raise
            msg = f"{e.message}; training goes on UNMANAGED (no job, no power mode control, no energy figures)"
            warnings.warn(msg, RuntimeWarning, stacklevel=2)
            log.warning("%s", msg)
            return
        reply = self._call(hello)
        self.managed = True
        self.session_id, self.board = str(reply["session_id"]), str(reply.get("board", ""))
        self._batch = int(reply.get("batch_steps", self._batch))
        self._flush_s = float(reply.get("flush_s", self._flush_s))
        self._start_timing(int(reply.get("time_steps", 0)))

    # --- the link ---------------------------------------------------------------------------------------
    def _connect(self, timeout_s: float) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout_s)
        try:
            sock.connect(self.path)
        except OSError as e:
            sock.close()
            raise NoAgentError(f"no jetfleet agent at {self.path} ({e.strerror or e}): start `jetfleet agent run` "
                               f"on this board, or point {wire.SOCKET_ENV} or path= at its --session-socket",
                               field="path") from None
        sock.settimeout(REPLY_TIMEOUT_S)
        self._sock = sock
        self._rfile = sock.makefile("rb")

    def _call(self, msg: wire.Message) -> wire.Message:
        """Send one request and read its reply; SessionError for a refusal or a broken link."""
        if self._sock is None:
            raise SessionError("the session is closed", field="session")
        try:
            self._sock.sendall(wire.encode(msg))
            line = self._rfile.readline(wire.MAX_LINE_BYTES + 1)
        except OSError as e:
            self._drop()
            raise SessionError(f"the link to the agent at {self.path} broke: {e}", field="session") from None
        if not line:
            self._drop()
            raise SessionError(f"the agent at {self.path} closed the session", field="session")
        reply = wire.decode(line)
        if not reply.get("ok"):
            raise SessionError(str(reply.get("error", "refused")), field=str(reply.get("field") or "session"))
        return reply

    def _drop(self) -> None:
        if self._sock is not None:
            self._rfile.close()
            self._sock.close()
            self._sock = None

    # --- steps --------------------------------------------------------------------------------------------
    def step(self, n: int = 1) -> None:
        """Count ``n`` optimiser steps done (call it once per step, or with the number done since the last call)."""
        if n.__class__ is not int or n < 1:
            raise InvalidArgument(f"step(n={n!r}): n must be an integer >= 1", field="n")
        self.steps += n
        if not self.managed:
            return
        now = time.perf_counter()
        if self._time_left:
            now = self._timed_step(n, now)
        self._pending += n
        if self._pending >= self._batch or now - self._last_flush >= self._flush_s:
            self.flush()

    def _timed_step(self, n: int, now: float) -> float:
        self._group_steps += n
        self._to_time -= n
        # CUDA is synchronised only where a group may close: the unsynchronised clock never runs ahead of the GPU's
        # work, so while it says the group is shorter than MIN_GROUP_S (and steps asked for remain) the GPU's is too
        if self._sync is not None and (now - self._group_start >= MIN_GROUP_S or self._to_time <= 0):
            self._sync()
            now = time.perf_counter()
        if now - self._group_start >= MIN_GROUP_S:
            self._timed.append([self._group_steps, now - self._group_start])
            self._group_start, self._group_steps = now, 0
            if self._to_time <= 0:     # the steps asked for are timed (a group may run past them)
                self._time_left = 0
        return now

    def _start_timing(self, steps: int) -> None:
        self._time_left = self._to_time = max(0, steps)
        self._group_steps = 0
        if steps:
            self._sync = _cuda_sync()
            if self._sync is not None:
                self._sync()
        self._group_start = time.perf_counter()

    def flush(self) -> None:
        """Report the steps counted so far now (``step()`` does it every few steps by itself)."""
        if not self.managed or (not self._pending and not self._timed):
            return
        msg = {"op": "steps", "n": self._pending, "timed": self._timed}
        self._pending, self._timed = 0, []
        reply = self._call(msg)
        self._last_flush = time.perf_counter()
        self._batch = int(reply.get("batch_steps", self._batch))
        self.stop_requested = self.stop_requested or bool(reply.get("stop", False))
        if not self._time_left:
            self._start_timing(int(reply.get("time_steps", 0)))

    # --- energy windows -----------------------------------------------------------------------------------
    def begin(self, name: str) -> None:
        """Open the energy window ``name`` (the steps so far are reported first)."""
        wire.check_name(name, "name")
        if not self.managed:
            if name in self._windows:
                raise InvalidArgument(f"window {name!r} is open already", field="name")
            self._windows[name] = time.perf_counter()
            return
        self.flush()
        self._call({"op": "begin", "name": name})

    def end(self, name: str) -> EnergyWindow:
        """Close the energy window ``name``: the board's joules, seconds and mean power since ``begin(name)``."""
        wire.check_name(name, "name")
        if not self.managed:
            if name not in self._windows:
                raise InvalidArgument(f"no window {name!r} is open", field="name")
            return EnergyWindow(name, time.perf_counter() - self._windows.pop(name), None, None)
        self.flush()
        r = self._call({"op": "end", "name": name})
        return EnergyWindow(name, float(r["seconds"]), float(r["energy_j"]), float(r["mean_w"]))

    def close(self) -> None:
        """Report the last steps and end the session (the agent learns the training is over)."""
        if self._sock is None:
            return
        try:
            self.flush()
            self._call({"op": "close"})
        finally:
            self._drop()
            self.managed = False

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
