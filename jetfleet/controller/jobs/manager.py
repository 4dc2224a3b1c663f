"""Training jobs under a goal: submit (every bad input refused before anything is stored), list, show,
cancel; one runner task per unfinished job (``runner.py``), started again from the store after a
controller restart. The operator API's servicer calls this; it does not import gRPC."""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jetfleet.controller.campaigns import CampaignManager
from jetfleet.controller.commands import CommandRouter
from jetfleet.controller.fleet.queue import FleetQueue
from jetfleet.controller.jobs import inference as stream_
from jetfleet.controller.jobs.models import JOB_STRATEGIES, PredictionCache
from jetfleet.controller.jobs.runner import TERMINAL, JobRunner
from jetfleet.controller.metrics import ControllerMetrics
from jetfleet.controller.powertrain.calibrate import DEFAULT_CONFIDENCE
from jetfleet.controller.powertrain.optimize import check_goal, choose
from jetfleet.controller.powertrain.service import ModelService
from jetfleet.controller.registry import Registry
from jetfleet.controller.store import JobRecord
from jetfleet.shared.bounds import check_id
from jetfleet.shared.catalog import PowerMode
from jetfleet.shared.convert import mode_to_pb
from jetfleet.shared.errors import FailedPrecondition, InvalidArgument, NotFound
from jetfleet.shared.proto import operator_pb2

log = logging.getLogger(__name__)
MAX_JOB_MINIBATCHES = 100_000_000
STATES = ("queued", "profiling", "modelling", "applying", "running", "done", "failed", "cancelled")


@dataclass(frozen=True)
class JobsConfig:
    """How jobs run: default options, how often they poll and persist, how long a training command may take."""

    profile_modes: int = 50              # k, when a target has no model
    strategy: str = "balanced"
    confidence: float = DEFAULT_CONFIDENCE
    max_steps: int = 3
    window_s: float = 10.0               # board seconds per closed-loop window
    reports_per_window: int = 5          # progress reports per window
    poll_s: float = 0.2                  # while waiting for a board or a campaign (wall seconds)
    persist_s: float = 1.0               # durable progress at most this often per job (wall seconds), and at the end
    run_timeout_s: float = 7 * 86400.0   # one training command (a board that vanishes fails it at once)
    drain_s: float = 5.0                 # after a command ends: time to account its last reports (wall seconds)

    def progress_interval_s(self, window_s: float) -> float:
        """Board seconds between a training's progress reports."""
        return max(0.05, window_s / self.reports_per_window)


