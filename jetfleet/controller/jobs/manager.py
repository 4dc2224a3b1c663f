"""Training jobs under a goal: submit (every bad input refused before anything is stored, ``submit.py``), list,
show, cancel; one runner task per unfinished job (``runner.py``), started again from the store after a controller
restart. The operator API's servicer calls this; it does not import gRPC, and the API's messages are made in
``serde.py``."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from jetfleet.controller.campaigns import CampaignManager
from jetfleet.controller.commands import CommandRouter
from jetfleet.controller.jobs.context import JobContext, JobsConfig
from jetfleet.controller.jobs.goals import goal_of
from jetfleet.controller.jobs.launch import supersede_launch
from jetfleet.controller.jobs.runner import JobRunner
from jetfleet.controller.jobs.serde import job_pb
from jetfleet.controller.jobs.state import STATES, TERMINAL
from jetfleet.controller.jobs.submit import JobChecks
from jetfleet.controller.leases import BoardLeases
from jetfleet.controller.metrics import ControllerMetrics
from jetfleet.controller.powertrain.cache import PredictionCache
from jetfleet.controller.powertrain.service import ModelService
from jetfleet.controller.registry import Registry
from jetfleet.controller.retry import StoreRetry
from jetfleet.controller.store import JobRecord
from jetfleet.shared.bounds import check_id
from jetfleet.shared.errors import FailedPrecondition, NotFound
from jetfleet.shared.proto import operator_pb2

if TYPE_CHECKING:
    from jetfleet.controller.fleet.queue import FleetQueue

log = logging.getLogger(__name__)


class JobManager:
    """Submits, lists, shows and cancels jobs; runs one ``JobRunner`` task per unfinished job."""

    def __init__(self, registry: Registry, router: CommandRouter, campaigns: CampaignManager, models: ModelService,
                 metrics: ControllerMetrics, leases: BoardLeases, cache: PredictionCache, *,
                 fleet: FleetQueue | None = None, config: JobsConfig | None = None, retry: StoreRetry | None = None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        config = config or JobsConfig()
        self.registry, self.metrics, self.config, self.wall = registry, metrics, config, wall
        self.store = registry.store
        self.ctx = JobContext(self.store, registry, router, campaigns, models, cache, leases,
                              retry or StoreRetry(on_retry=metrics.store_retries.inc), metrics, config, fleet, clock, wall,
                              self._changed)
        self.checks = JobChecks(registry, router, campaigns, models, cache, config, fleet, wall)
        self._moved: dict[str, tuple[str, str, int]] = {}   # active jobs: (stage, detail, minibatches) last seen
        self._power_device: dict[str, str] = {}             # jobs: the board their power series name
        self._counted: dict[str, str] = {}   # every job's state when the jobs-by-state gauge was last counted
        self.runners: dict[str, JobRunner] = {}
        self.records: dict[str, JobRecord] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}

    # --- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        """Load every stored job and drive the unfinished ones again (after a controller restart). A training command
        that is not its job's current one any more (or belongs to an ended job), and the launch of a template job that
        ended undone, are superseded: the board is told to stop them as soon as it is seen running them."""
        for rec in await self.ctx.retry.run(self.store.list_jobs, what="loading jobs"):
            self.records[rec.job_id] = rec
            for run in rec.runs:
                if run.ended != "done" and (rec.state in TERMINAL or run.run_id != rec.run_id):
                    self.ctx.router.supersede(run.device_id, run.run_id)
            if rec.options.template and rec.state in TERMINAL and rec.state != "done":
                supersede_launch(self.ctx.router, rec)   # its process is stopped if its board still runs it
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
        runner = self.runners[rec.job_id] = JobRunner(self.ctx, rec)
        task = self._tasks[rec.job_id] = asyncio.create_task(runner.run())
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        for job, t in list(self._tasks.items()):
            if t is task:
                del self._tasks[job]

    # --- the operator API -------------------------------------------------------------------------------
    async def submit(self, req: operator_pb2.SubmitJobRequest) -> operator_pb2.Job:
        """Check a job request, refuse what cannot work, store the job and start it; a repeated request id
        returns the job it created."""
        if req.request_id:
            check_id(req.request_id, "request_id")
            existing = await asyncio.to_thread(self.store.get_job, req.request_id)
            if existing is not None:
                return self.job_pb(self.records.get(existing.job_id, existing))
        rec = await self.checks.check(req)
        if not await asyncio.to_thread(self.store.create_job, rec):
            stored = await asyncio.to_thread(self.store.get_job, rec.job_id)
            assert stored is not None
            return self.job_pb(self.records.get(rec.job_id, stored))
        self.records[rec.job_id] = rec
        self._spawn(rec)
        log.info("job %s: %s on %s, %s, %d minibatches", rec.job_id, rec.workload, rec.target_device or rec.target_model,
                 goal_of(rec).describe(), rec.minibatches)
        self.update_gauges(rec)
        return self.job_pb(rec)

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

    @staticmethod
    def job_pb(rec: JobRecord) -> operator_pb2.Job:
        """A job as the operator API's Job."""
        return job_pb(rec, goal_of(rec))

    def active(self) -> Sequence[JobRecord]:
        """The jobs that have not ended, oldest first (the fleet plan shows where they run)."""
        return sorted((r for r in self.records.values() if r.state not in TERMINAL), key=lambda r: r.created_s)

    # --- reporting ------------------------------------------------------------------------------------
    def _changed(self, rec: JobRecord) -> None:
        self.update_gauges(rec)

    def update_gauges(self, rec: JobRecord | None = None) -> None:
        """Jobs by state; and a job's progress and power against its budget.

        Called with every progress report of a running job: the jobs are counted by state again only when a job
        is new or its state moved (every move goes through here), so a report costs O(1), not O(jobs)."""
        if rec is None or self._counted.get(rec.job_id) != rec.state or len(self._counted) != len(self.records):
            self._counted = {r.job_id: r.state for r in self.records.values()}
            counts = dict.fromkeys(STATES, 0)
            for state in self._counted.values():
                counts[state] = counts.get(state, 0) + 1
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
        device = rec.device_id
        if self._power_device.get(rec.job_id, device) != device:   # moved to another board: the old one's go
            self.metrics.drop_job_power(rec.job_id)
        self._power_device[rec.job_id] = device
        if device:
            power = rec.goal == "power"
            self.metrics.job_power_now(rec.job_id, device,
                                       observed_w=rec.observed.power_w if rec.observed is not None else None,
                                       budget_w=rec.power_budget_w if power else None,
                                       upper_w=rec.choice.power_hi_w if power and rec.choice is not None else None)

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
