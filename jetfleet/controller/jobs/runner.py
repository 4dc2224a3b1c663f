"""One job driven through its stages until it ends, resumable from its stored record at every point:

queued     wait for an online target board that no other job holds and no campaign is profiling on
profiling  no calibrated model for (board model, workload): profile k modes (the job's strategy)
modelling  transfer the best reference to them, with 5-fold calibration
applying   choose by the upper bounds (once; kept in the record), set the mode, the board confirms it
running    one training command per chunk of up to 100,000 minibatches, its progress recorded durably
           and the goal kept by the closed loop (``loop.py``); a step goes down as a SetMode for the
           running command, between two minibatches, without stopping training
done / failed / cancelled

Exactly once: a training command's id is stored before it is sent. After a controller restart the
same command is sent again to the same agent instance, which joins the run in flight (or answers
from the result it remembers); an agent that restarted (a new instance) or a board that is gone
gets a new command from the last progress recorded durably (``Store.advance_job`` only moves
forward, and only for the current command, so a late or superseded report never counts)."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import TYPE_CHECKING, Any

from jetfleet.controller.jobs import inference as stream_
from jetfleet.controller.jobs.loop import DEADLINE_TOLERANCE, ClosedLoop, Point, Tracker, Window
from jetfleet.controller.jobs.models import first_batch, second_batch
from jetfleet.controller.powertrain.feedback import Feedback, Observation, Step
from jetfleet.controller.powertrain.optimize import choose
from jetfleet.controller.store import JobRecord
from jetfleet.shared import defaults
from jetfleet.shared.catalog import Catalog
from jetfleet.shared.convert import mode_from_pb, mode_to_pb
from jetfleet.shared.errors import DeadlineExceeded, FailedPrecondition, JetfleetError, Unavailable
from jetfleet.shared.proto import agent_pb2, operator_pb2
from jetfleet.shared.workloads import MAX_MINIBATCHES, WORKLOADS

if TYPE_CHECKING:
    from jetfleet.controller.jobs.manager import JobManager

log = logging.getLogger(__name__)
TERMINAL = ("done", "failed", "cancelled")
ACTIVE_MIN_DONE = 5     # the active strategy's second batch needs a model of at least this many profiled modes
ACTIVE_FIT_S = 3.0      # wall seconds to choose that batch (a transfer on the first half, on a loaded 2-core machine)


class JobCancelled(Exception):
    """The operator cancelled the job."""


class JobRunner:
    """Drives one job (this module's docstring); the manager owns the task it runs in."""

    def __init__(self, manager: JobManager, rec: JobRecord) -> None:
        self.m, self.rec = manager, rec
        self.cancelled = asyncio.Event()
        self.catalog: Catalog | None = None
        self.loop: ClosedLoop | None = None
        self.tracker = Tracker(float(rec.options["window_s"]))
        self.tracker.segments = rec.segments
        self._reports: asyncio.Queue[tuple[str, agent_pb2.TrainingProgress] | None] = asyncio.Queue()
        self._persisted = 0.0
        self._counted: dict[str, int] = {}   # the running command's requests counted into the metrics, by outcome
        self._previous_run: dict[str, Any] = {}
        self._fleet_board = rec.run.get("device_id", "") if rec.goal == "fleet" else ""   # where the queue placed it
        self._live: tuple[str, str] | None = None     # (board, command) while a training command runs

    # --- state -------------------------------------------------------------------------------------
    async def save(self) -> None:
        """Write the whole record (stage changes, steps, choice)."""
        self._persisted = self.m.clock()
        await asyncio.to_thread(self.m.store.update_job, self.rec)
        self.m.update_gauges(self.rec)

    async def _state(self, state: str, detail: str) -> None:
        if (self.rec.state, self.rec.detail) != (state, detail):
            self.rec.state, self.rec.detail = state, detail
            await self.save()

    def _check_cancel(self) -> None:
        if self.cancelled.is_set():
            raise JobCancelled()

    async def _pause(self) -> None:
        try:
            await asyncio.wait_for(self.cancelled.wait(), self.m.config.poll_s)
        except asyncio.TimeoutError:
            pass
        self._check_cancel()

    # --- the stages ----------------------------------------------------------------------------------
    async def run(self) -> None:
        """The job from wherever its record says it is to its end."""
        rec = self.rec
        try:
            if rec.goal == "fleet":
                await self._fleet_run()
                await self._finish("done", self._summary())
                return
            self.catalog = await asyncio.to_thread(self.m.campaigns.catalog_for, "", rec.target_model)
            await self._model()
            await self._prepare()
            while rec.minibatches_done < rec.minibatches:
                device = await self._board()
                try:
                    await self._run_on(device)
                finally:
                    self.m.release(device, rec.job_id)
            await self._finish("done", self._summary())
        except JobCancelled:
            await self._finish("cancelled", f"cancelled after {rec.minibatches_done} of {rec.minibatches} minibatches")
        except JetfleetError as e:
            await self._finish("failed", e.message)
        except asyncio.CancelledError:
            raise   # the controller is stopping: the record stays where it is, the next start resumes it
        except Exception as e:
            log.exception("job %s failed", rec.job_id)
            await self._finish("failed", f"internal error: {type(e).__name__} (see the controller log)")

    async def _finish(self, state: str, detail: str) -> None:
        rec = self.rec
        rec.state, rec.detail, rec.finished_s = state, detail, time.time()
        if rec.goal == "fleet" and self.m.fleet is not None:
            await self.m.fleet.finish(rec.job_id)   # its board frees; the others are re-chosen
        if state == "cancelled":
            for cid in rec.campaign_ids:
                run = self.m.campaigns.runs.get(cid)
                if run is not None and run.rec.status in ("running", "paused"):
                    await self.m.campaigns.control(cid, "cancel")
        await self.save()
        log.info("job %s %s: %s", rec.job_id, state, detail)

    async def _model(self) -> None:
        rec = self.rec
        if rec.model_id:
            return
        assert self.catalog is not None
        doc = await asyncio.to_thread(self.m.models.repo.find, rec.target_model, rec.workload)
        if doc is not None:
            rec.model_id = doc["model_id"]
            await self.save()
            return
        reference = await asyncio.to_thread(self.m.models.repo.best_reference, rec.target_model, rec.workload)
        k, strategy = int(rec.options["profile_modes"]), rec.options["strategy"]
        if not rec.campaign_ids:
            await self._campaign(first_batch(strategy, self.catalog, k, seed=int(rec.created_s)))
        while True:
            runs = [self.m.campaigns.get(c) for c in rec.campaign_ids]
            done = sum(r.count("done") for r in runs)
            total = sum(len(r.modes) for r in runs)
            for r in runs:
                if r.rec.status == "cancelled":
                    raise FailedPrecondition(f"its profiling campaign {r.rec.campaign_id} was cancelled", field="job")
            left = total - done - sum(r.count("failed") for r in runs)
            second_due = done >= ACTIVE_MIN_DONE and left <= self._lookahead(runs[0])
            if strategy == "active" and len(rec.campaign_ids) == 1 and second_due:
                # the second batch is chosen while the first one's last modes are still on the boards
                planned = [self.catalog.parse_mode(m) for m in runs[0].modes]
                picked = await asyncio.to_thread(second_batch, self.m.models.repo, reference, self.catalog,
                                                 rec.target_model, rec.workload, k, int(rec.created_s), planned)
                await self._campaign(picked)
                continue
            if all(r.rec.status == "done" for r in runs):
                break
            await self._state("profiling", f"profiling {done}/{total} modes of {rec.workload} on "
                                           f"{rec.target_device or rec.target_model} ({strategy})")
            await self._pause()
        await self._state("modelling", f"transferring {reference['model_id']} to {done} profiled modes")
        doc = await asyncio.to_thread(self.m.models.transfer_doc, reference, rec.target_model, rec.workload,
                                      baseline=False)
        rec.model_id = doc["model_id"]
        await self.save()

    def _lookahead(self, run: Any) -> int:
        """Modes still to measure when the active strategy's second batch is chosen: one per board, or as many as
        the boards measure while it is chosen (a few seconds of fitting), so that no board waits for the model."""
        per_mode_s = sum(run.durations) / len(run.durations) if run.durations else math.inf
        return max(len(self._targets()), math.ceil(ACTIVE_FIT_S / per_mode_s) if per_mode_s > 0 else 1)

    async def _campaign(self, modes: list[Any]) -> None:
        rec = self.rec
        camp = await self.m.campaigns.create(operator_pb2.CreateCampaignRequest(
            workload=rec.workload, device_id=rec.target_device, board_model="" if rec.target_device else rec.target_model,
            modes=f"job:{rec.job_id}", mode_list=[str(m) for m in modes], minibatches=defaults.MINIBATCHES))
        rec.campaign_ids.append(camp.campaign_id)
        await self.save()

    async def _prepare(self) -> None:
        rec = self.rec
        assert self.catalog is not None
        doc = await asyncio.to_thread(self.m.models.repo.doc, rec.model_id)
        pred = await asyncio.to_thread(self.m.cache.get, doc, self.catalog, float(rec.options["confidence"]))
        feedback = Feedback(pred)
        index = {str(m): i for i, m in enumerate(pred.modes)}
        for s in rec.steps:   # what the loop had learned before a restart
            if s["from_mode"] in index:
                feedback.observe(Observation(index[s["from_mode"]], s["observed_power_w"], s["observed_time_ms"]),
                                 over_budget=s.get("kind") == "over")
        self.loop = ClosedLoop(feedback, index, goal=rec.goal, power_budget_w=rec.power_budget_w,
                               deadline_s=rec.deadline_s, minibatches=rec.minibatches,
                               max_steps=int(rec.options["max_steps"]), steps_used=len(rec.steps),
                               latency_budget_ms=float(rec.options.get("inference", {}).get("latency_budget_s", 0)) * 1e3)
        if rec.choice:
            return
        c = choose(pred, power_budget_w=rec.power_budget_w or None, deadline_s=rec.deadline_s or None,
                   min_energy=rec.goal == "energy", minibatches_per_epoch=rec.minibatches)
        rec.choice = {"mode": str(c.mode), "goal": c.goal, "time_ms": c.time_ms, "time_hi_ms": c.time_hi_ms,
                      "power_w": c.power_w, "power_hi_w": c.power_hi_w, "power_lo_w": c.power_lo_w,
                      "at_risk": c.at_risk, "confidence": pred.confidence}
        rec.mode = str(c.mode)
        await self.save()

    # --- fleet jobs (placed and paced by the fleet queue, ``controller/fleet/queue.py``) -------------------
    async def _fleet_run(self) -> None:
        rec = self.rec
        assert self.m.fleet is not None
        await self.m.fleet.add(rec)
        while rec.minibatches_done < rec.minibatches:
            while not self._fleet_board:
                await self._state("queued", "waiting in the fleet queue for a board and power under the lab cap")
                await self._pause()
            device = self._fleet_board
            self.catalog = await asyncio.to_thread(self.m.campaigns.catalog_for, "", rec.target_model)
            while True:
                live = self.m.registry.devices.get(device)
                if live is not None and live.online and self.m.hold(device, rec.job_id):
                    break
                await self._state("queued", f"placed on {device}: waiting for it ("
                                            f"{'offline' if live is None or not live.online else 'busy'})")
                await self._pause()
            try:
                await self._run_on(device)
            finally:
                self.m.release(device, rec.job_id)

    async def fleet_decision(self, board: str, model: str, info: dict[str, Any], kind: str, reason: str) -> None:
        """The fleet queue decided: ``start`` on ``board`` in ``info['mode']``, or a new mode for this job."""
        rec = self.rec
        if kind == "start":
            doc = await asyncio.to_thread(self.m.models.repo.find, model, rec.workload)
            rec.target_model, rec.model_id, rec.mode = model, doc["model_id"] if doc else "", info["mode"]
            rec.choice = {"mode": info["mode"], "goal": "fleet", "time_ms": info["time_ms"],
                          "time_hi_ms": info["time_ms"], "power_w": info["power_w"], "power_hi_w": info["power_hi_w"],
                          "power_lo_w": info["power_w"], "at_risk": False,
                          "confidence": float(rec.options["confidence"])}
            self._fleet_board = board
            await self.save()
            return
        if self._live is None:          # not training yet: it starts in the new mode
            rec.mode = info["mode"]
            await self.save()
            return
        device, cid = self._live
        assert self.catalog is not None
        try:
            result = await self.m.router.send(device, agent_pb2.Command(set_mode=agent_pb2.SetMode(
                mode=mode_to_pb(self.catalog.parse_mode(info["mode"])), during_command_id=cid)), timeout_s=30)
        except JetfleetError as e:
            log.warning("job %s: fleet step to %s on %s failed: %s", rec.job_id, info["mode"], device, e.message)
            return
        obs = rec.observed or {}
        rec.steps.append({"t_s": float(obs.get("t_s", 0.0)), "at_minibatch": rec.minibatches_done,
                          "from_mode": rec.mode, "to_mode": str(mode_from_pb(result.confirmed_mode)),
                          "reason": f"fleet: {reason}", "observed_power_w": float(obs.get("power_w", 0.0)),
                          "observed_time_ms": float(obs.get("time_ms", 0.0)), "predicted_power_w": info["power_w"],
                          "predicted_power_w_hi": info["power_hi_w"], "predicted_time_ms": info["time_ms"],
                          "kind": kind})
        rec.mode = rec.steps[-1]["to_mode"]
        self.tracker.reset_window(rec.mode)
        self.m.metrics.job_steps.labels(rec.goal).inc()
        await self.save()

    def _targets(self) -> list[str]:
        """The boards the job may run on: its device, or the boards of its model that offer its workload."""
        rec = self.rec
        if rec.target_device:
            return [rec.target_device]
        return [d.record.device_id for d in self.m.registry.list(rec.target_model)
                if rec.workload in WORKLOADS or rec.workload in d.workloads]

    async def _board(self) -> str:
        """An online target board this job holds (the one it ran on first, if it is back)."""
        rec = self.rec
        while True:
            self._check_cancel()
            targets = self._targets()
            previous = rec.run.get("device_id")
            if previous in targets:
                targets.remove(previous)
                targets.insert(0, previous)
            waiting = []
            for d in targets:
                live = self.m.registry.devices.get(d)
                if live is None or not live.online:
                    waiting.append(f"{d} offline")
                elif self.m.hold(d, rec.job_id):
                    return d
                else:
                    waiting.append(f"{d} busy")
            what = "; ".join(waiting) or f"no {rec.target_model} board known"
            await self._state("queued", f"waiting for a board: {what}")
            await self._pause()

    async def _run_on(self, device: str) -> None:
        rec = self.rec
        live = self.m.registry.get(device)
        resume = bool(rec.run_id) and rec.run.get("device_id") == device and rec.run.get("instance_id") == live.instance_id
        self._previous_run = dict(rec.run)
        self._counted = {k: int(v) for k, v in rec.run.get("inference", {}).items()
                         if k in ("served", "late", "dropped")} if resume else {}
        if not resume:
            await self._state("applying", f"setting {rec.mode} on {device}")
            result = await self.m.router.send(device, agent_pb2.Command(set_mode=agent_pb2.SetMode(
                mode=mode_to_pb(self.catalog.parse_mode(rec.mode)))))  # type: ignore[union-attr]
            rec.mode = str(live.catalog.validate(mode_from_pb(result.confirmed_mode)))
            stream = rec.options.get("inference")
            if stream and "inference" not in rec.choice:
                await self._choose_batch(device, stream)
            seq = int(rec.run.get("seq", 0)) + 1
            rec.run_id = f"{rec.job_id}-r{seq}"
            rec.run = {"device_id": device, "instance_id": live.instance_id, "seq": seq,
                       "minibatches": min(rec.minibatches - rec.minibatches_done, MAX_MINIBATCHES),
                       "base_done": rec.minibatches_done, "base_energy_j": rec.energy_j,
                       "base_elapsed_s": rec.elapsed_s}
            if stream:
                rec.run["inference_base"] = stream_.totals(self._previous_run)
            await self.save()   # the command id is durable before the command is sent
        run = rec.run
        cid = rec.run_id
        self._live = (device, cid)
        await self._state("running", f"training on {device} in {rec.mode}" + (" (rejoined)" if resume else ""))
        self.tracker.new_run(Point(rec.minibatches_done, rec.elapsed_s, rec.energy_j, rec.mode, 0.0))
        self.m.router.watch_progress(cid, lambda dev, r: self._reports.put_nowait((dev, r)))
        consumer = asyncio.create_task(self._consume(device, cid))
        stopper = asyncio.create_task(self._stop_on_cancel(device, cid))
        cmd = agent_pb2.Command(run_training=agent_pb2.RunTraining(
            workload=rec.workload, minibatches=int(run["minibatches"]), minibatch_size=defaults.MINIBATCH_SIZE,
            workers=defaults.WORKERS, progress_interval_s=self.m.config.progress_interval_s(float(rec.options["window_s"]))))
        stream = rec.options.get("inference")
        if stream:
            r = cmd.run_training
            r.inference_workload, r.latency_budget_s = stream["workload"], stream["latency_budget_s"]
            r.inference_batch_size = int(rec.choice["inference"]["batch_size"])
            r.latency_window_s, r.seed = float(rec.options["window_s"]), int(rec.created_s) + int(run["seq"])
            if stream["arrival_rate"]:
                r.arrival_rate = stream["arrival_rate"]
            else:
                r.arrival_times_s.extend(stream["arrival_times_s"])
        try:
            result = await self.m.router.send(device, cmd, command_id=cid, timeout_s=self.m.config.run_timeout_s)
        except (Unavailable, DeadlineExceeded) as e:
            await self._state("queued", f"{device} went away mid-run ({e.message}); resuming from minibatch "
                                        f"{rec.minibatches_done}")
            return
        except JetfleetError:
            if self.cancelled.is_set():   # the agent answers our cancel with a failed (cancelled) result
                raise JobCancelled() from None
            raise
        finally:
            self._live = None
            stopper.cancel()
            self.m.router.unwatch_progress(cid)
            self._reports.put_nowait(None)
            await asyncio.wait([consumer], timeout=self.m.config.drain_s)   # the last reports, unless stopping
            consumer.cancel()
        tr = result.training
        final = Point(int(run["base_done"]) + len(tr.minibatch_times_s), float(run["base_elapsed_s"]) + tr.elapsed_s,
                      float(run["base_energy_j"]) + tr.energy_j, rec.mode, tr.end_s)
        await self._progress(device, cid, final, force=True)

    async def _stop_on_cancel(self, device: str, cid: str) -> None:
        """When the job is cancelled, ask the board to stop its training until the command ends (a cancel that
        reaches the agent before the training started finds nothing to stop, so it is asked again)."""
        await self.cancelled.wait()
        while True:
            try:
                await self.m.router.send(device, agent_pb2.Command(cancel=agent_pb2.Cancel(target_command_id=cid)),
                                         timeout_s=10)
            except JetfleetError as e:
                log.info("job %s: cancel on %s: %s", self.rec.job_id, device, e.message)
            await asyncio.sleep(self.m.config.poll_s)

    async def _consume(self, device: str, cid: str) -> None:
        """Progress reports of the running command, in order: totals, segments, windows, steps."""
        rec = self.rec
        while True:
            item = await self._reports.get()
            if item is None:
                return
            dev, r = item
            if dev != device or r.command_id != cid:
                continue
            run = rec.run
            p = Point(int(run["base_done"]) + r.minibatches_done, float(run["base_elapsed_s"]) + r.elapsed_s,
                      float(run["base_energy_j"]) + r.energy_j, str(mode_from_pb(r.mode)), r.t_s)
            if r.HasField("inference"):
                self._stream_report(device, r.inference)
            window = await self._progress(device, cid, p, force=r.final)
            if window is not None and not r.final and self.loop is not None:
                p95 = float(rec.run.get("inference", {}).get("p95_ms", math.nan))
                step = self.loop.on_window(window, p95_ms=p95)
                if step is not None:
                    await self._step(device, cid, step, window)

    async def _choose_batch(self, device: str, stream: dict[str, Any]) -> None:
        """Measure the stream's forward passes in the chosen mode on the board and choose its largest batch."""
        rec = self.rec
        assert self.catalog is not None
        await self._state("applying", f"measuring {stream['workload']} inference in {rec.mode} on {device}")
        latency, power_w = await stream_.measure(self.m.router, device, stream["workload"],
                                                 self.catalog.parse_mode(rec.mode))
        c = stream_.choose(stream, latency, float(rec.choice["time_ms"]) / 1e3, int(rec.created_s))
        how = ("given" if stream["batch_size"] else
               f"the fastest training of batch sizes {'/'.join(map(str, sorted(c.compared)))} with a simulated p95 "
               f"within {stream_.MARGIN:g} x the budget" if c.within else
               "no batch size met the budget in simulation: the lowest p95 (the loop steps to a faster mode)")
        rec.choice["inference"] = {"batch_size": c.batch_size, "p95_ms": c.p95_s * 1e3, "train_per_s": c.train_per_s,
                                   "within": c.within, "how": how, "power_w": power_w,
                                   "latency_ms": {str(k): v * 1e3 for k, v in latency.items()}}
        rec.choice["at_risk"] = bool(rec.choice["at_risk"] or not c.within)
        await self.save()

    def _stream_report(self, device: str, s: agent_pb2.InferenceStats) -> None:
        """A report's stream figures: into the run, the request counters and the latency histogram."""
        rec = self.rec
        now = stream_.stats_dict(s)
        rec.run["inference"] = now
        for outcome in ("served", "late", "dropped"):
            new = now[outcome] - self._counted.get(outcome, 0)
            self.m.metrics.inference.count(rec.job_id, device, outcome, new)
            self._counted[outcome] = max(now[outcome], self._counted.get(outcome, 0))
        self.m.metrics.inference.observe(rec.job_id, device, list(s.buckets), s.bucket_sum_s)

    async def _progress(self, device: str, cid: str, p: Point, *, force: bool) -> Window | None:
        rec = self.rec
        if p.done < rec.minibatches_done or cid != rec.run_id:
            return None
        window = self.tracker.add(p, device)
        rec.minibatches_done, rec.elapsed_s, rec.energy_j = p.done, p.elapsed_s, p.energy_j
        rec.segments = self.tracker.segments
        if window is not None:
            rec.observed = {"mode": window.mode, "power_w": window.power_w, "time_ms": window.time_ms,
                            "t_s": window.end.t_s}
            if self.loop is not None:
                rec.goal_kept = not (self.loop.last_missed or self.loop.latency_missed)
        if force or self.m.clock() - self._persisted >= self.m.config.persist_s:
            self._persisted = self.m.clock()
            if await asyncio.to_thread(self.m.store.advance_job, rec.job_id, cid, p.done, p.energy_j, p.elapsed_s):
                await self.save()
        self.m.update_gauges(rec)
        return window

    async def _step(self, device: str, cid: str, step: Step, window: Window) -> None:
        rec = self.rec
        c = step.choice
        new = str(c.mode)
        try:
            result = await self.m.router.send(device, agent_pb2.Command(set_mode=agent_pb2.SetMode(
                mode=mode_to_pb(c.mode), during_command_id=cid)), timeout_s=30)
        except JetfleetError as e:
            log.warning("job %s: step to %s on %s failed: %s", rec.job_id, new, device, e.message)
            return
        rec.steps.append({"t_s": window.end.t_s, "at_minibatch": window.end.done, "from_mode": rec.mode,
                          "to_mode": str(mode_from_pb(result.confirmed_mode)), "reason": step.reason,
                          "observed_power_w": window.power_w, "observed_time_ms": window.time_ms,
                          "predicted_power_w": c.power_w, "predicted_power_w_hi": c.power_hi_w,
                          "predicted_time_ms": c.time_ms, "kind": step.kind})
        rec.mode = rec.steps[-1]["to_mode"]
        self.tracker.reset_window(rec.mode)
        self.m.metrics.job_steps.labels(rec.goal).inc()
        log.info("job %s step %d on %s: %s -> %s (%s)", rec.job_id, len(rec.steps), device, rec.steps[-1]["from_mode"],
                 rec.mode, step.reason)
        await self.save()

    def _summary(self) -> str:
        rec = self.rec
        mean_w = rec.energy_j / rec.elapsed_s if rec.elapsed_s > 0 else math.nan
        if rec.goal == "power":
            rec.goal_kept = bool(self.loop is None or not self.loop.last_missed) and mean_w <= rec.power_budget_w * 1.01
            if rec.options.get("inference"):   # and the stream's last window within its latency budget
                p95 = float(rec.run.get("inference", {}).get("p95_ms", math.nan))
                rec.goal_kept = rec.goal_kept and (not math.isfinite(p95) or
                                                   p95 <= rec.options["inference"]["latency_budget_s"] * 1e3)
        elif rec.goal == "deadline":   # within the loop's tolerance, as a budget is within the sensors'
            rec.goal_kept = rec.elapsed_s <= rec.deadline_s * (1 + DEADLINE_TOLERANCE)
        elif rec.goal == "fleet":      # the cap is the lab's (fleet plan); a deadline, if any, is the job's
            rec.goal_kept = not rec.deadline_s or rec.elapsed_s <= rec.deadline_s
        modes = ", ".join(f"{s['mode']} {s['seconds']:.0f} s" for s in rec.segments)
        return (f"{rec.minibatches_done} minibatches in {rec.elapsed_s:.0f} board s, {rec.energy_j / 1e3:.1f} kJ, "
                f"mean {mean_w:.2f} W; modes: {modes}; {len(rec.steps)} step(s); goal "
                f"{'kept' if rec.goal_kept else 'MISSED'}" + stream_.latency_summary(rec.options, rec.run))
