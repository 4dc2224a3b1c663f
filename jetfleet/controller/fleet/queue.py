"""The controller's side of the fleet queue: jobs submitted with ``--fleet`` wait in one ``FleetScheduler``
over the lab's online boards under the lab-wide cap and every rack's cap (the boards labelled rack=GROUP); its
decisions go to the jobs' runners (a start names the board and mode; a new mode is a step of the running
training), and the aggregate loop runs on the boards' telemetry every ``period_s`` wall seconds. The scheduler
is the same code ``jetfleet eval fleet`` measures.

Boards held by other work (a job with its own goal, a campaign) are not placed on; what they draw counts
against the cap like an idle board's draw. A fleet job stays on the board it was placed on (it waits for that
board if it goes away)."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

from jetfleet.controller.fleet.caps import GROUP_LABEL, FleetCaps
from jetfleet.controller.fleet.scheduler import Board, Candidates, Change, FleetJob, FleetScheduler
from jetfleet.controller.leases import BoardLeases
from jetfleet.controller.powertrain.artifacts import ModelRepo
from jetfleet.controller.powertrain.cache import PredictionCache
from jetfleet.controller.registry import Registry
from jetfleet.controller.store import JobRecord
from jetfleet.shared.catalog import Catalog
from jetfleet.shared.errors import FailedPrecondition, InvalidArgument
from jetfleet.shared.workloads import WORKLOADS

log = logging.getLogger(__name__)
# What a fleet job is told when the queue decides: (board, board model, mode and its predictions, kind, reason)
Decision = Callable[[str, str, dict[str, Any], str, str], Awaitable[None]]


class FleetQueue:
    """The fleet jobs of the lab (this module's docstring)."""

    def __init__(self, registry: Registry, caps: FleetCaps, leases: BoardLeases, repo: ModelRepo,
                 catalog_for: Callable[[str, str], Catalog], cache: PredictionCache, *, period_s: float = 2.0) -> None:
        self.registry, self.caps, self.leases, self.period_s = registry, caps, leases, period_s
        self.repo, self.catalog_for, self.cache = repo, catalog_for, cache
        self._deciders: dict[str, Decision] = {}   # fleet job -> where its decisions go (its runner)
        self._scheduled_in: tuple[object, ...] = ()   # the situation of the last placing (see _situation)
        self.sched = FleetScheduler([], math.inf)
        self.fleet_jobs: dict[str, FleetJob] = {}
        self.models: dict[str, str] = {}          # job -> board model -> chosen at placement
        self.lock = asyncio.Lock()
        self._seen_t: dict[str, float] = {}       # board -> newest sample time the loop has used
        self.rows: dict[str, dict[str, Any]] = {}   # board -> its fleet job's plan row (a snapshot for other threads)

    # --- inputs ----------------------------------------------------------------------------------------
    def lab_cap(self) -> float:
        """The lab-wide cap (W); FailedPrecondition when there is none."""
        for group, cap in self.caps.caps():
            if not group:
                return cap
        raise FailedPrecondition("fleet jobs run under the lab-wide cap and there is none: set one with "
                                 "`jetfleet fleet cap set WATTS`", field="fleet")

    def candidates(self, workload: str, confidence: float) -> dict[str, Candidates]:
        """Per board model of an online board offering the workload: the candidates of its calibrated model.
        InvalidArgument naming what is missing when no board model can run it. Blocking (predicts)."""
        models: dict[str, Any] = {}
        offered = set()
        for d in self.registry.list():
            if d.online and (workload in WORKLOADS or workload in d.workloads):
                offered.add(d.record.model)
                models.setdefault(d.record.model, d)
        if not offered:
            raise InvalidArgument(f"no online board can run {workload!r}: none offers it", field="workload")
        out: dict[str, Candidates] = {}
        for model in sorted(offered):
            doc = self.repo.find(model, workload)
            if doc is None:
                continue
            catalog = self.catalog_for("", model)
            pred = self.cache.get(doc, catalog, confidence)
            out[model] = Candidates.from_predictions(pred, str(catalog.maxn))
        if not out:
            raise InvalidArgument(f"no board model can run {workload!r} under the cap: none of "
                                  f"{', '.join(sorted(offered))} has a calibrated model of it (run a job with "
                                  "--board-model first, or `jetfleet model transfer`)", field="workload")
        return out

    def _boards(self) -> list[Board]:
        out = []
        fleet_ids = set(self.fleet_jobs)
        for d in self.registry.list():
            if not d.online:
                continue
            dev = d.record.device_id
            holder = self.leases.holder(dev)
            last_w = self.caps.telemetry.last_w(dev)
            group = self.caps.labels(dev).get(GROUP_LABEL, "")
            if holder is not None and not (holder.kind == "job" and holder.id in fleet_ids):
                # other work: its draw counts, it is not placed on
                out.append(Board(dev, d.record.model, last_w if last_w is not None else 0.0, available=False,
                                 group=group))
            else:
                out.append(Board(dev, d.record.model, self.caps.idle_w(dev), group=group))
        return out

    def _sync(self) -> None:
        self.caps.refresh()
        self.sched.boards = self._boards()
        try:
            self.sched.cap_w = self.lab_cap()
        except FailedPrecondition:
            self.sched.cap_w = math.inf
        self.sched.group_caps_w = {group: cap for group, cap in self.caps.caps() if group}

    # --- jobs --------------------------------------------------------------------------------------------
    async def add(self, rec: JobRecord, decide: Decision) -> bool:
        """Queue a fleet job, or (after a restart) put a placed one back on its board and mode unless another fleet
        job was placed there meanwhile; its decisions go to ``decide``. True when it is back on its board."""
        known = self.fleet_jobs.get(rec.job_id)
        if known is not None and (known in self.sched.queue or known in self.sched.running.values()):
            self._deciders[rec.job_id] = decide   # added already (a retried add): its decisions come as made
            return known in self.sched.running.values()
        cands = await asyncio.to_thread(self.candidates, rec.workload, rec.options.confidence)
        job = FleetJob(rec.job_id, rec.workload, rec.minibatches, cands, rec.options.priority or 1.0,
                       rec.deadline_s or math.inf, rec.created_s)
        async with self.lock:
            self._sync()
            device = rec.device_id
            back = bool(device) and device not in self.sched.running and rec.target_model in cands \
                and rec.mode in cands[rec.target_model].modes
            if back:
                job.board, job.model, job.option = device, rec.target_model, cands[rec.target_model].modes.index(rec.mode)
                self.sched.running[device] = job
                self.models[rec.job_id] = rec.target_model
            else:
                self.sched.submit(job)   # InvalidArgument (nothing registered) when no board here can run it
            self.fleet_jobs[rec.job_id] = job
            self._deciders[rec.job_id] = decide
            await self._apply(self._schedule())
            return back

    def _schedule(self) -> list[Change]:
        self._sync()
        if not math.isfinite(self.sched.cap_w):
            return []
        changes = self.sched.schedule()
        self._scheduled_in = self._situation()
        return changes

    async def finish(self, job_id: str) -> None:
        """A fleet job ended: its board is free, the others re-chosen."""
        async with self.lock:
            self._deciders.pop(job_id, None)
            if self.fleet_jobs.pop(job_id, None) is None:
                return
            self.models.pop(job_id, None)
            self.sched.release(job_id)   # (not `finish`: its own joint choice's changes would be lost here)
            await self._apply(self._schedule())

    async def reschedule(self) -> None:
        """A cap or the boards changed: re-choose the running jobs and start what fits."""
        async with self.lock:
            await self._apply(self._schedule())

    async def _apply(self, changes: list[Change]) -> None:
        self.rows = {str(r["board"]): r for r in self.sched.plan() if r["state"] == "running"}
        for c in changes:
            decide = self._deciders.get(c.job_id)
            job = self.fleet_jobs.get(c.job_id)
            if decide is None or job is None:
                continue
            model = job.model
            self.models[c.job_id] = model
            cand = job.candidates[model]
            k = cand.modes.index(c.mode)
            info = {"mode": c.mode, "time_ms": float(cand.time_ms[k]), "power_w": float(cand.power_w[k]),
                    "power_hi_w": float(self.sched.power_of(job, model)[k])}
            log.info("fleet: %s %s on %s in %s (%s)", c.kind, c.job_id, c.board, c.mode, c.reason)
            try:
                await decide(c.board, model, info, c.kind, c.reason)
            except Exception:   # one job's trouble with its decision is its own: the others still get theirs
                log.exception("fleet: job %s could not take its decision (%s on %s)", c.job_id, c.kind, c.board)

    # --- the aggregate loop ----------------------------------------------------------------------------------
    def measured(self) -> dict[str, float]:
        """Each online board's mean power over its samples since the last call; a board running a fleet job only
        over the samples taken in the mode the queue set (a step takes a batch of telemetry to show, and a stale
        window would step again). A board without such samples is left out (the scheduler counts its prediction)."""
        out: dict[str, float] = {}
        for b in self.sched.boards:
            window = self.caps.telemetry.window(b.board_id)
            since = self._seen_t.get(b.board_id, -math.inf)
            new = [s for s in window if s.t_s > since]
            job = self.sched.running.get(b.board_id)
            if job is not None:
                want = _knobs(job.candidates[job.model].modes[job.option])
                new = [s for s in new if _knobs_of(s) == want]
            if new:
                self._seen_t[b.board_id] = max(s.t_s for s in new)
                out[b.board_id] = sum(s.total_w for s in new) / len(new)
        return out

    async def tick(self) -> None:
        """One window of the aggregate loop: observe, and step the running fleet jobs down or up."""
        async with self.lock:
            if not self.sched.running and not self.sched.queue:
                # nothing to schedule: only the caps' gauges need a fresh look at the boards, and only if a cap is set
                self.rows = {}
                if self.caps.caps():
                    self.caps.refresh()
                return
            self._sync()
            if not math.isfinite(self.sched.cap_w):
                self.rows = {}
                return
            if self.sched.queue and self._placeable() and self._situation() != self._scheduled_in:
                # a board came free or online, a cap moved, a job came or went: place what fits now
                await self._apply(self._schedule())
            elif self.sched.running:
                await self._apply(self.sched.observe(self.measured()))
            else:
                self.rows = {}

    def _situation(self) -> tuple[object, ...]:
        """What placing depends on: the free boards, the caps (the lab's and the racks'), the queued and the running
        jobs."""
        free = frozenset(b.board_id for b in self.sched.boards if b.available and b.board_id not in self.sched.running)
        return (free, self.sched.cap_w, tuple(sorted(self.sched.group_caps_w.items())),
                frozenset(j.job_id for j in self.sched.queue), frozenset(self.sched.running))

    def _placeable(self) -> bool:
        """Whether an online board that is not in use could take a queued job (its model is one of the job's)."""
        free = {b.model for b in self.sched.boards if b.available and b.board_id not in self.sched.running}
        return any(free & set(j.candidates) for j in self.sched.queue)

    async def run(self, stop: asyncio.Event) -> None:
        """The aggregate loop every ``period_s`` until ``stop``."""
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), self.period_s)
            except asyncio.TimeoutError:
                pass
            if stop.is_set():
                return
            try:
                await self.tick()
            except Exception:
                log.exception("fleet loop")



def _knobs(mode: str) -> tuple[int, float, float, float]:
    cores, cpu, gpu, mem = mode.split("/")
    return int(cores), round(float(cpu)), round(float(gpu)), round(float(mem))


def _knobs_of(s: Any) -> tuple[int, float, float, float]:
    return int(s.cores_online), round(s.cpu_mhz), round(s.gpu_mhz), round(s.mem_mhz)
