"""A job's training on the board it holds: one training command per chunk, its progress recorded durably, its goal
kept by the closed loop (``loop.py``); a step goes down as a SetMode for the running command, between two
minibatches, without stopping training.

Exactly once, judged on the board: a training command's id is stored before it is sent, and every command the job
sends is in ``rec.runs`` with what its board reported training for it. After a controller restart the same command
is sent again to the same agent instance, which joins the run in flight (or answers from the result it remembers);
an agent that restarted (a new instance) or a board that went away gets a new command from the job's progress, and
the old one is superseded: the router cancels it on its board as soon as that board is seen running it. The store
moves progress only forward and only for the current command (``Store.advance_job``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from jetfleet.controller.commands import BOARD_GONE
from jetfleet.controller.jobs import inference as stream_
from jetfleet.controller.jobs.context import JobContext
from jetfleet.controller.jobs.launch import keep_tail, launch_pb
from jetfleet.controller.jobs.loop import ClosedLoop
from jetfleet.controller.jobs.state import JobCancelled, JobState
from jetfleet.controller.jobs.windows import Point, Tracker, Window
from jetfleet.controller.powertrain.feedback import Step
from jetfleet.controller.store import JobRecord
from jetfleet.controller.store.job_record import InferenceChoice, Observed, RunRecord, StepRecord, StreamSpec
from jetfleet.shared import defaults
from jetfleet.shared.catalog import Catalog
from jetfleet.shared.convert import mode_from_pb, mode_to_pb
from jetfleet.shared.errors import JetfleetError
from jetfleet.shared.proto import agent_pb2
from jetfleet.shared.workloads import MAX_MINIBATCHES

log = logging.getLogger(__name__)
Move = Callable[..., Awaitable[None]]


class TrainingRun:
    """The job's training commands on its boards (module docstring)."""

    def __init__(self, ctx: JobContext, rec: JobRecord, loop: ClosedLoop | None, tracker: Tracker, catalog: Catalog,
                 move: Move, save: Callable[[], Awaitable[None]], cancelled: asyncio.Event) -> None:
        self.ctx, self.rec, self.loop, self.tracker, self.catalog = ctx, rec, loop, tracker, catalog
        self.move, self.save, self.cancelled = move, save, cancelled
        self.live: tuple[str, str] | None = None     # (board, command) while a training command runs
        self._reports: asyncio.Queue[tuple[str, agent_pb2.TrainingProgress] | None] = asyncio.Queue()
        self._persisted = 0.0
        self._counted: dict[str, int] = {}   # the running command's requests counted into the metrics, by outcome

    async def on(self, device: str) -> None:
        """Train on ``device`` (held by the job) until the command ends or the board goes away."""
        rec, ctx = self.rec, self.ctx
        live = ctx.registry.get(device)
        run = rec.run
        resume = run is not None and not run.ended and run.device_id == device and run.instance_id == live.instance_id
        if not resume:
            run = await self._new_run(device, live.instance_id)
        assert run is not None
        self._counted = ({"served": run.inference.served, "late": run.inference.late, "dropped": run.inference.dropped}
                         if resume and run.inference is not None else {})
        cid = run.run_id
        self.live = (device, cid)
        await self.move(JobState.RUNNING, f"training on {device} in {rec.mode}" + (" (rejoined)" if resume else ""))
        self.tracker.new_run(Point(rec.minibatches_done, rec.elapsed_s, rec.energy_j, rec.mode, 0.0))
        ctx.router.watch_progress(cid, lambda dev, r: self._reports.put_nowait((dev, r)))
        consumer = asyncio.create_task(self._consume(device, run))
        stopper = asyncio.create_task(self._stop_on_cancel(device, cid))
        try:
            result = await ctx.router.send(device, self._command(run), command_id=cid,
                                           timeout_s=ctx.config.run_timeout_s)
        except BOARD_GONE as e:   # the board itself (a board's own DEADLINE_EXCEEDED, say no step() for T s, fails)
            await self.move(JobState.QUEUED, f"{device} went away mid-run ({e.message}); resuming from minibatch "
                                             f"{rec.minibatches_done}", waiting_for="a board")
            return
        except JetfleetError:
            if self.cancelled.is_set():   # the agent answers our cancel with a failed (cancelled) result
                run.ended = "cancelled"
                raise JobCancelled() from None
            run.ended = "stopped"
            raise
        finally:
            self.live = None
            stopper.cancel()
            ctx.router.unwatch_progress(cid)
            self._reports.put_nowait(None)
            await asyncio.wait([consumer], timeout=ctx.config.drain_s)   # the last reports, unless stopping
            consumer.cancel()
        tr = result.training
        keep_tail(rec, list(tr.output_tail))
        run.trained, run.elapsed_s, run.energy_j, run.ended = len(tr.minibatch_times_s), tr.elapsed_s, tr.energy_j, "done"
        final = Point(run.base_done + len(tr.minibatch_times_s), run.base_elapsed_s + tr.elapsed_s,
                      run.base_energy_j + tr.energy_j, rec.mode, tr.end_s)
        await self._progress(device, run, final, force=True)

    async def _new_run(self, device: str, instance_id: str) -> RunRecord:
        """Apply the job's mode, then a new command from the job's progress (the previous one superseded)."""
        rec, ctx = self.rec, self.ctx
        previous = rec.run
        if previous is not None and not previous.ended:
            previous.ended = "stopped"
            ctx.router.supersede(previous.device_id, previous.run_id)   # cancelled on its board when seen there
        await self.move(JobState.APPLYING, f"setting {rec.mode} on {device}")
        result = await ctx.router.send(device, agent_pb2.Command(set_mode=agent_pb2.SetMode(
            mode=mode_to_pb(self.catalog.parse_mode(rec.mode)))))
        rec.mode = str(ctx.registry.get(device).catalog.validate(mode_from_pb(result.confirmed_mode)))
        stream = rec.options.inference
        if stream is not None and rec.choice is not None and rec.choice.inference is None:
            await self._choose_batch(device, stream)
        seq = previous.seq + 1 if previous is not None else 1
        run = RunRecord(f"{rec.job_id}-r{seq}", device, instance_id, seq,
                        min(rec.minibatches - rec.minibatches_done, MAX_MINIBATCHES), rec.minibatches_done,
                        rec.energy_j, rec.elapsed_s, inference_base=stream_.totals(previous) if stream else {})
        rec.runs.append(run)
        rec.run_id = run.run_id
        await self.save()   # the command id is durable before the command is sent
        return run

    def _command(self, run: RunRecord) -> agent_pb2.Command:
        rec = self.rec
        cmd = agent_pb2.Command(run_training=agent_pb2.RunTraining(
            workload=rec.workload, minibatches=run.minibatches, minibatch_size=defaults.MINIBATCH_SIZE,
            workers=defaults.WORKERS, progress_interval_s=self.ctx.config.progress_interval_s(rec.options.window_s)))
        if rec.options.attach:   # the operator's own training on the board (``jetfleet/agent/attach.py``)
            cmd.run_training.attach, cmd.run_training.attach_timeout_s = True, rec.options.attach_timeout_s
            cmd.run_training.minibatch_size = cmd.run_training.workers = 0
            if rec.options.template:   # one the agent launches from its template (``launch.py``)
                cmd.run_training.launch.CopyFrom(launch_pb(rec))
        stream = rec.options.inference
        if stream is not None:
            assert rec.choice is not None and rec.choice.inference is not None
            r = cmd.run_training
            r.inference_workload, r.latency_budget_s = stream.workload, stream.latency_budget_s
            r.inference_batch_size = rec.choice.inference.batch_size
            r.latency_window_s, r.seed = rec.options.window_s, rec.seed + run.seq
            if stream.arrival_rate:
                r.arrival_rate = stream.arrival_rate
            else:
                r.arrival_times_s.extend(stream.arrival_times_s)
        return cmd

    async def _stop_on_cancel(self, device: str, cid: str) -> None:
        """When the job is cancelled, ask the board to stop its training until the command ends (a cancel that
        reaches the agent before the training started finds nothing to stop, so it is asked again)."""
        await self.cancelled.wait()
        while True:
            try:
                await self.ctx.router.send(device, agent_pb2.Command(cancel=agent_pb2.Cancel(target_command_id=cid)),
                                           timeout_s=10)
            except JetfleetError as e:
                log.info("job %s: cancel on %s: %s", self.rec.job_id, device, e.message)
            await asyncio.sleep(self.ctx.config.poll_s)

    async def _consume(self, device: str, run: RunRecord) -> None:
        """Progress reports of the running command, in order: totals, segments, windows, steps."""
        while True:
            item = await self._reports.get()
            if item is None:
                return
            dev, r = item
            if dev != device or r.command_id != run.run_id:
                continue
            run.trained, run.elapsed_s, run.energy_j = r.minibatches_done, r.elapsed_s, r.energy_j
            keep_tail(self.rec, list(r.output_tail))
            p = Point(run.base_done + r.minibatches_done, run.base_elapsed_s + r.elapsed_s,
                      run.base_energy_j + r.energy_j, str(mode_from_pb(r.mode)), r.t_s)
            if r.HasField("inference"):
                self._stream_report(device, run, r.inference)
            window = await self._progress(device, run, p, force=r.final)
            if window is not None and not r.final and self.loop is not None:
                p95 = run.inference.p95_ms if run.inference is not None else float("nan")
                step = self.loop.on_window(window, p95_ms=p95)
                if step is not None:
                    await self._step(device, run.run_id, step, window)

    async def _choose_batch(self, device: str, stream: StreamSpec) -> None:
        """Measure the stream's forward passes in the chosen mode on the board and choose its largest batch."""
        rec = self.rec
        assert rec.choice is not None
        await self.move(JobState.APPLYING, f"measuring {stream.workload} inference in {rec.mode} on {device}")
        latency, power_w = await stream_.measure(self.ctx.router, device, stream.workload,
                                                 self.catalog.parse_mode(rec.mode))
        c = stream_.choose(stream, latency, rec.choice.time_ms / 1e3, rec.seed)
        how = ("given" if stream.batch_size else
               f"the fastest training of batch sizes {'/'.join(map(str, sorted(c.compared)))} with a simulated p95 "
               f"within {stream_.MARGIN:g} x the budget" if c.within else
               "no batch size met the budget in simulation: the lowest p95 (the loop steps to a faster mode)")
        rec.choice.inference = InferenceChoice(c.batch_size, c.p95_s * 1e3, c.train_per_s, c.within, how, power_w,
                                               {str(k): v * 1e3 for k, v in latency.items()})
        rec.choice.at_risk = bool(rec.choice.at_risk or not c.within)
        await self.save()

    def _stream_report(self, device: str, run: RunRecord, s: agent_pb2.InferenceStats) -> None:
        """A report's stream figures: into the run, the request counters and the latency histogram."""
        now = stream_.stats_of(s)
        run.inference = now
        metrics = self.ctx.metrics
        for outcome in ("served", "late", "dropped"):
            value = int(getattr(now, outcome))
            metrics.inference.count(self.rec.job_id, device, outcome, value - self._counted.get(outcome, 0))
            self._counted[outcome] = max(value, self._counted.get(outcome, 0))
        metrics.inference.observe(self.rec.job_id, device, list(s.buckets), s.bucket_sum_s)

    async def _progress(self, device: str, run: RunRecord, p: Point, *, force: bool) -> Window | None:
        rec, ctx = self.rec, self.ctx
        if p.done < rec.minibatches_done or run.run_id != rec.run_id:
            return None
        window = self.tracker.add(p, device)
        rec.minibatches_done, rec.elapsed_s, rec.energy_j = p.done, p.elapsed_s, p.energy_j
        rec.segments = self.tracker.segments
        if window is not None:
            rec.observed = Observed(window.mode, window.power_w, window.time_ms, window.end.t_s)
            if self.loop is not None:
                rec.goal_kept = not (self.loop.last_missed or self.loop.latency_missed)
        if force or ctx.clock() - self._persisted >= ctx.config.persist_s:
            self._persisted = ctx.clock()
            if await ctx.retry.run(ctx.store.advance_job, rec.job_id, run.run_id, p.done, p.energy_j, p.elapsed_s,
                                   what=f"job {rec.job_id} progress"):
                await self.save()
        ctx.changed(rec)
        return window

    async def _step(self, device: str, cid: str, step: Step, window: Window) -> None:
        rec, ctx = self.rec, self.ctx
        c = step.choice
        try:
            result = await ctx.router.send(device, agent_pb2.Command(set_mode=agent_pb2.SetMode(
                mode=mode_to_pb(c.mode), during_command_id=cid)), timeout_s=30)
        except JetfleetError as e:
            log.warning("job %s: step to %s on %s failed: %s", rec.job_id, c.mode, device, e.message)
            return
        rec.steps.append(StepRecord(window.end.t_s, window.end.done, rec.mode, str(mode_from_pb(result.confirmed_mode)),
                                    step.reason, window.power_w, window.time_ms, c.power_w, c.power_hi_w, c.time_ms,
                                    step.kind, c.time_hi_ms))
        rec.mode = rec.steps[-1].to_mode
        self.tracker.reset_window(rec.mode)
        ctx.metrics.job_steps.labels(rec.goal).inc()
        log.info("job %s step %d on %s: %s -> %s (%s)", rec.job_id, len(rec.steps), device, rec.steps[-1].from_mode,
                 rec.mode, step.reason)
        await self.save()
