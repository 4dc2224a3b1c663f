"""Profiling campaigns: hand modes out to boards one at a time, store each result as it arrives,
retry a mode whose board vanished, and carry on after an agent or controller restart.

Exactly once: a result is stored with its mode marked done in one store transaction keyed by
(campaign, mode), so a duplicate from a retry is recognised and dropped; the command id of a mode
on a board is deterministic, so a command resent after a reconnect is answered by the agent from
the run it already did (or is doing) instead of measuring again.

Pipelined: a campaign keeps PIPELINE_DEPTH modes on a board (the agent runs them one at a time, in order), so
the board starts the next mode while the controller stores the last one; on a board whose modes take
milliseconds (an instant twin) as many more as cover PIPELINE_COVER_S of its time, up to MAX_PIPELINE_DEPTH: the
commands go down together, the board runs them back to back, and the results that arrive together are checked
and stored together, in one transaction (a group commit), each still keyed by (campaign, mode). It holds the board's
lease while any of its modes is there, and sends no further mode to a board someone queues for, so a waiting
job gets the board as soon as the modes on it end. Cancelling a campaign cancels every mode on its boards,
the waiting ones too (they never start).

Done is derived from what is stored: after a restart a mode is done only if its result is in the
store. A result that cannot be stored (the store is down) is kept and retried with backoff until
it is; dispatching waits for the store with the same backoff, never in a hot loop. A mode goes only
to boards whose catalog holds it, and fails only when no online board can run it, or after
MAX_ATTEMPTS board errors (MAX_TRANSIENT_ATTEMPTS when the board vanished or timed out: charged to the
mode it was running, not to those sent after it and waiting behind it), with the reason kept in its state.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from jetfleet.controller.campaigns.modes import MAX_MODES, resolve_modes  # noqa: F401 - MAX_MODES: its home was here
from jetfleet.controller.campaigns.results import (
    BadResult,
    check_profile_result,
    failed_result,
    profile_command,
    profile_record,
)
from jetfleet.controller.campaigns.run import Run
from jetfleet.controller.commands import BOARD_GONE, BoardUnreached, CommandRouter, command_record
from jetfleet.controller.leases import BoardLeases, Holder
from jetfleet.controller.metrics import ControllerMetrics
from jetfleet.controller.registry import LiveDevice, Registry
from jetfleet.controller.retry import StoreBackoff, StoreRetry
from jetfleet.controller.store import CampaignRecord, CommandRecord, ModeState, ProfileRecord
from jetfleet.shared import defaults
from jetfleet.shared.bounds import check_id
from jetfleet.shared.catalog import Catalog, PowerMode, builtin_catalogs, catalog_from_dict
from jetfleet.shared.errors import (
    Cancelled,
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    JetfleetError,
    NotFound,
    ResourceExhausted,
    StoreUnavailable,
    Unavailable,
)
from jetfleet.shared.proto import agent_pb2, operator_pb2
from jetfleet.shared.workloads import check_run_args

log = logging.getLogger(__name__)
MAX_ATTEMPTS = 3            # board errors (or impossible results) before a mode is marked failed
MAX_TRANSIENT_ATTEMPTS = 5  # the board vanished or timed out this often: the mode is marked failed
# The board vanished (went offline), stalled (no answer in time) or was too busy to take the command: an attempt
# charged only to the mode it was running, not to those waiting behind it (board_order.py), which are sent again
# uncharged up to MAX_UNCHARGED times (then charged: a board stuck for good fails every mode, one after the other).
TRANSIENT = (Unavailable, DeadlineExceeded, ResourceExhausted)
MAX_UNCHARGED = 2 * MAX_TRANSIENT_ATTEMPTS
DEFAULT_PROFILE_TIMEOUT_S = 3600.0
TICK_S = 0.5                # the driver looks for idle boards at least this often
PIPELINE_DEPTH = 2          # modes a campaign keeps on one board: the next waits there while the last is stored
MAX_PIPELINE_DEPTH = 32     # ... and at most, on a board whose modes take milliseconds
PIPELINE_COVER_S = 0.05     # the modes kept on a board cover this much of its time (within those bounds)
DEPTH_AFTER_MODES = 8       # ... judged once the board measured this many (a resend answered from memory is quick)
MAX_STORED_TOGETHER = 64    # results stored in one transaction at most


class CampaignManager:
    """Runs profiling campaigns: hands pending modes to idle target boards and stores each result exactly once."""

    def __init__(self, registry: Registry, router: CommandRouter, metrics: ControllerMetrics, leases: BoardLeases, *,
                 profile_timeout_s: float = DEFAULT_PROFILE_TIMEOUT_S,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep, wall: Callable[[], float] = time.time) -> None:
        self.registry, self.router, self.metrics = registry, router, metrics
        self.wall = wall
        self.store = registry.store
        self.profile_timeout_s = profile_timeout_s
        self.sleep = sleep
        self.runs: dict[str, Run] = {}
        self.leases = leases   # a mode is measured on a board only while its campaign holds the board's lease
        self.retry = StoreRetry(sleep=sleep, on_retry=metrics.store_retries.inc)
        self._store_backoff = StoreBackoff()
        self._store_down = False
        self._ended: dict[str, int] = {}   # running campaigns: modes ended when the progress gauge was last set
        # Results waiting to be checked and stored: those that arrive together go in one transaction.
        self._to_store: list[tuple[tuple[Any, ...], asyncio.Future[bool]]] = []
        self._storing: asyncio.Task[None] | None = None
        self.store_writes = 0   # store transactions that recorded campaign results (tests and logs)

    async def start(self) -> None:
        """Load every stored campaign, with each mode done only if its result is stored, and drive the running ones."""
        for rec in await asyncio.to_thread(self.store.list_campaigns):
            states = await asyncio.to_thread(self.store.campaign_modes, rec.campaign_id)
            measured = {r.mode for r in await asyncio.to_thread(self.store.query_profiles, source=rec.campaign_id)}
            for s in states:
                if s.mode in measured:
                    s.status = "done"
                elif s.status == "done":
                    log.warning("campaign %s: mode %s was marked done without a stored result; measuring it again",
                                rec.campaign_id, s.mode)
                    s.status = "pending"
            run = Run(rec, [s.mode for s in states], {s.mode: s for s in states},
                      {s.mode: i for i, s in enumerate(states)})
            if rec.status == "done" and run.queue:
                log.warning("campaign %s was done with %d modes unmeasured; running it again", rec.campaign_id,
                            len(run.queue))
                rec.status, rec.finished_s = "running", 0.0
                await asyncio.to_thread(self.store.set_campaign_status, rec.campaign_id, "running", 0.0)
            self.runs[rec.campaign_id] = run
            if rec.status == "running":
                self._drive_later(run)
        self._update_gauges()

    async def stop(self) -> None:
        """Stop driving campaigns and their dispatches; their state stays in the store for the next start."""
        tasks = [t for run in self.runs.values() for t in ([run.task] if run.task else []) + list(run.tasks)]
        tasks += [self._storing] if self._storing is not None else []
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # --- creating ---------------------------------------------------------------------------------
    def catalog_for(self, device_id: str, board_model: str) -> Catalog:
        """The catalog of a device, or of a board model: built in, a known board's, or one stored by an import.

        NotFound when the board model has none of these."""
        if device_id:
            return self.registry.get(device_id).catalog
        if board_model in builtin_catalogs():
            return builtin_catalogs()[board_model]
        for d in self.registry.list(board_model):
            return d.catalog
        stored = self.store.get_catalog(board_model)
        if stored:
            return catalog_from_dict(stored)
        raise NotFound(f"unknown board model {board_model[:64]!r}: no built-in catalog, no board and no imported "
                       f"profiles of it", field="board_model")

    resolve_modes = staticmethod(resolve_modes)

    async def create(self, req: operator_pb2.CreateCampaignRequest) -> operator_pb2.Campaign:
        """Check a request, store the campaign with every mode pending, and start driving it."""
        self.registry.check_workload(req.workload, device_id=req.device_id, board_model=req.board_model)
        check_run_args(req.minibatches or defaults.MINIBATCHES, defaults.MINIBATCH_SIZE, defaults.WORKERS)
        if bool(req.device_id) == bool(req.board_model):
            raise InvalidArgument("give exactly one target: a device or a board model", field="device_id")
        if req.device_id:
            check_id(req.device_id, "device_id")
        else:
            check_id(req.board_model, "board_model")
        catalog = await asyncio.to_thread(self.catalog_for, req.device_id, req.board_model)
        spec = req.modes or ("file" if req.mode_list else "")
        modes = self.resolve_modes(catalog, spec, list(req.mode_list), req.seed, list(req.mode_lines))
        rec = CampaignRecord(uuid.uuid4().hex[:12], req.workload, req.device_id, catalog.model, spec[:128],
                             req.minibatches or defaults.MINIBATCHES, self.wall(), seed=req.seed)
        await asyncio.to_thread(self.store.create_campaign, rec, modes)
        run = Run(rec, modes, {m: ModeState(m) for m in modes}, {m: i for i, m in enumerate(modes)})
        self.runs[rec.campaign_id] = run
        self._drive_later(run)
        log.info("campaign %s: %s on %s, %d modes", rec.campaign_id, rec.workload,
                 rec.target_device or rec.target_model, len(modes))
        self._update_gauges(run)
        return self.campaign_pb(run)

    # --- controlling --------------------------------------------------------------------------------
    def get(self, campaign_id: str) -> Run:
        """The run of a campaign; NotFound if there is none."""
        if campaign_id not in self.runs:
            raise NotFound(f"unknown campaign {campaign_id[:64]!r}", field="campaign_id")
        return self.runs[campaign_id]

    async def control(self, campaign_id: str, action: str) -> operator_pb2.Campaign:
        """Pause, resume or cancel a campaign; cancelling also asks its boards to cancel the modes in flight.

        The new status is stored first: if the store is unavailable nothing changes."""
        run = self.get(campaign_id)
        allowed = {"pause": {"running"}, "resume": {"paused"}, "cancel": {"running", "paused"}}
        if action not in allowed:
            raise InvalidArgument(f"action {action[:32]!r}: expected pause, resume or cancel", field="action")
        if run.rec.status not in allowed[action]:
            raise FailedPrecondition(f"campaign {campaign_id} is {run.rec.status}; cannot {action} it", field="action")
        status = {"pause": "paused", "resume": "running", "cancel": "cancelled"}[action]
        finished = self.wall() if status == "cancelled" else 0.0
        await asyncio.to_thread(self.store.set_campaign_status, campaign_id, status, finished)
        run.rec.status, run.rec.finished_s = status, finished
        if action == "resume":
            self._drive_later(run)
        if action == "cancel":
            # The last sent first: a board runs its modes in the order they were sent, so the mode running is
            # cancelled after the ones waiting behind it; cancelled first, it let the next one start (and be
            # stopped a few minibatches in) before that one's cancel arrived.
            for mode, device in reversed(list(run.in_flight.items())):
                target = self._command_id(run, mode, device)
                cancel = agent_pb2.Command(cancel=agent_pb2.Cancel(target_command_id=target))
                try:
                    await self.router.send(device, cancel, timeout_s=10)
                except JetfleetError as e:
                    log.info("cancel on %s: %s", device, e.message)
        run.wake.set()
        self._update_gauges(run)
        return self.campaign_pb(run)

    # --- driving -------------------------------------------------------------------------------------
    def _drive_later(self, run: Run) -> None:
        """Start the campaign's driver unless one is alive (a resume right after a pause keeps the old one)."""
        if run.task is None or run.task.done():
            run.task = asyncio.create_task(self._drive(run))

    def _candidates(self, run: Run) -> list[LiveDevice]:
        if run.rec.target_device:  # a board not seen since a restart is not known yet
            live = self.registry.devices.get(run.rec.target_device)
            return [live] if live is not None else []
        return self.registry.list(run.rec.target_model)

    def _holds(self, run: Run, device: LiveDevice, mode: str) -> bool:
        """Whether the board's own catalog holds ``mode`` (boards of one model may differ), cached per catalog."""
        return self._parsed(run, device, mode) is not None

    @staticmethod
    def _parsed(run: Run, device: LiveDevice, mode: str) -> PowerMode | None:
        """``mode`` as the board's own catalog has it, None if it has not (parsed once per catalog)."""
        catalog = device.catalog   # a new one each time the board says hello
        key = (id(catalog), mode)
        seen = run.holds.get(key)
        if seen is not None:   # that very catalog: the entry holds it, so its id is not another's
            return seen[1]
        try:
            parsed: PowerMode | None = catalog.parse_mode(mode)
        except InvalidArgument:
            parsed = None
        run.holds[key] = (catalog, parsed)
        return parsed

    async def _drive(self, run: Run) -> None:
        while run.rec.status == "running":
            if self._store_down:  # wait for the store with backoff instead of dispatching into it
                await self.sleep(self._store_backoff.next_delay_s())
                self._store_down = False
                continue
            if not run.queue and not run.in_flight:
                if run.tasks:   # a dispatch still storing its mode's failed state: the campaign ends after it
                    await asyncio.gather(*list(run.tasks), return_exceptions=True)
                    continue
                await self._finish(run)
                return
            online = [d for d in self._candidates(run) if d.online]
            dispatched = False
            lease = self._lease(run)
            for live in online:
                device = live.record.device_id
                if self.leases.queued(device):
                    continue   # promised to whoever queues for it: not even one more mode of ours
                holder = self.leases.holder(device)
                if holder is not None and holder != lease:
                    continue   # held by other work
                # Fill the board's pipeline now (one mode per wake-up kept a second mode there only after the
                # last one was stored); the agent runs them in the order they are sent.
                depth = self._depth(run, device)
                while len(run.on_board.get(device, ())) < depth:
                    mode = run.take(lambda m, live=live: self._holds(run, live, m))  # type: ignore[misc]
                    if mode is None:
                        break
                    taken = self.leases.try_take(device, lease)
                    assert taken, "a free board with an empty queue is taken (or it is ours already)"
                    dispatched = True
                    run.in_flight[mode] = device
                    run.on_board.setdefault(device, set()).add(mode)
                    run.spawn(self._dispatch(run, device, mode))
            if online and not dispatched and not run.in_flight and run.queue:
                await self._fail_unrunnable(run, online)
            run.wake.clear()
            try:
                await asyncio.wait_for(run.wake.wait(), TICK_S)
            except asyncio.TimeoutError:
                pass

    @staticmethod
    def _depth(run: Run, device: str) -> int:
        """How many of the campaign's modes to keep on ``device``: PIPELINE_DEPTH, or as many as cover
        PIPELINE_COVER_S of its time where its modes are quicker (at most MAX_PIPELINE_DEPTH). A real board's mode
        takes minutes: two, so a job queued for the board waits for at most the mode running and the next."""
        per = run.mode_s.get(device)
        if per is None or run.mode_n.get(device, 0) < DEPTH_AFTER_MODES:
            return PIPELINE_DEPTH
        return max(PIPELINE_DEPTH, min(MAX_PIPELINE_DEPTH, math.ceil(PIPELINE_COVER_S / per)))

    async def _finish(self, run: Run) -> None:
        finished = self.wall()
        await self.retry.run(self.store.set_campaign_status, run.rec.campaign_id, "done", finished,
                             what=f"campaign {run.rec.campaign_id} done")
        run.rec.status, run.rec.finished_s = "done", finished
        run.order.clear()
        log.info("campaign %s done: %d measured, %d failed", run.rec.campaign_id, run.count("done"),
                 run.count("failed"))
        self._update_gauges(run)

    async def _fail_unrunnable(self, run: Run, online: list[LiveDevice]) -> None:
        """Modes that no online target board's catalog holds fail now, with the boards named."""
        names = ", ".join(d.record.device_id for d in online)
        for mode in [m for m in run.queue if not any(self._holds(run, d, m) for d in online)]:
            run.queue.remove(mode)
            state = run.states[mode]
            state.error = f"no online {run.rec.target_model} board has {mode} in its catalog (online: {names})"
            run.errors.appendleft(f"{mode} {state.error}")
            run.set_status(mode, "failed")
            self.metrics.campaign_modes.labels(run.rec.workload, "failed").inc()
            await self.retry.run(self.store.set_mode_state, run.rec.campaign_id, state, what="mode state")

    @staticmethod
    def _command_id(run: Run, mode: str, device: str) -> str:
        """Deterministic, so a resend after a reconnect is answered from the agent's memory; after the board
        answered with a failure the next attempt gets a new id (a new round), so it measures again."""
        base = f"{run.rec.campaign_id}-{run.position[mode]}-{device}"
        rounds = run.rounds.get(mode, 0)
        return f"{base}-r{rounds}" if rounds else base

    async def _dispatch(self, run: Run, device: str, mode: str) -> None:
        state = run.states[mode]
        started = time.monotonic()
        stored_state = True
        cmd: agent_pb2.Command | None = None
        created_s = self.wall()
        outcome: JetfleetError | None = None   # why no result came back, for the command's log entry
        answer: agent_pb2.CommandResult | None = None   # a result that came back (and was then refused)
        try:
            live = self.registry.get(device)
            parsed = self._parsed(run, live, mode)
            if parsed is None:   # taken for a catalog that holds it: the board came back with another (it says why)
                parsed = live.catalog.parse_mode(mode)
            cmd = profile_command(run.rec.workload, parsed, run.rec.minibatches, self._command_id(run, mode, device))
            placed = run.order.sent(device, cmd.command_id, live.instance_id)
            # Unlogged: the result, the mode's state and the command's log entry are stored in one write below.
            try:
                result = await self.router.send(device, cmd, timeout_s=self.profile_timeout_s,
                                                command_id=cmd.command_id, logged=False)
            except JetfleetError as e:
                outcome = e
                # Sent and not answered (the board vanished or stalled): it keeps its place; so does a resend the
                # agent refused (too many commands waiting) while it holds the first one. Otherwise it never reached
                # the board, or the board refused or failed it: only its own place is freed.
                unanswered = isinstance(e, BOARD_GONE) and not isinstance(e, BoardUnreached)
                if not unanswered and not (isinstance(e, ResourceExhausted) and not placed):
                    run.order.dropped(device, cmd.command_id)
                raise
            run.order.finished(device, cmd.command_id)
            if run.uncharged:   # the board moves on: those waiting on it get a fresh bound
                for waiting in run.on_board.get(device, ()):
                    run.uncharged.pop(waiting, None)
            answer = result
            # The next mode is on the board already (PIPELINE_DEPTH) or is sent now, while this one is stored.
            self._release(device, run, mode)
            run.wake.set()
            # One thread hop, off the event loop: check (a long window holds tens of thousands of samples),
            # summarise, and store with the mode's state and the command's log entry in one durable write.
            stored = await self.retry.run_async(self._store_together, run, device, live.catalog, mode, cmd, created_s,
                                                result, what=f"result of {mode} on {device}")
            run.set_status(mode, "done")
            state.device_id, state.error = device, ""
            # the board's time on this mode: from its dispatch, or from the answer before it when it waited there
            now = time.monotonic()
            took = now - max(started, run.answered.get(device, started))
            run.durations.append(took)
            run.mode_s[device] = 0.8 * run.mode_s.get(device, took) + 0.2 * took
            run.mode_n[device] = run.mode_n.get(device, 0) + 1
            run.answered[device] = now
            self._store_backoff.reset()
            self.metrics.campaign_modes.labels(run.rec.workload, "measured" if stored else "duplicate").inc()
        except StoreUnavailable as e:  # the controller's store, not the board: no attempt, wait for the store
            log.warning("campaign %s: %s; waiting for the store", run.rec.campaign_id, e.message)
            self._store_down = True
            stored_state = False
        except Cancelled as e:
            if run.rec.status in ("cancelled", "paused"):
                stored_state = False   # stopped on purpose: the mode stays pending, no attempt
            else:
                self._failed_attempt(run, mode, device, e, MAX_ATTEMPTS, answered=True)
        except TRANSIENT as e:  # the board vanished or stalled
            run.retries += 1
            self.metrics.campaign_modes.labels(run.rec.workload, "retried").inc()
            waited = cmd is not None and run.order.behind(device, cmd.command_id)
            if waited and run.uncharged.get(mode, 0) < MAX_UNCHARGED:   # sent again, uncharged
                run.uncharged[mode] = run.uncharged.get(mode, 0) + 1
                log.info("campaign %s: %s on %s to be sent again (it waited behind a mode that did not come back "
                         "either): %s", run.rec.campaign_id, mode, device, e.message)
            else:
                self._failed_attempt(run, mode, device, e, MAX_TRANSIENT_ATTEMPTS)
        except BadResult as e:
            self._failed_attempt(run, mode, device, e, MAX_ATTEMPTS, answered=True)
        except JetfleetError as e:  # the board refused or failed: a mode it cannot run fails at once
            permanent = e.code in ("INVALID_ARGUMENT", "NOT_FOUND")
            self._failed_attempt(run, mode, device, e, 1 if permanent else MAX_ATTEMPTS, answered=True)
        except Exception as e:  # a bug or a corrupt result: count it like a board error, never loop forever
            log.exception("campaign %s mode %s on %s", run.rec.campaign_id, mode, device)
            self._failed_attempt(run, mode, device, JetfleetError(f"internal error: {type(e).__name__}"),
                                 MAX_ATTEMPTS, answered=True)
        finally:
            run.in_flight.pop(mode, None)
            requeue = state.status == "pending"   # not measured: first in line again (as its campaign order says)
            self._release(device, run, mode)
            run.wake.set()
            self._update_gauges(run)
        if stored_state and state.status != "done":
            entry = None
            if cmd is not None and answer is not None:   # an answer that was refused (an impossible result)
                entry = command_record(device, cmd, created_s, result=answer, finished_s=self.wall())
            elif cmd is not None and outcome is not None:   # the board answered with a failure, or never answered
                failed = outcome.code not in ("UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED")
                entry = command_record(device, cmd, created_s, error=outcome,
                                       result=failed_result(cmd.command_id, outcome) if failed else None,
                                       finished_s=self.wall())
            await self.retry.run(self.store.set_mode_state, run.rec.campaign_id, state, entry, what="mode state")
        if requeue:   # only once its state is stored: a next attempt's state is never overwritten by this one's
            run.queue.appendleft(mode)
            run.wake.set()

    async def _store_together(self, *entry: Any) -> bool:
        """Check and store one result (its run, board, catalog, mode, command, the command's creation time and the
        result) with the others that wait now, in one worker-thread hop and one store transaction (``_store_results``);
        True if stored, False for a duplicate, StoreUnavailable if that write failed (the caller retries)."""
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._to_store.append((entry, fut))
        if self._storing is None:
            self._storing = asyncio.create_task(self._store_waiting())
        return await fut

    async def _store_waiting(self) -> None:
        batch: list[tuple[tuple[Any, ...], asyncio.Future[bool]]] = []
        try:
            while self._to_store:
                batch, self._to_store = self._to_store[:MAX_STORED_TOGETHER], self._to_store[MAX_STORED_TOGETHER:]
                try:
                    outcomes = await asyncio.to_thread(self._store_results, [entry for entry, _ in batch])
                except Exception as e:   # the write failed (StoreUnavailable): each result's caller decides
                    outcomes = [e] * len(batch)
                for (_, fut), outcome in zip(batch, outcomes, strict=True):
                    if fut.done():
                        continue
                    if isinstance(outcome, BaseException):
                        fut.set_exception(outcome)
                    else:
                        fut.set_result(outcome)
                batch = []
        except asyncio.CancelledError:   # the controller stops: whoever waits is cancelled with it
            for _, fut in batch + self._to_store:
                fut.cancel()
            self._to_store = []
            raise
        finally:
            self._storing = None

    def _store_results(self, entries: list[tuple[Any, ...]]) -> list[bool | Exception]:
        """Check each board's result and store the good ones, each with its mode done and its command's log entry,
        in one durable write (blocking: run off the event loop). A result that cannot be true gets its BadResult
        (or the record's InvalidArgument, or what reading it raised), and the others are stored; StoreUnavailable
        when the store cannot be reached (nothing written)."""
        outcomes: list[bool | Exception] = []
        items: list[tuple[ProfileRecord, CommandRecord | None]] = []
        for run, device, catalog, mode, cmd, created_s, result in entries:
            try:
                check_profile_result(result.profile, catalog, mode, run.rec.workload, run.rec.minibatches)
                record = profile_record(run.rec.campaign_id, run.rec.workload, device, catalog.model, mode,
                                        result.profile, created_s=self.wall()).check()
                items.append((record, command_record(device, cmd, created_s, result=result, finished_s=self.wall())))
            except Exception as e:   # this result alone: a corrupt one fails its own mode, not the others
                outcomes.append(e)
                continue
            outcomes.append(True)
        if not items:
            return outcomes
        try:
            stored: list[bool | Exception] = list(self.store.record_results(items))
            self.store_writes += 1
        except StoreUnavailable:
            raise   # nothing was written: every caller retries
        except Exception:
            # A write the store refused for one of them (on Redis the ones before it may be in: MULTI/EXEC does not
            # roll back a script that fails): each again on its own, so the others are stored (a stored one is a
            # duplicate now) and only the one that cannot be stored fails.
            log.warning("campaign results: a write of %d failed; storing each alone", len(items), exc_info=True)
            stored = []
            for record, command in items:
                try:
                    stored.append(self.store.record_result(record, command))
                    self.store_writes += 1
                except StoreUnavailable:
                    raise
                except Exception as e:
                    stored.append(e)
        it = iter(stored)
        return [next(it) if o is True else o for o in outcomes]

    @staticmethod
    def _lease(run: Run) -> Holder:
        """The campaign's claim on a board: held while any of its modes is on the board."""
        cid = run.rec.campaign_id
        return Holder("campaign", cid, f"campaign {cid} (profiling {run.rec.workload})")

    def _release(self, device: str, run: Run, mode: str) -> None:
        """``mode`` is off the board; the board is free again when none of the campaign's modes is on it (a no-op
        if this mode was let go already)."""
        sent = run.on_board.get(device)
        if sent is None or mode not in sent:
            return
        sent.discard(mode)
        if not sent:
            del run.on_board[device]
            self.leases.release(device, self._lease(run))

    def _failed_attempt(self, run: Run, mode: str, device: str, e: JetfleetError, limit: int, *,
                        answered: bool = False) -> None:
        state = run.states[mode]
        if answered:  # the board's answer is remembered by command id: the next attempt is a new round
            run.rounds[mode] = run.rounds.get(mode, 0) + 1
        state.attempts += 1
        state.error = f"{device}: {e.code}: {e.message}"[:500]
        run.errors.appendleft(f"{mode} {state.error}")
        if state.attempts >= limit:
            run.set_status(mode, "failed")
            self.metrics.campaign_modes.labels(run.rec.workload, "failed").inc()

    # --- reporting ---------------------------------------------------------------------------------
    def campaign_pb(self, run: Run) -> operator_pb2.Campaign:
        """A run as the operator API's Campaign: counts, boards in flight, ETA (-1 if unknown, and while the campaign
        is not running: a paused one ends when it is resumed, not in so many seconds), recent errors."""
        done, failed = run.count("done"), run.count("failed")
        remaining = len(run.modes) - done - failed
        boards = sorted(set(run.in_flight.values()))
        eta = -1.0
        if run.durations and remaining:
            per_mode = sum(run.durations) / len(run.durations)
            idle = [d for d in self._candidates(run) if d.online and self.leases.holder(d.record.device_id) is None]
            eta = remaining * per_mode / max(1, len(boards) or len(idle))
        elif not remaining:
            eta = 0.0
        r = run.rec
        if remaining and r.status != "running":
            eta = -1.0
        return operator_pb2.Campaign(waiting=self._waiting(run),
            campaign_id=r.campaign_id, workload=r.workload, target_device=r.target_device, target_model=r.target_model,
            modes=r.modes_spec, minibatches=r.minibatches, status=r.status, total=len(run.modes), done=done,
            failed=failed, in_flight=len(run.in_flight), eta_s=eta, created_s=r.created_s, finished_s=r.finished_s,
            boards=boards, errors=list(run.errors), retries=run.retries)

    def _waiting(self, run: Run) -> str:
        """Why a running campaign measures nothing now ("" while a board works on it or can): its target is not
        online (an operator waiting on it would otherwise see no word)."""
        if run.rec.status != "running" or run.in_flight or not run.queue:
            return ""
        candidates = self._candidates(run)
        online = [d for d in candidates if d.online]
        held = {d.record.device_id: self.leases.holder(d.record.device_id) for d in online}
        if online and all(h is not None and h.kind != "campaign" for h in held.values()):
            return "waiting for a board: " + "; ".join(f"{dev} busy, held by {h}" for dev, h in list(held.items())[:5])
        if online:
            return ""
        if run.rec.target_device:
            known = f"offline since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(candidates[0].record.last_seen_s))}" \
                if candidates else "not known to the controller yet"
            return f"waiting for device {run.rec.target_device} ({known}); the campaign starts when its agent connects"
        offline = ", ".join(d.record.device_id for d in candidates[:5])
        return (f"waiting for an online {run.rec.target_model} board (" + (f"offline: {offline}" if offline else
                "none has ever connected") + "); the campaign starts when one connects")

    def _update_gauges(self, *runs: Run) -> None:
        """The remaining-modes gauge of ``runs`` (all campaigns when none are given), and while a campaign runs,
        when it last moved on (a mode ended, or it started or resumed): what the stalled-campaign alert reads."""
        for run in runs or tuple(self.runs.values()):
            ended = run.count("done") + run.count("failed")
            labels = (run.rec.campaign_id, run.rec.workload)
            self.metrics.campaign_remaining.labels(*labels).set(len(run.modes) - ended)
            if run.rec.status == "running":
                if self._ended.get(run.rec.campaign_id) != ended:
                    self._ended[run.rec.campaign_id] = ended
                    self.metrics.campaign_progress.labels(*labels).set(self.wall())
            else:
                self._ended.pop(run.rec.campaign_id, None)
                self.metrics.campaign_progress.remove(*labels)