class JobManager:
    """Submits, lists, shows and cancels jobs; runs one ``JobRunner`` task per unfinished job."""

    def __init__(self, registry: Registry, router: CommandRouter, campaigns: CampaignManager, models: ModelService,
                 metrics: ControllerMetrics, *, config: JobsConfig = JobsConfig(),
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self.registry, self.router, self.campaigns, self.models = registry, router, campaigns, models
        self.metrics, self.config, self.clock, self.wall = metrics, config, clock, wall
        self._moved: dict[str, tuple[str, str, int]] = {}   # active jobs: (stage, detail, minibatches) last seen
        self._power_device: dict[str, str] = {}             # jobs: the board their power series name
        self.store = registry.store
        self.cache = PredictionCache(models.repo)
        self.runners: dict[str, JobRunner] = {}
        self.records: dict[str, JobRecord] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._held: dict[str, str] = {}    # device -> the job that holds it
        self.inference_latency: dict[tuple[str, str], dict[int, float]] = {}   # (model, workload) at MAXN, measured
        self.fleet: FleetQueue | None = None   # the fleet queue under the lab cap (set by the controller)

    # --- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        """Load every stored job and drive the unfinished ones again (after a controller restart)."""
        for rec in await asyncio.to_thread(self.store.list_jobs):
            self.records[rec.job_id] = rec
            if rec.state not in TERMINAL:
                self._spawn(rec)
        self.update_gauges()

    async def stop(self) -> None:
        """Stop driving jobs; their records stay in the store for the next start."""
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        self._tasks.clear()

    def _spawn(self, rec: JobRecord) -> None:
        runner = self.runners[rec.job_id] = JobRunner(self, rec)
        task = self._tasks[rec.job_id] = asyncio.create_task(runner.run())
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        for job, t in list(self._tasks.items()):
            if t is task:
                del self._tasks[job]

    # --- boards --------------------------------------------------------------------------------------
    def hold(self, device_id: str, job_id: str) -> bool:
        """Reserve a board for a job: not if another job holds it or a campaign profiles on it."""
        holder = self._held.get(device_id)
        if holder not in (None, job_id) or not self.campaigns.hold(device_id):
            return False
        self._held[device_id] = job_id
        return True

    def holder(self, device_id: str) -> str | None:
        """The job holding a board, '' for a campaign profiling on it, None when it is free."""
        if device_id in self._held:
            return self._held[device_id]
        return "" if self.campaigns.profiling(device_id) else None

    def release(self, device_id: str, job_id: str) -> None:
        """A job lets go of a board."""
        if self._held.get(device_id) == job_id:
            del self._held[device_id]
            self.campaigns.release(device_id)

    # --- the operator API -------------------------------------------------------------------------------
    async def submit(self, req: operator_pb2.SubmitJobRequest) -> operator_pb2.Job:
        """Check a job request, refuse what cannot work, store the job and start it; a repeated request id
        returns the job it created."""
        if req.request_id:
            check_id(req.request_id, "request_id")
            existing = await asyncio.to_thread(self.store.get_job, req.request_id)
            if existing is not None:
                return self.job_pb(self.records.get(existing.job_id, existing))
        rec = await self._check(req)
        if not await asyncio.to_thread(self.store.create_job, rec):
            stored = await asyncio.to_thread(self.store.get_job, rec.job_id)
            assert stored is not None
            return self.job_pb(self.records.get(rec.job_id, stored))
        self.records[rec.job_id] = rec
        self._spawn(rec)
        log.info("job %s: %s on %s, %s, %d minibatches", rec.job_id, rec.workload, rec.target_device or rec.target_model,
                 rec.goal, rec.minibatches)
        self.update_gauges(rec)
        return self.job_pb(rec)

    async def _check(self, req: operator_pb2.SubmitJobRequest) -> JobRecord:
        if req.fleet:
            if stream_.has_stream(req):
                raise InvalidArgument("a fleet job cannot serve inference (the queue places boards by training "
                                      "alone): submit it to a device or board model with a power budget",
                                      field="inference_workload")
            return await self._check_fleet(req)
        if req.priority:
            raise InvalidArgument("priority is for fleet jobs (--fleet)", field="priority")
        if bool(req.device_id) == bool(req.board_model):
            raise InvalidArgument("give exactly one target: a device or a board model", field="device_id")
        check_id(req.workload, "workload")
        if req.device_id:
            check_id(req.device_id, "device_id")
            model = self.registry.get(req.device_id).catalog.model
        else:
            check_id(req.board_model, "board_model")
            model = (await asyncio.to_thread(self.campaigns.catalog_for, "", req.board_model)).model
        self.registry.check_workload(req.workload, device_id=req.device_id, board_model=model)
        minibatches = _length(req)
        check_goal(req.power_budget_w or None, req.deadline_s or None, req.min_energy, 1)
        c = self.config
        opts: dict[str, Any] = {
            "profile_modes": req.profile_modes or c.profile_modes, "strategy": req.strategy or c.strategy,
            "confidence": req.confidence or c.confidence, "max_steps": req.max_steps or c.max_steps,
            "window_s": req.window_s or c.window_s, "epochs": req.epochs,
            "minibatches_per_epoch": req.minibatches_per_epoch, "request_id": req.request_id}
        _bounded(opts["profile_modes"], 10, 1000, "profile_modes")
        _bounded(opts["confidence"], 0.5, 0.99, "confidence")
        _bounded(opts["max_steps"], 0, 10, "max_steps")
        _bounded(opts["window_s"], 1.0, 3600.0, "window_s")
        if opts["strategy"] not in JOB_STRATEGIES:
            raise InvalidArgument(f"strategy {opts['strategy']!r}: expected one of {', '.join(JOB_STRATEGIES)}",
                                  field="strategy")
        goal = "power" if req.power_budget_w else "deadline" if req.deadline_s else "energy"
        stream = stream_.check_stream(req) if stream_.has_stream(req) else None
        await asyncio.to_thread(self._feasible, model, req, minibatches, opts)
        if stream is not None:   # the last check: it measures on a board unless this model's latencies are known
            fastest = await stream_.check_against_board(self.registry, self.router, stream, req.device_id, model,
                                                         self.inference_latency)
            opts["inference"] = {**stream, "fastest_ms": fastest * 1e3}
        return JobRecord(req.request_id or uuid.uuid4().hex[:12], req.workload, req.device_id, model, goal,
                         req.power_budget_w, req.deadline_s, minibatches, time.time(), opts)

    async def _check_fleet(self, req: operator_pb2.SubmitJobRequest) -> JobRecord:
        """A fleet job: no target and no goal of its own (the lab's cap and the queue decide); a priority and
        an optional deadline that orders the queue; a board model with a calibrated model that can run it."""
        if self.fleet is None:
            raise FailedPrecondition("this controller has no fleet queue", field="fleet")
        for name in ("device_id", "board_model"):
            if getattr(req, name):
                raise InvalidArgument(f"a fleet job is placed by the queue: no {name}", field=name)
        if req.power_budget_w or req.min_energy:
            raise InvalidArgument("a fleet job's power is the lab cap's: no power budget or energy goal",
                                  field="power_budget_w" if req.power_budget_w else "min_energy")
        check_id(req.workload, "workload")
        minibatches = _length(req)
        priority = req.priority or 1.0
        _bounded(priority, 0.01, 100.0, "priority")
        if req.deadline_s and not (math.isfinite(req.deadline_s) and req.deadline_s > 0):
            raise InvalidArgument("deadline_s must be a positive number of seconds", field="deadline_s")
        c = self.config
        confidence = req.confidence or c.confidence
        _bounded(confidence, 0.5, 0.99, "confidence")
        self.fleet.lab_cap()
        await asyncio.to_thread(self.fleet.candidates, req.workload, confidence)
        opts: dict[str, Any] = {"confidence": confidence, "max_steps": 0, "window_s": req.window_s or c.window_s,
                                "priority": priority, "request_id": req.request_id, "epochs": req.epochs,
                                "minibatches_per_epoch": req.minibatches_per_epoch, "profile_modes": 0, "strategy": ""}
        _bounded(opts["window_s"], 1.0, 3600.0, "window_s")
        return JobRecord(req.request_id or uuid.uuid4().hex[:12], req.workload, "", "", "fleet", 0.0,
                         req.deadline_s, minibatches, time.time(), opts)

    def _feasible(self, model: str, req: operator_pb2.SubmitJobRequest, minibatches: int, opts: dict[str, Any]) -> None:
        """With a model already there, refuse a budget below every lower bound or a deadline no mode can meet
        now; without one, refuse unless there is a reference to transfer from and enough modes to profile."""
        repo = self.models.repo
        doc = repo.find(model, req.workload)
        catalog = self.campaigns.catalog_for("", model)
        if doc is None:
            repo.best_reference(model, req.workload)
            if opts["profile_modes"] > catalog.size:
                raise InvalidArgument(f"profile_modes={opts['profile_modes']}: {model} has {catalog.size} modes",
                                      field="profile_modes")
            return
        pred = self.cache.get(doc, catalog, float(opts["confidence"]))
        choose(pred, power_budget_w=req.power_budget_w or None, deadline_s=req.deadline_s or None,
               min_energy=req.min_energy, minibatches_per_epoch=minibatches)

    def get_record(self, job_id: str) -> JobRecord:
        """A job's live record; NotFound if there is none."""
        rec = self.records.get(job_id)
        if rec is None:
            raise NotFound(f"unknown job {job_id[:64]!r}", field="job_id")
        return rec

    def get(self, job_id: str) -> operator_pb2.Job:
        """One job as the operator API's Job."""
        return self.job_pb(self.get_record(job_id))

    def list(self) -> operator_pb2.ListJobsResponse:
        """Every job, oldest first."""
        return operator_pb2.ListJobsResponse(jobs=[self.job_pb(r) for r in sorted(
            self.records.values(), key=lambda r: (r.created_s, r.job_id))])

    async def cancel(self, job_id: str) -> operator_pb2.Job:
        """Cancel a job: a running training stops after its current minibatch; FailedPrecondition once it ended."""
        rec = self.get_record(job_id)
        if rec.state in TERMINAL:
            raise FailedPrecondition(f"job {job_id} is {rec.state}; only a queued or running job can be cancelled",
                                     field="job_id")
        self.runners[job_id].cancelled.set()   # the runner stops its training (or its wait) and ends the job
        task = self._tasks.get(job_id)
        if task is not None:
            await asyncio.wait([task], timeout=10)
        return self.job_pb(rec)

    # --- reporting ------------------------------------------------------------------------------------
    def update_gauges(self, rec: JobRecord | None = None) -> None:
        """Jobs by state; and a job's progress and power against its budget."""
        counts = dict.fromkeys(STATES, 0)
        for r in self.records.values():
            counts[r.state] = counts.get(r.state, 0) + 1
        for state, n in counts.items():
            self.metrics.jobs.labels(state).set(n)
        if rec is None:
            for r in self.records.values():
                self._stage_gauge(r)
            return
        self._stage_gauge(rec)
        if rec.state in TERMINAL:   # an ended job's series go (metrics.job_ended)
            self._power_device.pop(rec.job_id, None)
            self.metrics.job_ended(rec.job_id)
            return
        self.metrics.job_progress.labels(rec.job_id, rec.workload).set(rec.minibatches_done / max(1, rec.minibatches))
        device = rec.run.get("device_id", "") if rec.state not in TERMINAL else ""
        if self._power_device.get(rec.job_id, device) != device:   # moved to another board: the old one's go
            self.metrics.drop_job_power(rec.job_id)
        self._power_device[rec.job_id] = device
        if device:
            power = rec.goal == "power"
            self.metrics.job_power_now(rec.job_id, device, observed_w=rec.observed["power_w"] if rec.observed else None,
                                       budget_w=rec.power_budget_w if power else None,
                                       upper_w=rec.choice["power_hi_w"] if power and rec.choice else None)

    def _stage_gauge(self, rec: JobRecord) -> None:
        """When an active job last moved on (what the stalled-job alert reads): a new stage, a new detail (the
        profiling stage counts its modes there) or more minibatches. Queued and ended jobs have none."""
        if rec.state in TERMINAL or rec.state == "queued":
            self._moved.pop(rec.job_id, None)
            self.metrics.job_inactive(rec.job_id, ended=rec.state in TERMINAL)
            return
        now = (rec.state, rec.detail, rec.minibatches_done)
        if self._moved.get(rec.job_id) != now:
            self._moved[rec.job_id] = now
            self.metrics.job_moved(rec.job_id, rec.workload, rec.state, self.wall())

    def job_pb(self, rec: JobRecord) -> operator_pb2.Job:
        """A job as the operator API's Job: state, progress, ETA, mode, choice, last window, steps, segments."""
        goal = {"power": f"fastest under {rec.power_budget_w:g} W", "deadline": f"lowest power within "
                f"{rec.deadline_s:g} s", "energy": "least energy",
                "fleet": f"throughput under the lab cap, priority {rec.options.get('priority', 1.0):g}"
                + (f", deadline {rec.deadline_s:g} s" if rec.deadline_s else "")}[rec.goal]
        msg = operator_pb2.Job(
            job_id=rec.job_id, workload=rec.workload, target_device=rec.target_device, target_model=rec.target_model,
            goal=goal, power_budget_w=rec.power_budget_w, deadline_s=rec.deadline_s, min_energy=rec.goal == "energy",
            minibatches=rec.minibatches, state=rec.state, detail=rec.detail, device_id=rec.run.get("device_id", ""),
            model_id=rec.model_id, campaign_id=",".join(rec.campaign_ids), minibatches_done=rec.minibatches_done,
            elapsed_s=rec.elapsed_s, energy_j=rec.energy_j, eta_s=self._eta(rec), goal_kept=rec.goal_kept,
            created_s=rec.created_s, finished_s=rec.finished_s, confidence=float(rec.options.get("confidence", 0)),
            max_steps=int(rec.options.get("max_steps", 0)), window_s=float(rec.options.get("window_s", 0)),
            profile_modes=int(rec.options.get("profile_modes", 0)), strategy=str(rec.options.get("strategy", "")),
            fleet=rec.goal == "fleet", priority=float(rec.options.get("priority", 0.0)))
        if rec.mode:
            msg.mode.CopyFrom(mode_to_pb(PowerMode(*_knobs(rec.mode))))
        if rec.choice:
            ch = rec.choice
            msg.predicted_time_ms, msg.predicted_time_ms_hi = ch["time_ms"], ch["time_hi_ms"]
            msg.predicted_power_w, msg.predicted_power_w_hi = ch["power_w"], ch["power_hi_w"]
            msg.at_risk = bool(ch["at_risk"])
        if rec.observed:
            msg.observed_power_w, msg.observed_time_ms = rec.observed["power_w"], rec.observed["time_ms"]
        for s in rec.steps:
            msg.steps.append(operator_pb2.JobStep(**s))
        inf = stream_.job_inference_pb(rec.options, rec.choice, rec.run)
        if inf is not None:
            msg.inference.CopyFrom(inf)
        for seg in rec.segments:
            msg.segments.append(operator_pb2.JobSegment(**seg))
        return msg

    @staticmethod
    def _eta(rec: JobRecord) -> float:
        left = rec.minibatches - rec.minibatches_done
        if left <= 0:
            return 0.0
        if rec.observed and rec.state == "running":
            return left * rec.observed["time_ms"] / 1e3
        if rec.choice:
            return left * rec.choice["time_ms"] / 1e3
        return -1.0


def _knobs(mode: str) -> tuple[int, float, float, float]:
    c, f, g, m = mode.split("/")
    return int(c), float(f), float(g), float(m)


def _bounded(value: float, lo: float, hi: float, field: str) -> None:
    if not (lo <= value <= hi) or (isinstance(value, float) and not math.isfinite(value)):
        raise InvalidArgument(f"{field}={value:g} is out of range; allowed {lo:g}..{hi:g}", field=field)


def _length(req: operator_pb2.SubmitJobRequest) -> int:
    """The job's minibatches: --minibatches, or --epochs x --minibatches-per-epoch (exactly one of these)."""
    if req.minibatches and (req.epochs or req.minibatches_per_epoch):
        raise InvalidArgument("give the length as minibatches, or as epochs and minibatches per epoch, not both",
                              field="minibatches")
    n = req.minibatches or req.epochs * req.minibatches_per_epoch
    if not 1 <= n <= MAX_JOB_MINIBATCHES:
        raise InvalidArgument(f"the job's length must be 1..{MAX_JOB_MINIBATCHES} minibatches (--minibatches N, or "
                              "--epochs N --minibatches-per-epoch K); got " + str(n), field="minibatches")
    return int(n)
