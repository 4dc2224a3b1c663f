"""One job driven through its lifecycle (``state.py``) until it ends, resumable from its stored record at every point:

queued     wait for an online target board: the job queues for it in the board lease table (``leases.py``)
profiling  no calibrated model for (board model, workload): profile k modes (``profiling.py``)
modelling  transfer the best reference to them, with 5-fold calibration; choose by the goal (``goals.py``)
applying   a power budget's choice first measured on the board it holds and chosen again (``confirming.py``);
           set the mode, the board confirms it
running    one training command per chunk of up to 100,000 minibatches, the goal kept by the closed loop
           (``running.py``)
done / failed / cancelled, with the verdict of its goal

The job holds its board's lease from applying to its end (or until the board goes away); a board held by other work
is not used, and the job waits in the board's queue. Every write goes through the store retry: a store outage makes
the job wait, never lose its state."""

from __future__ import annotations

import asyncio
import copy
import logging
import math
from typing import Any

from jetfleet.controller.commands import BOARD_GONE
from jetfleet.controller.jobs import inference as stream_
from jetfleet.controller.jobs.confirming import Confirmer, needs_confirming, replay
from jetfleet.controller.jobs.context import JobContext
from jetfleet.controller.jobs.goals import goal_of, judge
from jetfleet.controller.jobs.launch import stop_launched
from jetfleet.controller.jobs.loop import ClosedLoop
from jetfleet.controller.jobs.online import OnlineProfiler
from jetfleet.controller.jobs.profiling import Profiler
from jetfleet.controller.jobs.running import TrainingRun
from jetfleet.controller.jobs.state import JobCancelled, JobState, move
from jetfleet.controller.jobs.windows import Tracker
from jetfleet.controller.leases import Holder
from jetfleet.controller.powertrain.feedback import Feedback, Observation
from jetfleet.controller.store import JobRecord
from jetfleet.controller.store.job_record import ChoiceRecord, StepRecord
from jetfleet.shared.catalog import Catalog
from jetfleet.shared.convert import mode_from_pb, mode_to_pb
from jetfleet.shared.errors import FailedPrecondition, InvalidArgument, JetfleetError
from jetfleet.shared.proto import agent_pb2
from jetfleet.shared.workloads import WORKLOADS

log = logging.getLogger(__name__)


