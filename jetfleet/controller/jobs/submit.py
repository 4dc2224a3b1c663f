"""A job request checked before anything is stored: every bad input refused naming its field and what is allowed,
and a goal no mode can meet refused with the mode closest to it. Turns the operator API's request into the typed
record the job runs on."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from jetfleet.controller.campaigns import CampaignManager
from jetfleet.controller.commands import CommandRouter
from jetfleet.controller.jobs import inference as stream_
from jetfleet.controller.jobs import online
from jetfleet.controller.jobs.context import JobsConfig
from jetfleet.controller.jobs.goals import Deadline, Goal, LeastEnergy, PowerBudget
from jetfleet.controller.jobs.launch import check_template
from jetfleet.controller.jobs.models import JOB_STRATEGIES
from jetfleet.controller.powertrain.cache import PredictionCache
from jetfleet.controller.powertrain.confirm import DEFAULT_PROFILES, MAX_PROFILES
from jetfleet.controller.powertrain.optimize import check_goal
from jetfleet.controller.powertrain.service import ModelService
from jetfleet.controller.registry import Registry
from jetfleet.controller.store import JobRecord
from jetfleet.controller.store.job_record import JobOptions
from jetfleet.shared import defaults
from jetfleet.shared.bounds import check_id
from jetfleet.shared.errors import FailedPrecondition, InvalidArgument
from jetfleet.shared.proto import operator_pb2

if TYPE_CHECKING:
    from jetfleet.controller.fleet.queue import FleetQueue

MAX_JOB_MINIBATCHES = 100_000_000


class JobChecks:
    """Checks job requests against the boards, the models and the goal (module docstring)."""

    def __init__(self, registry: Registry, router: CommandRouter, campaigns: CampaignManager, models: ModelService,
                 cache: PredictionCache, config: JobsConfig, fleet: FleetQueue | None,
                 wall: Callable[[], float] = time.time) -> None:
        self.registry, self.router, self.campaigns, self.models = registry, router, campaigns, models
        self.cache, self.config, self.fleet, self.wall = cache, config, fleet, wall
        self.inference_latency: dict[tuple[str, str], dict[int, float]] = {}   # (model, workload) at MAXN, measured

    async def check(self, req: operator_pb2.SubmitJobRequest) -> JobRecord:
        """The record of a request that can run; InvalidArgument, NotFound or FailedPrecondition otherwise."""
        if req.fleet:
            if stream_.has_stream(req):
                raise InvalidArgument("a fleet job cannot serve inference (the queue places boards by training "
                                      "alone): submit it to a device or board model with a power budget",
                                      field="inference_workload")
            return await self._fleet(req)
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
        if req.template:   # the agent of device_id launches one of its templates; the job adopts it as --attach
            check_template(req, self.registry)
        elif req.template_args:
            raise InvalidArgument("--arg is for a template job (--template NAME)", field="template_args")
        attach = req.attach or bool(req.template)
        if attach:   # the workload names the operator's own training session, not a registered workload
            check_attach(req)
        else:
            self.registry.check_workload(req.workload, device_id=req.device_id, board_model=model)
        minibatches = length(req)
        check_goal(req.power_budget_w or None, req.deadline_s or None, req.min_energy, 1)
        c = self.config
        opts = JobOptions(profile_modes=req.profile_modes or c.profile_modes, strategy=req.strategy or c.strategy,
                          confidence=req.confidence or c.confidence, max_steps=req.max_steps or c.max_steps,
                          window_s=req.window_s or c.window_s, epochs=req.epochs,
                          minibatches_per_epoch=req.minibatches_per_epoch, request_id=req.request_id,
                          attach=attach, attach_timeout_s=req.attach_timeout_s, template=req.template,
                          template_args=dict(req.template_args), seed=given_seed(req))
        bounded(opts.profile_modes, 10, 1000, "profile_modes")
        bounded(opts.confidence, 0.5, 0.99, "confidence")
        bounded(opts.max_steps, 0, 10, "max_steps")
        bounded(opts.window_s, 1.0, 3600.0, "window_s")
        if opts.strategy not in JOB_STRATEGIES:
            raise InvalidArgument(f"strategy {opts.strategy!r}: expected one of {', '.join(JOB_STRATEGIES)}",
                                  field="strategy")
        kind = "power" if req.power_budget_w else "deadline" if req.deadline_s else "energy"
        goal: Goal = (PowerBudget(req.power_budget_w) if kind == "power" else
                      Deadline(req.deadline_s, minibatches) if kind == "deadline" else LeastEnergy())
        stream = stream_.check_stream(req) if stream_.has_stream(req) else None
        opts.confirm_profiles = confirm_profiles(req, kind, stream is not None)
        await asyncio.to_thread(self._feasible, model, req.workload, goal, minibatches, opts, req.profile_modes,
                                req.confirm_profiles)
        if stream is not None:   # the last check: it measures on a board unless this model's latencies are known
            fastest = await stream_.check_against_board(self.registry, self.router, stream, req.device_id, model,
                                                         self.inference_latency)
            stream.fastest_ms = fastest * 1e3
            opts.inference = stream
        return JobRecord(req.request_id or uuid.uuid4().hex[:12], req.workload, req.device_id, model, kind,
                         req.power_budget_w, req.deadline_s, minibatches, self.wall(), opts)

    async def _fleet(self, req: operator_pb2.SubmitJobRequest) -> JobRecord:
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
        if req.confirm_profiles or req.no_confirm:
            raise InvalidArgument("a fleet job's modes are the queue's joint choice: no confirm_profiles or no_confirm",
                                  field="confirm_profiles" if req.confirm_profiles else "no_confirm")
        check_id(req.workload, "workload")
        minibatches = length(req)
        priority = req.priority or 1.0
        bounded(priority, 0.01, 100.0, "priority")
        if req.deadline_s and not (math.isfinite(req.deadline_s) and req.deadline_s > 0):
            raise InvalidArgument("deadline_s must be a positive number of seconds", field="deadline_s")
        c = self.config
        confidence = req.confidence or c.confidence
        bounded(confidence, 0.5, 0.99, "confidence")
        self.fleet.lab_cap()
        await asyncio.to_thread(self.fleet.candidates, req.workload, confidence)
        opts = JobOptions(confidence=confidence, max_steps=0, window_s=req.window_s or c.window_s, priority=priority,
                          request_id=req.request_id, epochs=req.epochs, minibatches_per_epoch=req.minibatches_per_epoch,
                          seed=given_seed(req))
        bounded(opts.window_s, 1.0, 3600.0, "window_s")
        return JobRecord(req.request_id or uuid.uuid4().hex[:12], req.workload, "", "", "fleet", 0.0,
                         req.deadline_s, minibatches, self.wall(), opts)

    def _feasible(self, model: str, workload: str, goal: Goal, minibatches: int, opts: JobOptions,
                  asked_modes: int, asked_confirms: int = 0) -> None:
        """With a model already there, refuse a goal no mode can meet now; without one, refuse unless there are
        enough modes to profile; size an attached job's online profiling and confirmation to its length, and a
        built-in workload's profiling with no reference to transfer from (a lab's first job: it fits from scratch)
        to ``SCRATCH_FACTOR`` times the default k unless k was given (blocking: it may predict a catalog)."""
        repo = self.models.repo
        doc = repo.find(model, workload)
        catalog = self.campaigns.catalog_for("", model)
        if opts.attach and doc is None:   # its modes are profiled on its own steps: sized to the job
            p = online.plan(minibatches, asked_modes, opts.profile_modes)
            opts.profile_modes, opts.profile_steps = p.modes, p.timed_steps
        if opts.attach and opts.confirm_profiles:   # its choice is measured on its own steps: sized to the job
            opts.confirm_profiles = online.confirm_fit(minibatches, opts.profile_steps or defaults.MINIBATCHES,
                                                       asked_confirms, DEFAULT_PROFILES)
        if doc is None:
            if not opts.attach and not asked_modes and repo.reference_for(model, workload) is None:
                opts.profile_modes = min(catalog.size, SCRATCH_FACTOR * opts.profile_modes)
            if opts.profile_modes > catalog.size:
                raise InvalidArgument(f"profile_modes={opts.profile_modes}: {model} has {catalog.size} modes",
                                      field="profile_modes")
            return
        goal.choose(self.cache.get(doc, catalog, opts.confidence), minibatches)


SCRATCH_FACTOR = 2      # a fit from scratch (no reference) profiles this many times the default k

MAX_SEED = 2**63 - 1   # a signed 64-bit integer wherever the record is read (SQLite, Redis, JSON)


def given_seed(req: operator_pb2.SubmitJobRequest) -> int | None:
    """The seed the request gives (None: none, the job's creation time), checked to fit a signed 64-bit integer."""
    if not req.HasField("seed"):
        return None
    if req.seed > MAX_SEED:
        raise InvalidArgument(f"seed {req.seed}: expected 0..{MAX_SEED}", field="seed")
    return req.seed


def confirm_profiles(req: operator_pb2.SubmitJobRequest, kind: str, stream: bool) -> int:
    """How many modes a job measures on its board before committing (``jobs/confirming.py``): a power budget's
    choice is confirmed (default 3 profiles; an attached job's on its own steps, sized to its length when its
    model is known: ``_feasible``) unless ``no_confirm``; other goals and a job serving an inference stream (its
    budget holds both; the profiles measure training alone) commit to the model's choice."""
    if req.no_confirm and req.confirm_profiles:
        raise InvalidArgument("give confirm_profiles or no_confirm, not both", field="confirm_profiles")
    if req.confirm_profiles and kind != "power":
        raise InvalidArgument("confirm_profiles is for a power budget's choice (--power-budget)",
                              field="confirm_profiles")
    if req.confirm_profiles and stream:
        raise InvalidArgument("confirm_profiles measures training alone: not with an inference stream",
                              field="confirm_profiles")
    bounded(req.confirm_profiles, 0, MAX_PROFILES, "confirm_profiles")
    if kind != "power" or stream or req.no_confirm:
        return 0
    return int(req.confirm_profiles or DEFAULT_PROFILES)


def check_attach(req: operator_pb2.SubmitJobRequest) -> None:
    """An attached job: one board, no inference stream, a timeout in range."""
    if not req.device_id:
        raise InvalidArgument("an attached job adopts a training process on one board: give --device",
                              field="device_id")
    if stream_.has_stream(req):
        raise InvalidArgument("an attached job cannot serve inference beside the operator's training",
                              field="inference_workload")
    bounded(req.attach_timeout_s, 0.0, 86400.0, "attach_timeout_s")


def bounded(value: float, lo: float, hi: float, field: str) -> None:
    """InvalidArgument naming ``field`` unless ``lo <= value <= hi``."""
    if not (lo <= value <= hi) or (isinstance(value, float) and not math.isfinite(value)):
        raise InvalidArgument(f"{field}={value:g} is out of range; allowed {lo:g}..{hi:g}", field=field)


def length(req: operator_pb2.SubmitJobRequest) -> int:
    """The job's minibatches: --minibatches, or --epochs x --minibatches-per-epoch (exactly one of these)."""
    if req.minibatches and (req.epochs or req.minibatches_per_epoch):
        raise InvalidArgument("give the length as minibatches, or as epochs and minibatches per epoch, not both",
                              field="minibatches")
    n = req.minibatches or req.epochs * req.minibatches_per_epoch
    if not 1 <= n <= MAX_JOB_MINIBATCHES:
        raise InvalidArgument(f"the job's length must be 1..{MAX_JOB_MINIBATCHES} minibatches (--minibatches N, or "
                              "--epochs N --minibatches-per-epoch K); got " + str(n), field="minibatches")
    return int(n)
