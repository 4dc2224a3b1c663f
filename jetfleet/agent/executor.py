"""Runs commands from the controller on the device, without gRPC. The agent trusts nothing it is
sent: modes must be in the board's own catalog, workloads in its registry (the built-ins and the
plugins installed on this board), sizes within bounds. Idempotent by command id: a repeated id
gets the remembered result, or waits for the run in flight, and never executes twice.

One thing at a time on the board, with one exception: a training job's own mode step
(``SetMode.during_command_id`` naming the training that runs) is applied between two of its
minibatches instead of waiting for the run to end. While a training runs it reports its progress
(minibatches, board time, energy) through ``on_progress``, every ``progress_interval_s`` of board
time and once at its end.

Profiles queued together (a campaign fills a board's pipeline with several modes) run back to back in one
worker thread while they hold the board, and results that were quick go back together (``HOLD_S``): a quick
mode costs the agent's event loop a few small steps, not a thread hop and a message of its own. A profile the
link has checked (``check``, once, before it is acknowledged) is queued at once, its result a future the worker
thread fills, with no task of its own. Everything
still runs in the order it came: a command of another kind goes after the profiles queued before it and before
those queued after it."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from jetfleet.agent import roofline
from jetfleet.agent.attach import check_attach, run_attached
from jetfleet.agent.device.base import Device
from jetfleet.agent.energy import EnergyMeter
from jetfleet.agent.launcher import Launcher
from jetfleet.agent.metrics import AgentMetrics
from jetfleet.agent.profiler import ProfileRequest, profile, profile_result_pb
from jetfleet.agent.serving import (
    DEFAULT_LATENCY_WINDOW_S,
    StreamStats,
    check_inference_request,
    check_serving,
    measure_inference,
    serve_beside_training,
)
from jetfleet.agent.sessions import SessionServer
from jetfleet.shared import defaults
from jetfleet.shared.bounds import check_command_id
from jetfleet.shared.catalog import PowerMode
from jetfleet.shared.compat import to_thread
from jetfleet.shared.convert import mode_from_pb, mode_to_pb
from jetfleet.shared.errors import Cancelled, FailedPrecondition, InvalidArgument, JetfleetError
from jetfleet.shared.grpc_errors import error_pb
from jetfleet.shared.proto import agent_pb2
from jetfleet.shared.workloads import WorkloadRegistry, check_run_args

MAX_PROGRESS_INTERVAL_S = 3600.0
# Results of queued profiles that took less than this are held (at most this long, and MAX_HELD of them) to go
# back to the event loop, and to the controller, together; a slower one is handed over as soon as it ends, and the
# event loop collects what is held every HOLD_S, whatever the profile running then does.
HOLD_S = 0.02
MAX_HELD = 8
_NO_SEQ = float("inf")

log = logging.getLogger(__name__)
__all__ = ["Cancelled", "Checked", "CommandExecutor"]


@dataclass(frozen=True)
class Checked:
    """A command that passed ``CommandExecutor.check``, with what the check built: a profile's request."""

    profile: ProfileRequest | None = None