class JobRunner:
    """Drives one job (this module's docstring); the manager owns the task it runs in."""

    def __init__(self, ctx: JobContext, rec: JobRecord) -> None:
        self.ctx, self.rec = ctx, rec
        self.goal = goal_of(rec)
        self.holder = Holder("job", rec.job_id, f"job {rec.job_id} ({self.goal.describe()})")
        self.cancelled = asyncio.Event()
        self.catalog: Catalog | None = None
        self.loop: ClosedLoop | None = None
        self.tracker = Tracker(rec.options.window_s, rec.segments)
        self.training: TrainingRun | None = None
        self._fleet_board = rec.device_id if rec.goal == "fleet" else ""   # where the queue placed it
        self.scratch_note = ""      # its model was fitted from scratch: what that means (``ModelRepo.scratch_note``)

    # --- state -------------------------------------------------------------------------------------
    async def save(self) -> None:
        """Write the whole record (a snapshot taken here: the event loop may change it while it is written)."""
        snapshot = copy.deepcopy(self.rec)
        await self.ctx.retry.run(self.ctx.store.update_job, snapshot, what=f"job {self.rec.job_id}")
        self.ctx.changed(self.rec)

    async def move(self, to: JobState, why: str, waiting_for: str = "") -> None:
        """A checked move of the lifecycle (or a new detail in the same state), stored."""
        if move(self.rec, to, why, waiting_for=waiting_for, now_s=self.ctx.wall):
            await self.save()

    def check_cancel(self) -> None:
        """JobCancelled once the operator cancelled the job."""
        if self.cancelled.is_set():
            raise JobCancelled()

    async def pause(self) -> None:
        """Wait a poll interval (or until cancelled)."""
        try:
            await asyncio.wait_for(self.cancelled.wait(), self.ctx.config.poll_s)
        except asyncio.TimeoutError:
            pass
        self.check_cancel()

    # --- the lifecycle --------------------------------------------------------------------------------
    async def run(self) -> None:
        """The job from wherever its record says it is to its end."""
        rec = self.rec
        try:
            if rec.goal == "fleet":
                await self._fleet_run()
            else:
                self.catalog = await asyncio.to_thread(self.ctx.campaigns.catalog_for, "", rec.target_model)
                if not rec.model_id and rec.options.attach:
                    await self._online()
                elif not rec.model_id:
                    profiler = Profiler(self.ctx, rec, self.catalog, self.move, self.save, self.pause)
                    await profiler.ensure_model(self._targets)
                await self._prepare()
                while rec.minibatches_done < rec.minibatches:
                    device = await self._board()
                    stage = "confirming its choice"
                    try:
                        if needs_confirming(rec):
                            await self._confirm(device)
                        stage = "starting its run"   # (the run itself waits out its board going away: running.py)
                        await self._training().on(device)
                    except BOARD_GONE as e:   # its steps are re-sent by id: none run twice
                        await self._went_away(device, stage, e)
                    finally:
                        self.ctx.leases.release(device, self.holder)
            await self._finish(JobState.DONE, "")
        except JobCancelled:
            await self._finish(JobState.CANCELLED, f"cancelled after {rec.minibatches_done} of {rec.minibatches} "
                                                   "minibatches")
        except JetfleetError as e:
            await self._finish(JobState.FAILED, e.message)
        except asyncio.CancelledError:
            raise   # the controller is stopping: the record stays where it is, the next start resumes it
        except Exception as e:
            log.exception("job %s failed", rec.job_id)
            await self._finish(JobState.FAILED, f"internal error: {type(e).__name__} (see the controller log)")

    async def _online(self) -> None:
        """An attached job's model: the calibrated one of (board model, workload) if there is one, else its modes
        profiled online on the operator's own training (``online.py``), on the board it holds meanwhile."""
        rec = self.rec
        assert self.catalog is not None
        doc = await asyncio.to_thread(self.ctx.models.repo.find, rec.target_model, rec.workload)
        if doc is not None:
            rec.model_id = doc["model_id"]
            await self.save()
            return
        while True:
            device = await self._board()
            try:
                await OnlineProfiler(self.ctx, rec, self.catalog, self.move, self.save, self.check_cancel).profile(device)
                return
            except BOARD_GONE as e:   # the modes profiled are kept; the rest resume by id
                await self._went_away(device, "profiling online", e)
            finally:
                self.ctx.leases.release(device, self.holder)

    async def _went_away(self, device: str, what: str, e: JetfleetError) -> None:
        """The board the job holds went offline (or stopped answering) while the job was ``what``: the job waits
        for a board again and goes on where it was. Its commands have deterministic ids, so a step the board ran
        meanwhile is answered from the board's memory when it is sent again, not run twice (a failure the board
        itself reported, such as no training session joining, still fails the job)."""
        await self.move(JobState.QUEUED, f"{device} went away while {what} ({e.message}); resuming when a board is "
                                         "back", waiting_for="a board")

    def _training(self) -> TrainingRun:
        if self.training is None:
            assert self.catalog is not None
            self.training = TrainingRun(self.ctx, self.rec, self.loop, self.tracker, self.catalog, self.move, self.save,
                                        self.cancelled)
        return self.training

    async def _finish(self, state: JobState, why: str) -> None:
        rec, ctx = self.rec, self.ctx
        rec.finished_s = ctx.wall()
        self.ctx.leases.release_all(self.holder)
        run = rec.run
        if run is not None and not run.ended:   # nothing trains for an ended job: a board still on it is stopped
            run.ended = "done" if state == JobState.DONE else "stopped"
            if state != JobState.DONE:
                ctx.router.supersede(run.device_id, run.run_id)
        if rec.goal == "fleet" and ctx.fleet is not None:
            await ctx.fleet.finish(rec.job_id)   # its board frees; the others are re-chosen
        if state == JobState.CANCELLED:
            for cid in rec.campaign_ids:
                camp = ctx.campaigns.runs.get(cid)
                if camp is not None and camp.rec.status in ("running", "paused"):
                    await ctx.campaigns.control(cid, "cancel")
        p95 = run.inference.p95_ms if run is not None and run.inference is not None else math.nan
        move(rec, state, why or "ran to its end", now_s=ctx.wall)
        rec.verdict = judge(rec, self.goal, p95)
        rec.goal_kept = rec.verdict.kept
        rec.detail = (self._summary() if state == JobState.DONE else why) + "; " + rec.verdict.text()
        await self.save()
        log.info("job %s %s: %s", rec.job_id, state.value, rec.detail)
        if state != JobState.DONE and rec.options.template:   # what its board launched for it stops too
            await stop_launched(ctx.router, rec)

    async def _prepare(self) -> None:
        """The closed loop on the model's calibrated predictions, what it learned before a restart, and the first
        choice (made once and kept in the record)."""
        rec, ctx = self.rec, self.ctx
        assert self.catalog is not None
        doc = await asyncio.to_thread(ctx.models.repo.doc, rec.model_id)
        pred = await asyncio.to_thread(ctx.cache.get, doc, self.catalog, rec.options.confidence)
        feedback = Feedback(pred)
        index = {str(m): i for i, m in enumerate(pred.modes)}
        replay(rec, feedback, index)   # what it measured confirming its choice, and the loop learned, before a restart
        for s in rec.steps:   # what the loop had learned before a restart
            if s.from_mode in index:
                feedback.observe(Observation(index[s.from_mode], s.observed_power_w, s.observed_time_ms),
                                 over_budget=s.kind == "over")
            if s.kind == "undo" and s.from_mode in index:
                feedback.rule_out(index[s.from_mode])
        self.loop = ClosedLoop(self.goal, feedback, index, max_steps=rec.options.max_steps,
                               steps_used=sum(s.kind != "undo" for s in rec.steps))
        self.scratch_note = ctx.models.repo.scratch_note(doc)
        if rec.choice is not None:
            return
        c = self.goal.choose(pred, rec.minibatches)
        rec.choice = ChoiceRecord(str(c.mode), c.goal, c.time_ms, c.time_hi_ms, c.power_w, c.power_hi_w, c.power_lo_w,
                                  c.at_risk, pred.confidence, time_lo_ms=c.time_lo_ms, covered=c.covered,
                                  note="; ".join(n for n in (c.coverage_note, self.scratch_note) if n))
        rec.mode = str(c.mode)
        await self.save()

    async def _confirm(self, device: str) -> None:
        """Measure the power budget's choice on the board the job holds before committing (``confirming.py``)."""
        assert self.catalog is not None and self.loop is not None
        measure = (OnlineProfiler(self.ctx, self.rec, self.catalog, self.move, self.save, self.check_cancel).measure
                   if self.rec.options.attach else None)   # an attached job's choice is measured on its own steps
        await Confirmer(self.ctx, self.rec, self.catalog, self.loop.feedback, self.loop.index, self.move,
                        self.save, measure, self.scratch_note).confirm(device)

    def _targets(self) -> list[str]:
        """The boards the job may run on: its device, or the boards of its model that offer its workload."""
        rec = self.rec
        if rec.target_device:
            return [rec.target_device]
        return [d.record.device_id for d in self.ctx.registry.list(rec.target_model)
                if rec.workload in WORKLOADS or rec.workload in d.workloads]

    async def _board(self) -> str:
        """An online target board this job holds (the one it ran on last, if it is back): it queues for every
        online target; the first it gets is its, and it leaves the other queues."""
        rec, leases = self.rec, self.ctx.leases
        while True:
            self.check_cancel()
            targets = self._targets()
            previous = rec.device_id
            if previous in targets:
                targets.remove(previous)
                targets.insert(0, previous)
            waiting = []
            for d in targets:
                live = self.ctx.registry.devices.get(d)
                if live is None or not live.online:
                    waiting.append(f"{d} offline")
                elif leases.try_take(d, self.holder, queue=True):
                    leases.withdraw(self.holder)
                    return d
                else:
                    holder = leases.holder(d)
                    waiting.append(f"{d} busy: {holder}" if holder is not None else
                                   f"{d} promised to {leases.queued(d)[0]}")
            what = "; ".join(waiting) or f"no {rec.target_model} board known"
            await self.move(JobState.QUEUED, f"waiting for a board: {what}", waiting_for="a board")
            await self.pause()

    # --- fleet jobs (placed and paced by the fleet queue, ``controller/fleet/queue.py``) -------------------
    async def _fleet_run(self) -> None:
        rec, ctx = self.rec, self.ctx
        assert ctx.fleet is not None
        while True:
            placed, self._fleet_board = self._fleet_board, ""   # the queue's decisions (during add, too) set it
            try:
                if await ctx.fleet.add(rec, self.fleet_decision) and not self._fleet_board:
                    self._fleet_board = placed     # back on the board it ran on (else the queue places it anew)
                break
            except (InvalidArgument, FailedPrecondition) as e:
                self._fleet_board = placed
                # accepted once, a fleet job waits for what it needs (after a restart the boards reconnect after the
                # controller is back; a cap may be set again) rather than failing on what is missing for a while
                await self.move(JobState.QUEUED, f"waiting: {e.message}", waiting_for="the fleet queue")
                await self.pause()
        while rec.minibatches_done < rec.minibatches:
            while not self._fleet_board:
                await self.move(JobState.QUEUED, "waiting in the fleet queue for a board and power under the lab cap",
                                waiting_for="the fleet queue")
                await self.pause()
            device = self._fleet_board
            self.catalog = await asyncio.to_thread(ctx.campaigns.catalog_for, "", rec.target_model)
            while True:
                live = ctx.registry.devices.get(device)
                if live is not None and live.online and ctx.leases.try_take(device, self.holder, queue=True):
                    break
                what = "offline" if live is None or not live.online else f"busy: {ctx.leases.holder(device)}"
                await self.move(JobState.QUEUED, f"placed on {device}: waiting for it ({what})", waiting_for=device)
                await self.pause()
            try:
                await self._training().on(device)
            finally:
                ctx.leases.release(device, self.holder)

    async def fleet_decision(self, board: str, model: str, info: dict[str, Any], kind: str, reason: str) -> None:
        """The fleet queue decided: ``start`` on ``board`` in ``info['mode']``, or a new mode for this job."""
        rec, ctx = self.rec, self.ctx
        if kind == "start":
            doc = await asyncio.to_thread(ctx.models.repo.find, model, rec.workload)
            rec.target_model, rec.model_id, rec.mode = model, doc["model_id"] if doc else "", info["mode"]
            rec.choice = ChoiceRecord(info["mode"], "fleet", info["time_ms"], info["time_ms"], info["power_w"],
                                      info["power_hi_w"], info["power_w"], False, rec.options.confidence)
            self._fleet_board = board
            self.training = None
            await self.save()
            return
        live = self.training.live if self.training is not None else None
        if live is None:          # not training yet: it starts in the new mode
            rec.mode = info["mode"]
            await self.save()
            return
        device, cid = live
        assert self.catalog is not None
        try:
            result = await ctx.router.send(device, agent_pb2.Command(set_mode=agent_pb2.SetMode(
                mode=mode_to_pb(self.catalog.parse_mode(info["mode"])), during_command_id=cid)), timeout_s=30)
        except JetfleetError as e:
            log.warning("job %s: fleet step to %s on %s failed: %s", rec.job_id, info["mode"], device, e.message)
            return
        obs = rec.observed
        rec.steps.append(StepRecord(obs.t_s if obs else 0.0, rec.minibatches_done, rec.mode,
                                    str(mode_from_pb(result.confirmed_mode)), f"fleet: {reason}",
                                    obs.power_w if obs else 0.0, obs.time_ms if obs else 0.0, info["power_w"],
                                    info["power_hi_w"], info["time_ms"], kind, info["time_ms"]))
        rec.mode = rec.steps[-1].to_mode
        self.tracker.reset_window(rec.mode)
        ctx.metrics.job_steps.labels(rec.goal).inc()
        await self.save()

    # --- the summary -----------------------------------------------------------------------------------
    def _summary(self) -> str:
        rec = self.rec
        mean_w = rec.energy_j / rec.elapsed_s if rec.elapsed_s > 0 else math.nan
        modes = ", ".join(f"{s.mode} {s.seconds:.0f} s" for s in rec.segments)
        undone = sum(s.kind == "undo" for s in rec.steps)
        trained = rec.board_trained
        again = trained - rec.minibatches_done
        boards = (f"the boards trained {trained} minibatches for it" + (f" ({again} again after a move)" if again > 0
                                                                        else ""))
        confirming = (f"; {len(rec.confirms)} mode(s) measured before committing "
                      f"({sum(c.seconds for c in rec.confirms):.0f} board s)" if rec.confirms else "")
        return (f"{rec.minibatches_done} minibatches in {rec.elapsed_s:.0f} board s, {rec.energy_j / 1e3:.1f} kJ, "
                f"mean {mean_w:.2f} W; modes: {modes}; {len(rec.steps)} step(s)"
                + (f" ({undone} undone)" if undone else "") + f"; {boards}" + confirming + self._online_cost()
                + (f"; {self.scratch_note}" if self.scratch_note else "")
                + stream_.latency_summary(rec.options, rec.run))

    def _online_cost(self) -> str:
        """An attached job's online profiling against running its chosen mode throughout ('' for other jobs): the
        extra board seconds its profiled steps took, and what they added to the whole job."""
        rec = self.rec
        if not rec.profiled_steps or rec.choice is None:
            return ""
        step_s = rec.choice.time_ms / 1e3
        chosen_s = rec.profiled_steps * step_s
        job_s = rec.minibatches_done * step_s
        extra = rec.profiled_s - chosen_s
        return (f"; online profiling: {rec.profiled_steps} of its own steps ({rec.profiled_steps / rec.minibatches:.0%}"
                f" of the job) in {rec.profiled_s:.1f} board s, {extra:+.1f} s against {chosen_s:.1f} s predicted "
                f"for them in the chosen mode: {100 * extra / job_s:+.0f}% on the job's {job_s:.1f} s predicted in the "
                "chosen mode throughout")
