"""A training command that adopts the operator's own training (``RunTraining.attach``): the live session on this
board training that workload (``sessions.py``) becomes the command's run. Its reported steps are the command's
minibatches, counted from the moment it is adopted; progress (steps, board time, the board's energy, the mode)
goes to the controller as a built-in training's does, so the job's lifecycle, closed loop and verdict are the same.
A job's mode steps apply between the user's steps (on a twin, from the next reported step).

It ends well when the session has reported ``minibatches`` steps (the process trains on, unmanaged); the session is
told to size its reports to the steps the command still needs, so its count ends at the command's length (the one
report in flight when it is adopted may run past it: what the board trained is what it counts). It fails,
naming why, when no such session steps within the timeout, when the session stops stepping for that long, when
its process closes the session or goes away first (exited or killed); the board keeps the last mode it confirmed
(always one of its catalog's) and is free for the next work.

A process the agent launched from a template (``launcher.py``) is adopted the same way, with two differences: only
a session of that process (its process group) is adopted, and when the process exits first the command fails at
once, naming its exit status and the last line it printed; its output tail goes with every progress report and
the result."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Callable

from jetfleet.agent.device.base import Device
from jetfleet.agent.energy import EnergyMeter
from jetfleet.agent.launcher import Launched
from jetfleet.agent.sessions import BoardSession, SessionServer
from jetfleet.shared.convert import mode_to_pb
from jetfleet.shared.errors import Cancelled, DeadlineExceeded, FailedPrecondition, InvalidArgument
from jetfleet.shared.proto import agent_pb2
from jetfleet.shared.session_wire import check_name
from jetfleet.shared.workloads import MAX_MINIBATCHES

DEFAULT_ATTACH_TIMEOUT_S = 60.0
MAX_ATTACH_TIMEOUT_S = 86400.0


def check_attach(r: agent_pb2.RunTraining) -> None:
    """The bounds of an attach command (the workload is a session's name, not a registered workload)."""
    check_name(r.workload, "run_training.workload")
    if not 1 <= r.minibatches <= MAX_MINIBATCHES:
        raise InvalidArgument(f"minibatches={r.minibatches} is out of range; allowed 1..{MAX_MINIBATCHES}",
                              field="run_training.minibatches")
    if not 0 <= r.attach_timeout_s <= MAX_ATTACH_TIMEOUT_S:
        raise InvalidArgument(f"attach_timeout_s={r.attach_timeout_s:g} is out of range; allowed "
                              f"0..{MAX_ATTACH_TIMEOUT_S:g}", field="run_training.attach_timeout_s")


async def run_attached(device: Device, server: SessionServer | None, cid: str, r: agent_pb2.RunTraining,
                       cancel: threading.Event, report: Callable[[agent_pb2.TrainingProgress], None] | None,
                       count: Callable[[int], None], launched: Launched | None = None) -> agent_pb2.TrainingResult:
    """Adopt the session training ``r.workload`` and follow it (module docstring); ``count(n)`` is told each new
    step (the board's own count of what it trained for the command). ``launched``: the process the agent launched
    for the job, whose session alone is adopted."""
    if server is None:
        raise FailedPrecondition("this agent takes no training sessions: start it with --session-socket",
                                 field="run_training.attach")
    timeout_s = r.attach_timeout_s or DEFAULT_ATTACH_TIMEOUT_S
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s

    def find() -> BoardSession | None:
        s = server.find(r.workload)   # type: ignore[union-attr]
        return s if s is None or launched is None or _in_group(s.pid, launched.pid) else None

    session = find()
    while session is None:
        if launched is not None and launched.returncode is not None:
            when = (f"after {launched.trained} of the job's {launched.minibatches} steps" if launched.trained else
                    "before its session joined (it must open Session($JETFLEET_WORKLOAD) on $JETFLEET_SESSION_SOCKET)")
            raise FailedPrecondition(f"{launched.ended_text()} {when}", field="run_training.launch")
        if cancel.is_set():
            raise Cancelled("cancelled before a training session joined", field="command_id")
        if loop.time() >= deadline:
            live = server.live
            other = f" (the board's session trains {live.workload!r})" if live is not None else ""
            last = server.last_ended(r.workload)
            gone = (f"; its last process (pid {last.pid}) {_how(last.ended)} after {last.steps} steps"
                    if last is not None else "")
            raise DeadlineExceeded(f"no training session named {r.workload!r} joined this board within "
                                   f"{timeout_s:g} s{other}{gone}: start the training process with "
                                   f"Session({r.workload!r}, ...)", field="run_training.attach")
        await server.wait_change(min(0.5, deadline - loop.time()))
        session = find()
    meter = EnergyMeter(device)
    t0 = meter.start()
    base, seen = session.steps, session.steps
    if session.pacing_from_s is not None or session.reports:
        # the first report this command counts holds the steps the process took since its previous report: its time
        # (and energy) began where that report ended, as every later report's does, so a short command's steps take
        # what a long one's do (the process's own time between reports included: on a real board that is real time,
        # on the twin the host's time for the user's loop) and its power is not diluted (or 0 W)
        began = session.last_step_s if session.reports else session.pacing_from_s
        assert began is not None
        t0 = min(t0, began)
        meter.extend_back(t0)
    last_t = t0
    times: list[float] = []
    next_report = t0 + r.progress_interval_s
    last_step_wall = loop.time()

    def progress(done: int, final: bool, now: float) -> None:
        if report is not None:
            report(agent_pb2.TrainingProgress(command_id=cid, minibatches_done=done, t_s=now, elapsed_s=now - t0,
                                              energy_j=meter.energy_j(now), mode=mode_to_pb(device.read_mode()),
                                              final=final, output_tail=tail()))

    def tail() -> list[str]:
        return launched.lines() if launched is not None else []

    session.attach_until = base + r.minibatches   # reports end where the command does (after the one in flight)
    try:
        while True:
            steps = session.steps
            if steps > seen:
                now = max(last_t, session.last_step_s)   # the board's clock when these steps were counted
                n = steps - seen
                per_s = (now - last_t) / n      # the board seconds of a report, spread over its steps
                take = min(n, r.minibatches - len(times))   # the report in flight at adoption may run past the end
                times.extend([per_s] * take)
                count(take)
                seen, last_step_wall = steps, loop.time()
                last_t = now if take == n else last_t + per_s * take
                if r.progress_interval_s and now >= next_report:
                    progress(len(times), False, last_t)
                    next_report = now + r.progress_interval_s
            if len(times) >= r.minibatches:
                break
            if cancel.is_set():
                raise Cancelled(f"training cancelled after {len(times)} steps of {r.workload!r}", field="command_id")
            if session.ended and launched is not None:
                await _exited(launched)
                raise FailedPrecondition(f"{launched.ended_text()} after {len(times)} of {r.minibatches} steps of "
                                         "this command" if launched.returncode is not None else
                                         f"the launched {launched.template.name!r} (pid {launched.pid}) closed its "
                                         f"session after {len(times)} of {r.minibatches} steps of this command",
                                         field="run_training.launch")
            if session.ended:
                raise FailedPrecondition(f"the training process {r.workload!r} (pid {session.pid}) "
                                         f"{_how(session.ended)} after "
                                         f"{len(times)} of {r.minibatches} steps", field="run_training.attach")
            if loop.time() - last_step_wall >= timeout_s:
                raise DeadlineExceeded(f"the training process {r.workload!r} (pid {session.pid}) has not called "
                                       f"step() for {timeout_s:g} s (after {len(times)} of {r.minibatches} steps)",
                                       field="run_training.attach")
            await server.wait_change(min(0.5, timeout_s))
        if launched is not None and launched.trained >= launched.minibatches:
            session.stop_asked = True   # the job it was launched for has its length: the process is asked to end
    finally:
        session.attach_until = 0
        if r.progress_interval_s:
            progress(len(times), True, last_t)
        meter.stop()
    # up to the last step counted (a report's steps past the command's end are the process's own, unmanaged)
    return agent_pb2.TrainingResult(workload=r.workload, minibatch_times_s=times, start_s=t0, end_s=last_t,
                                    energy_j=meter.energy_j(last_t), elapsed_s=last_t - t0, output_tail=tail())


async def _exited(launched: Launched, timeout_s: float = 5.0) -> None:
    """A launched process whose session ended: give it a moment to exit, so its status can be named."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while launched.returncode is None and loop.time() < deadline:
        await asyncio.sleep(0.05)


def _in_group(pid: int, pgid: int) -> bool:
    """Whether process ``pid`` is in process group ``pgid`` (a launched process and its children)."""
    try:
        return os.getpgid(pid) == pgid
    except OSError:
        return False


def _how(ended: str) -> str:
    """How a session ended, in words."""
    return "closed its session" if ended == "closed" else "went away (exited or killed)"