class CommandExecutor:
    """Checks and runs the controller's commands on one device, one at a time, and remembers recent results by id."""

    def __init__(self, device: Device, *, remembered: int = 512, metrics: AgentMetrics | None = None,
                 workloads: WorkloadRegistry | None = None, sessions: SessionServer | None = None,
                 launcher: Launcher | None = None) -> None:
        self.device = device
        self.metrics = metrics
        self.catalog = device.describe().catalog
        self.workloads = workloads or WorkloadRegistry.builtin()
        self.instance_id = uuid.uuid4().hex   # what it remembers and runs dies with this executor
        # Called from a worker thread with each progress report of a running training.
        self.on_progress: Callable[[agent_pb2.TrainingProgress], None] | None = None
        # The operator's own training sessions (``sessions.py``): one that holds the board keeps other work off it,
        # and a training command may adopt it (``attach.py``).
        self.sessions = sessions
        self.launcher = launcher   # the job templates it may launch (``launcher.py``); None: it launches nothing
        self._results: OrderedDict[str, agent_pb2.CommandResult] = OrderedDict()
        self._running: dict[str, asyncio.Future[agent_pb2.CommandResult]] = {}   # a task, or a queued profile's future
        self._starting: set[asyncio.Future[agent_pb2.CommandResult]] = set()   # of those tasks, the ones not started
        self._cancel: dict[str, threading.Event] = {}
        self._training: set[str] = set()    # training commands running now (their own mode steps go through)
        self._attaching: set[str] = set()   # of those, the ones adopting an operator's training session
        # Minibatches this board trained per training command (recent ones): the board's own count of its work,
        # which the controller's accounting is checked against (exactly once is judged here, on the board).
        self.trained: OrderedDict[str, int] = OrderedDict()
        self._remembered = remembered
        self.columns = False   # profile results carry their power samples as columns (the controller reads them)
        self._device_lock = asyncio.Lock()  # one board, one thing at a time (cancel and a job's own steps excepted)
        self._step_lock = asyncio.Lock()    # a step and the end of the training it belongs to never interleave
        # Profiles waiting for the board (number, id, request, cancel, future, the result to fill), run back to back
        # by one worker thread (``_profile_batch``); appended on the event loop, taken in the thread (a deque: both
        # are safe).
        self._profile_q: deque[tuple[int, str, ProfileRequest, threading.Event,
                                     asyncio.Future[agent_pb2.CommandResult], agent_pb2.CommandResult]] = deque()
        self._profiles_task: asyncio.Task[None] | None = None
        # Commands and queued profiles are numbered as they come (``_seq``): a command of another kind waiting for
        # the board (its number in ``_waiting``, the least in ``_first_waiting``, read by the worker thread) goes
        # after the profiles numbered before it and before those after it, as one lock in arrival order would.
        self._seq = 0
        self._waiting: set[int] = set()
        self._first_waiting: float = _NO_SEQ
        self._moved: list[asyncio.Future[None]] = []   # commands waiting for queued profiles to move
        self.profile_hops = 0      # worker-thread hops that ran queued profiles (tests and logs)
        self.profiles_run = 0      # profiles started on the board (tests: the board's own count)
        # What the worker thread finished and the event loop has not collected yet (guarded by the lock): each
        # profile's future, its result (written), the mode it ran in, or why it failed.
        self._finished: list[tuple[asyncio.Future[agent_pb2.CommandResult], agent_pb2.CommandResult,
                                   PowerMode | None, BaseException | None]] = []
        self._finished_lock = threading.Lock()
        self.settled: deque[int] = deque(maxlen=64)   # results per collection, the recent ones (tests and logs)

    @property
    def busy(self) -> str:
        """The id of a command running now, or '' when idle (reported in heartbeats)."""
        return next(iter(self._running), "")

    @property
    def launches(self) -> list[str]:
        """The launch ids of the template processes still running here (reported in heartbeats)."""
        return self.launcher.alive() if self.launcher is not None else []

    @property
    def in_hand(self) -> tuple[str, ...]:
        """The ids of the commands received and not answered yet (running, or waiting for the board), in order."""
        return tuple(self._running)

    def remembered(self, command_id: str) -> agent_pb2.CommandResult | None:
        """The result of a recent command that ended here, or None."""
        return self._results.get(command_id)

    @property
    def busy_with_own_work(self) -> str:
        """A running command other than one adopting a training session ('' if none): what keeps a session off."""
        return next((c for c in self._running if c not in self._attaching), "")

    def check(self, cmd: agent_pb2.Command) -> Checked:
        """Refuse a malformed command before acknowledging it; what the check built, for ``execute`` (which then does
        not check the command again)."""
        check_command_id(cmd.command_id, "command_id")
        kind = cmd.WhichOneof("kind")
        if kind == "set_mode":
            mode = self.catalog.validate(mode_from_pb(cmd.set_mode.mode))
            preset = cmd.set_mode.preset
            named = self.catalog.preset_named(preset) if preset else None
            if preset and (named is None or self.catalog.presets[named] != mode):
                raise InvalidArgument(f"preset {preset[:64]!r} is not {mode} on this board (its presets: "
                                      f"{', '.join(sorted(self.catalog.presets)) or 'none'})", field="set_mode.preset")
            if cmd.set_mode.during_command_id:
                check_command_id(cmd.set_mode.during_command_id, "set_mode.during_command_id")
        elif kind == "run_training":
            r = cmd.run_training
            if r.attach:
                check_attach(r)
                if r.HasField("launch"):
                    self._launcher().check(r.launch)
                return Checked()
            self.workloads.get(r.workload)
            check_run_args(r.minibatches, r.minibatch_size or defaults.MINIBATCH_SIZE, r.workers)
            if not 0 <= r.progress_interval_s <= MAX_PROGRESS_INTERVAL_S:
                raise InvalidArgument(f"progress_interval_s={r.progress_interval_s:g} is out of range; allowed "
                                      f"0..{MAX_PROGRESS_INTERVAL_S:g}", field="run_training.progress_interval_s")
            check_serving(r, self.workloads)
        elif kind == "run_inference":
            self.catalog.validate(mode_from_pb(cmd.run_inference.mode))
            check_inference_request(cmd.run_inference, self.workloads)
        elif kind == "cancel":
            check_command_id(cmd.cancel.target_command_id, "cancel.target_command_id")
        elif kind == "run_profile":
            req = self._profile_request(cmd)
            req.check(self.workloads)
            return Checked(req)
        elif kind == "run_roofline":
            self.catalog.validate(mode_from_pb(cmd.run_roofline.mode))
            roofline.check_request(cmd.run_roofline.seconds, cmd.run_roofline.sample_interval_s)
        else:
            raise InvalidArgument("command has no kind", field="kind")
        return Checked()

    async def execute(self, cmd: agent_pb2.Command, checked: Checked | None = None) -> agent_pb2.CommandResult:
        """Run a command at most once per id and return its result; a repeated id gets the same result.

        ``checked``: what ``check`` returned for this very command (it is not checked again). A command in flight
        is joined, not restarted. Failures come back as a result with ``ok`` False, never as an exception."""
        run = self.submit(cmd, checked)
        if isinstance(run, agent_pb2.CommandResult):
            return run
        return await asyncio.shield(run)   # a waiter that gives up (its session ended) does not stop the run

    def submit(self, cmd: agent_pb2.Command, checked: Checked | None = None
               ) -> agent_pb2.CommandResult | asyncio.Future[agent_pb2.CommandResult]:
        """``execute`` without the wait: the result remembered for this id, or the run's future (the run in flight
        with this id, joined; else a new one). Whoever holds the future must not cancel it: the run is the board's."""
        cid = cmd.command_id
        if cid in self._results:
            return self._results[cid]
        run = self._running.get(cid)
        if run is None:
            # The run belongs to the board, not to the session that asked for it: a session that ends (a stream
            # break, a controller restart) stops waiting, while the run goes on and its result is remembered when
            # it ends, so the id sent again joins the run or gets that result. It is never started twice.
            # A campaign's mode is queued now, with no task of its own, unless a command that came before it has a
            # task that has not started yet (it takes its place in order when it starts: this one waits its turn).
            if checked is not None and checked.profile is not None and not self._starting and not self._held_by():
                run = self._queue_profile(cmd, checked.profile)
            else:
                run = asyncio.create_task(self._run(cmd, checked))
                self._starting.add(run)
            self._running[cid] = run
            run.add_done_callback(functools.partial(self._settled, cid))
        return run

    def _settled(self, cid: str, run: asyncio.Future[agent_pb2.CommandResult]) -> None:
        """A run ended: remember its result by id (every failure is answered with a result)."""
        self._running.pop(cid, None)
        self._starting.discard(run)   # (a task cancelled before it started)
        if run.cancelled():   # the event loop is closing under it: nothing to remember
            return
        self._results[cid] = run.result()
        while len(self._results) > self._remembered:
            self._results.popitem(last=False)

    async def _run(self, cmd: agent_pb2.Command, checked: Checked | None = None) -> agent_pb2.CommandResult:
        self._starting.discard(asyncio.current_task())   # type: ignore[arg-type]
        out = agent_pb2.CommandResult(command_id=cmd.command_id, ok=True)
        kind = cmd.WhichOneof("kind")
        try:
            if checked is None:
                checked = self.check(cmd)
            if kind == "cancel":
                target = cmd.cancel.target_command_id
                ev = self._cancel.get(target)
                if ev is not None:
                    ev.set()
                # a launch's id (its job's) stops the process it launched: the job ended without it
                stopped = self.launcher is not None and await self.launcher.stop(target, "its job ended without it")
                out.cancelled = ev is not None or stopped
                return out
            if kind == "set_mode":
                out.confirmed_mode.CopyFrom(mode_to_pb(await self._set_mode(cmd.set_mode)))
                return out
            holder = self._held_by()
            if holder and not (kind == "run_training" and cmd.run_training.attach):
                raise FailedPrecondition(f"the board is held by {holder}: one training at a time", field="board")
            if kind == "run_profile":
                assert checked.profile is not None
                return await self._queue_profile(cmd, checked.profile)
            async with self._board():
                if kind == "run_training":
                    out.training.CopyFrom(await self._train(cmd))
                elif kind == "run_roofline":
                    out.roofline.CopyFrom(await self._roofline(cmd))
                elif kind == "run_inference":
                    out.inference.CopyFrom(await self._inference(cmd))
        except JetfleetError as e:
            out.ok = False
            out.error.CopyFrom(error_pb(e))
        except Exception as e:  # a device failure we did not foresee: report, keep the agent alive
            log.exception("command %s failed", cmd.command_id)
            out.ok = False
            out.error.CopyFrom(error_pb(e))
        return out

    def _held_by(self) -> str:
        """The training session that holds the board ('' if none)."""
        live = self.sessions.live if self.sessions is not None else None
        return f"training session {live.session_id} ({live.workload}, pid {live.pid})" if live is not None else ""

    def close(self) -> None:
        """The agent is stopping: runs in flight stop after their current minibatch (a process that dies stops them too)."""
        for ev in self._cancel.values():
            ev.set()

    async def _set_mode(self, r: agent_pb2.SetMode) -> PowerMode:
        mode = mode_from_pb(r.mode)
        if r.during_command_id:
            async with self._step_lock:
                if r.during_command_id in self._training:   # the job's own step, between two minibatches
                    return await self._apply(mode, r.preset)
        async with self._board():
            return await self._apply(mode, r.preset)

    @contextlib.asynccontextmanager
    async def _board(self) -> AsyncIterator[None]:
        """Hold the board for a command other than a queued profile, in the order the commands came: after the
        profiles queued before it (waiting while they run), before those queued after it (the worker thread stops
        at the first of them while this waits)."""
        seq = self._next_seq()
        self._waiting.add(seq)
        self._first_waiting = min(self._waiting)
        try:
            while self._first_queued() < seq:   # profiles that came before it are still queued
                moved: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._moved.append(moved)
                await moved
            await self._device_lock.acquire()
        finally:
            self._waiting.discard(seq)
            self._first_waiting = min(self._waiting, default=_NO_SEQ)
        try:
            yield
        finally:
            self._device_lock.release()

    def _first_queued(self) -> float:
        """The number of the first queued profile (the worker thread may take it meanwhile), or _NO_SEQ."""
        try:
            return self._profile_q[0][0]
        except IndexError:
            return _NO_SEQ

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _queue_moved(self) -> None:
        """Wake the commands waiting for the profiles queued before them (they look again)."""
        moved, self._moved = self._moved, []
        for fut in moved:
            if not fut.done():
                fut.set_result(None)

    async def _apply(self, mode: PowerMode, preset: str = "") -> PowerMode:
        confirmed = await to_thread(self.device.apply_mode, mode, preset)
        if self.metrics:
            self.metrics.set_mode(confirmed)
        return confirmed

    def _profile_request(self, cmd: agent_pb2.Command) -> ProfileRequest:
        r = cmd.run_profile
        mode = self.catalog.validate(mode_from_pb(r.mode))
        return ProfileRequest(r.workload, mode, r.minibatches, r.minibatch_size or defaults.MINIBATCH_SIZE, r.workers,
                              r.warmup_s if r.HasField("warmup_s") else None, r.sample_interval_s or defaults.SAMPLE_INTERVAL_S)

    def _queue_profile(self, cmd: agent_pb2.Command, req: ProfileRequest) -> asyncio.Future[agent_pb2.CommandResult]:
        """Queue a checked profile for the board (``_run_profiles`` runs the queue); the future of its result, which
        the worker thread writes and ``_collect`` settles. Cancellable while it waits for the board (a campaign
        sends the next modes early)."""
        cid = cmd.command_id
        ev = self._cancel[cid] = threading.Event()
        fut: asyncio.Future[agent_pb2.CommandResult] = asyncio.get_running_loop().create_future()
        self._profile_q.append((self._next_seq(), cid, req, ev, fut, agent_pb2.CommandResult(command_id=cid, ok=True)))
        if self._profiles_task is None:
            self._profiles_task = asyncio.create_task(self._run_profiles())
        return fut

    async def _run_profiles(self) -> None:
        """Hold the board and run the queued profiles in a worker thread until none is left; a command of another
        kind that waits for the board gets it between two of them (the lock is first-come, first-served). While
        the thread runs, what it finished is collected every HOLD_S: a result waits at most that long, whatever
        the profile after it does (runs for minutes, hangs, or takes the agent down)."""
        loop = asyncio.get_running_loop()
        timer: asyncio.TimerHandle | None = None

        def tick() -> None:
            nonlocal timer
            self._collect()
            timer = loop.call_later(HOLD_S, tick)

        try:
            while self._profile_q:
                async with self._device_lock:
                    timer = loop.call_later(HOLD_S, tick)
                    try:
                        await to_thread(self._profile_batch, loop)
                    finally:
                        timer.cancel()
                        if not loop.is_closed():   # (closed: the task is being discarded with its loop)
                            self._collect()
                            self._queue_moved()
                await asyncio.sleep(0)   # a command it stopped for, just woken, takes its place at the lock first
        finally:
            self._profiles_task = None

    def _profile_batch(self, loop: asyncio.AbstractEventLoop) -> int:
        """In a worker thread: run queued profiles one after the other until the queue is empty or the next one came
        after a command of another kind that waits for the board; returns how many it took. Each outcome goes to
        ``_finished``; the event loop collects them (``_collect``) at once after a profile that took HOLD_S or more,
        after MAX_HELD of them, and every HOLD_S."""
        held = taken = 0
        while True:
            try:
                seq = self._profile_q[0][0]   # only this thread takes from the queue: the one seen is the one taken
            except IndexError:
                break
            if self._first_waiting < seq:
                break
            _, cid, req, ev, fut, out = self._profile_q.popleft()
            taken += 1
            if taken == 1:
                self.profile_hops += 1   # a hop counts once it runs a profile
            columns = self.columns   # as the controller of the session now reads them
            start = time.perf_counter()
            mode: PowerMode | None = None
            error: BaseException | None = None
            try:
                if ev.is_set():   # cancelled while it waited for the board: it never starts
                    raise Cancelled(f"profile {cid} cancelled before it started", field="command_id")
                self.profiles_run += 1
                # the wire message too, here: a long window holds tens of thousands of samples
                p = profile(self.device, req, self._observer(req.workload), ev, self.workloads)
                profile_result_pb(p, columns=columns, into=out.profile)
                mode = p.mode
            except Exception as e:   # answered as the command's failed result
                error = e
            with self._finished_lock:
                self._finished.append((fut, out, mode, error))
            held += 1
            if time.perf_counter() - start >= HOLD_S or held >= MAX_HELD:
                loop.call_soon_threadsafe(self._collect)
                held = 0
        return taken

    def _collect(self) -> None:
        """On the event loop: settle the profiles the worker thread finished (in the order they ended), a failure as
        its failed result; the board's mode metric once, the last mode profiled."""
        with self._finished_lock:
            outcomes, self._finished = self._finished, []
        if not outcomes:
            return
        self.settled.append(len(outcomes))
        last: PowerMode | None = None
        for fut, out, mode, error in outcomes:
            self._cancel.pop(out.command_id, None)
            if error is not None:
                out.ok = False
                out.ClearField("profile")
                if not isinstance(error, JetfleetError):   # a device failure we did not foresee (error_pb logs it)
                    log.error("command %s failed: %r", out.command_id, error)
                out.error.CopyFrom(error_pb(error))
            else:
                last = mode
            if not fut.done():
                fut.set_result(out)
        if last is not None and self.metrics:
            self.metrics.set_mode(last)
        self._queue_moved()

    async def _roofline(self, cmd: agent_pb2.Command) -> agent_pb2.RooflineResult:
        r = cmd.run_roofline
        mode = self.catalog.validate(mode_from_pb(r.mode))
        ev = self._cancel[cmd.command_id] = threading.Event()
        try:
            result = await to_thread(roofline.measure, self.device, mode, r.seconds, r.sample_interval_s, ev)
        finally:
            self._cancel.pop(cmd.command_id, None)
        if self.metrics:
            self.metrics.set_mode(mode_from_pb(result.mode))
        return result

    async def _inference(self, cmd: agent_pb2.Command) -> agent_pb2.InferenceResult:
        ev = self._cancel[cmd.command_id] = threading.Event()
        try:
            result = await to_thread(measure_inference, self.device, cmd.run_inference, self.workloads, ev)
        finally:
            self._cancel.pop(cmd.command_id, None)
        if self.metrics:
            self.metrics.set_mode(mode_from_pb(result.mode))
        return result

    def _observer(self, workload: str) -> Callable[[int, float], None] | None:
        metrics = self.metrics
        if metrics is None:
            return None
        observe = metrics.minibatch_observer(workload)
        return lambda i, t: observe(t)

    def _launcher(self) -> Launcher:
        if self.launcher is None:
            raise FailedPrecondition("this agent launches no templates: start it with --templates FILE (and "
                                     "--session-socket)", field="run_training.launch")
        return self.launcher

    async def _attached(self, cmd: agent_pb2.Command) -> agent_pb2.TrainingResult:
        """The operator's own training adopted as this command (``attach.py``); the job's steps go through. A
        launched one (``launcher.py``) is started by its job's first command, stopped when a command of its job
        fails or is cancelled, and once it trained the job's length it must exit 0 within its template's
        ``exit_wait_s``."""
        cid = cmd.command_id
        r = cmd.run_training
        launched = self._launcher().ensure(r.launch) if r.HasField("launch") else None
        ev = self._cancel[cid] = threading.Event()
        self._training.add(cid)
        self._attaching.add(cid)
        self.trained[cid] = self.trained.get(cid, 0)

        def count(n: int) -> None:
            self.trained[cid] = self.trained.get(cid, 0) + n
            if launched is not None:
                launched.trained += n

        try:
            result = await run_attached(self.device, self.sessions, cid, r, ev, self.on_progress, count, launched)
            if launched is not None and launched.trained >= launched.minibatches:
                await self._launcher().finish(launched)
                del result.output_tail[:]
                result.output_tail.extend(launched.lines())   # to its last line
            return result
        except JetfleetError as e:
            if launched is not None:
                await self._launcher().stop(launched.launch_id, f"its job's command failed: {e.message}"[:200])
            raise
        finally:
            async with self._step_lock:
                self._training.discard(cid)
            self._attaching.discard(cid)
            self._cancel.pop(cid, None)

    async def _train(self, cmd: agent_pb2.Command) -> agent_pb2.TrainingResult:
        r = cmd.run_training
        cid = cmd.command_id
        if r.attach:
            return await self._attached(cmd)
        ev = self._cancel[cid] = threading.Event()
        observe = self._observer(r.workload)
        meter = EnergyMeter(self.device)
        t0 = meter.start()
        done = [0]
        next_report = [t0 + r.progress_interval_s]
        stats = (StreamStats(r.latency_budget_s, r.latency_window_s or DEFAULT_LATENCY_WINDOW_S,
                             int(r.inference_batch_size)) if r.inference_workload else None)

        def report(final: bool) -> None:
            sink = self.on_progress
            if sink is None:
                return
            now = self.device.now_s()
            msg = agent_pb2.TrainingProgress(command_id=cid, minibatches_done=done[0], t_s=now, elapsed_s=now - t0,
                                             energy_j=meter.energy_j(now), mode=mode_to_pb(self.device.read_mode()),
                                             final=final)
            if stats is not None:
                msg.inference.CopyFrom(stats.report(now))
            sink(msg)

        metrics = self.metrics

        def on_minibatch(i: int, t: float) -> None:
            done[0] = i + 1
            self.trained[cid] = self.trained.get(cid, 0) + 1
            if metrics is not None:
                metrics.count_trained(r.workload)
            if observe:
                observe(i, t)
            if r.progress_interval_s and self.device.now_s() >= next_report[0]:
                report(False)
                next_report[0] = self.device.now_s() + r.progress_interval_s
            if ev.is_set():
                raise Cancelled(f"training cancelled after {i + 1} minibatches", field="command_id")

        self._training.add(cid)
        self.trained[cid] = self.trained.get(cid, 0)
        while len(self.trained) > self._remembered:
            self.trained.popitem(last=False)
        times: list[float] = []

        def counted(i: int, t: float) -> None:
            times.append(t)
            on_minibatch(i, t)

        try:
            if stats is not None:
                start, stop = await to_thread(serve_beside_training, self.device, r, on_minibatch=counted, stats=stats,
                                              minibatch_size=r.minibatch_size or defaults.MINIBATCH_SIZE)
                workload = r.workload
            else:
                run = await to_thread(self.device.run_minibatches, r.workload, r.minibatches,
                                      minibatch_size=r.minibatch_size or defaults.MINIBATCH_SIZE, workers=r.workers,
                                      on_minibatch=on_minibatch)
                workload, times, start, stop = run.workload, list(run.minibatch_times_s), run.start_s, run.end_s
        finally:
            async with self._step_lock:
                self._training.discard(cid)
            self._cancel.pop(cid, None)
            meter.stop()
            if r.progress_interval_s:
                await to_thread(report, True)
        end = self.device.now_s()
        out = agent_pb2.TrainingResult(workload=workload, minibatch_times_s=times, start_s=start, end_s=stop,
                                       energy_j=meter.energy_j(end), elapsed_s=end - t0)
        if stats is not None:
            out.inference.CopyFrom(stats.report(end))
        return out
