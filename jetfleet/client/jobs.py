"""Training jobs under a goal: submit, list, show, cancel, wait."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable

from jetfleet.shared.catalog import PowerMode
from jetfleet.shared.convert import mode_from_pb
from jetfleet.shared.proto import operator_pb2

ACTIVE_JOB = ("queued", "profiling", "modelling", "applying", "running")


@dataclass(frozen=True)
class JobStep:
    """A closed-loop step: when (board clock, minibatch), from which mode to which, why, and the figures."""

    t_s: float
    at_minibatch: int
    from_mode: str
    to_mode: str
    kind: str                 # over (the budget), headroom, late (the deadline), slack
    reason: str
    observed_power_w: float
    predicted_power_w: float
    predicted_power_w_hi: float


@dataclass(frozen=True)
class JobSegment:
    """Time spent in one mode on one board: minibatches, board seconds, energy (J)."""

    mode: str
    device_id: str
    minibatches: int
    seconds: float
    energy_j: float


@dataclass(frozen=True)
class JobInference:
    """A job's inference stream (issue 15): what it serves, the chosen largest batch, what the board reported
    (requests since the job started; percentiles over the last window; the budget is on p95)."""

    workload: str
    arrival_rate: float
    trace: bool
    latency_budget_s: float
    batch_size: int
    choice: str
    predicted_p95_ms: float
    served: int
    late: int
    dropped: int
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    latency_kept: bool
    fastest_ms: float

    @classmethod
    def from_pb(cls, i: operator_pb2.JobInference) -> JobInference:
        """From the wire message (NaN percentiles: none served yet)."""
        def pct(x: float) -> float | None:
            return None if math.isnan(x) else x

        return cls(i.workload, i.arrival_rate, i.trace, i.latency_budget_s, i.batch_size, i.choice, i.predicted_p95_ms,
                   i.served, i.late, i.dropped, pct(i.p50_ms), pct(i.p95_ms), pct(i.p99_ms), i.latency_kept,
                   i.fastest_ms)

    def to_dict(self) -> dict[str, Any]:
        """As `--output json` prints it (milliseconds)."""
        r = lambda x: None if x is None else round(x, 2)  # noqa: E731
        return {"workload": self.workload, "arrival_rate": round(self.arrival_rate, 3), "trace": self.trace,
                "latency_budget_ms": round(self.latency_budget_s * 1e3, 3), "percentile": 95,
                "batch_size": self.batch_size, "choice": self.choice, "predicted_p95_ms": r(self.predicted_p95_ms),
                "served": self.served, "late": self.late, "dropped": self.dropped, "p50_ms": r(self.p50_ms),
                "p95_ms": r(self.p95_ms), "p99_ms": r(self.p99_ms), "latency_kept": self.latency_kept,
                "fastest_ms": r(self.fastest_ms)}


@dataclass(frozen=True)
class JobVerdict:
    """Whether a job that ended kept its goal: ``judged`` False for one that did not run to its end; the limit
    (``constraint``) and the promise (``objective``: the chosen mode's prediction) held against what it did."""

    judged: bool
    kept: bool
    constraint: str
    objective: str
    text: str


@dataclass(frozen=True)
class JobRun:
    """One training command of a job: its board, the job's minibatch it started at, what the board reported training
    for it, and how it ended ('' while it may run; done, stopped, cancelled)."""

    run_id: str
    device_id: str
    base_done: int
    trained: int
    elapsed_s: float
    energy_j: float
    ended: str


@dataclass(frozen=True)
class JobConfirm:
    """A mode measured on the job's board before it committed to its power budget's choice: what it drew against
    the model's upper bound for it, and whether that was over the budget."""

    mode: str
    device_id: str
    power_w: float
    time_ms: float
    predicted_power_w_hi: float
    over: bool
    seconds: float


@dataclass(frozen=True)
class Job:
    """A training job: goal, state (``detail`` says what it does or waits for), progress in minibatches and board
    seconds, the choice with its bounds, the last window observed, every step, time per mode, the summary."""

    job_id: str
    workload: str
    target_device: str
    board_model: str
    goal: str
    state: str                # queued, profiling, modelling, applying, running, done, failed, cancelled
    detail: str
    device_id: str | None
    mode: PowerMode | None    # the mode it runs in now
    minibatches: int
    minibatches_done: int
    elapsed_s: float
    energy_j: float
    eta_s: float | None
    power_budget_w: float | None
    deadline_s: float | None
    model_id: str | None
    campaigns: list[str]
    confidence: float
    predicted_time_ms: float
    predicted_time_ms_hi: float
    predicted_power_w: float
    predicted_power_w_hi: float
    at_risk: bool
    observed_power_w: float | None
    observed_time_ms: float | None
    steps: list[JobStep]
    segments: list[JobSegment]
    max_steps: int
    goal_kept: bool
    created_s: float
    finished_s: float | None
    fleet: bool = False       # queued for the lab under its cap (placed and paced by the fleet queue)
    priority: float = 0.0     # a fleet job's weight
    inference: JobInference | None = None
    waiting_for: str = ""     # what it waits for now ('' when it waits for nothing)
    verdict: JobVerdict | None = None   # once it ended: whether its goal was kept, judged on what it did
    runs: list[JobRun] = field(default_factory=list)   # its training commands, with what each board trained
    board_minibatches: int = 0   # what the boards trained for it (above its length when work was redone)
    history: list[tuple[str, str, float]] = field(default_factory=list)   # (state, why, epoch s) of each move
    covered: bool = True      # the first choice lies within its model's fitted knob levels
    choice_note: str = ""     # how the choice was made when it is marked or was confirmed by measuring
    confirms: list[JobConfirm] = field(default_factory=list)   # modes measured before committing (power budgets)
    template: str = ""        # the board agent's job template it launched ('' for other jobs)
    output_tail: list[str] = field(default_factory=list)   # the launched process's last lines of stdout+stderr
    seed: int = 0             # what picked its profiled modes and its stream's arrivals (`--seed` replays them)

    @classmethod
    def from_pb(cls, j: operator_pb2.Job) -> Job:
        """From the wire message."""
        observed = j.observed_time_ms > 0
        return cls(
            j.job_id, j.workload, j.target_device, j.target_model, j.goal, j.state, j.detail, j.device_id or None,
            mode_from_pb(j.mode) if j.HasField("mode") else None, j.minibatches, j.minibatches_done, j.elapsed_s,
            j.energy_j, None if j.eta_s < 0 else j.eta_s, j.power_budget_w or None, j.deadline_s or None,
            j.model_id or None, [c for c in j.campaign_id.split(",") if c], j.confidence, j.predicted_time_ms,
            j.predicted_time_ms_hi, j.predicted_power_w, j.predicted_power_w_hi, j.at_risk,
            j.observed_power_w if observed else None, j.observed_time_ms if observed else None,
            [JobStep(s.t_s, s.at_minibatch, s.from_mode, s.to_mode, s.kind, s.reason, s.observed_power_w,
                     s.predicted_power_w, s.predicted_power_w_hi) for s in j.steps],
            [JobSegment(s.mode, s.device_id, s.minibatches, s.seconds, s.energy_j) for s in j.segments],
            j.max_steps, j.goal_kept, j.created_s, j.finished_s or None, j.fleet, j.priority,
            JobInference.from_pb(j.inference) if j.HasField("inference") else None, j.waiting_for,
            JobVerdict(j.verdict.judged, j.verdict.kept, j.verdict.constraint, j.verdict.objective, j.verdict.text)
            if j.HasField("verdict") else None,
            [JobRun(r.run_id, r.device_id, r.base_done, r.trained, r.elapsed_s, r.energy_j, r.ended) for r in j.runs],
            j.board_minibatches, [(t.state, t.why, t.at_s) for t in j.history], j.covered, j.choice_note,
            [JobConfirm(c.mode, c.device_id, c.power_w, c.time_ms, c.predicted_power_w_hi, c.over, c.seconds)
             for c in j.confirms], j.template, list(j.output_tail), j.seed)

    @property
    def target(self) -> str:
        """The device, or the board model any of whose online boards may run it (a fleet job: the fleet)."""
        return self.target_device or ("the fleet" if self.fleet and not self.board_model else self.board_model)

    @property
    def progress(self) -> float:
        """Share of the minibatches done, 0..1."""
        return self.minibatches_done / self.minibatches if self.minibatches else 0.0

    @property
    def active(self) -> bool:
        """Not yet done, failed or cancelled."""
        return self.state in ACTIVE_JOB

    @property
    def mean_power_w(self) -> float | None:
        """Energy over board time so far."""
        return self.energy_j / self.elapsed_s if self.elapsed_s > 0 else None

    def to_dict(self) -> dict[str, Any]:
        """As `job submit/ls/show/cancel --output json` print it (board seconds; ETA None while unknown)."""
        mean_w = self.mean_power_w
        return {
            "job_id": self.job_id, "workload": self.workload, "target": self.target, "board_model": self.board_model,
            "goal": self.goal, "state": self.state, "detail": self.detail, "device_id": self.device_id,
            "mode": str(self.mode) if self.mode else None, "minibatches": self.minibatches,
            "minibatches_done": self.minibatches_done,
            "progress": round(self.progress, 4), "elapsed_s": round(self.elapsed_s, 1),
            "energy_j": round(self.energy_j, 1), "mean_power_w": round(mean_w, 3) if mean_w is not None else None,
            "eta_s": None if self.eta_s is None else round(self.eta_s, 1), "power_budget_w": self.power_budget_w,
            "deadline_s": self.deadline_s, "model_id": self.model_id, "campaigns": self.campaigns,
            "choice": {"confidence": self.confidence, "predicted_time_ms": round(self.predicted_time_ms, 3),
                       "predicted_time_ms_hi": round(self.predicted_time_ms_hi, 3),
                       "predicted_power_w": round(self.predicted_power_w, 3),
                       "predicted_power_w_hi": round(self.predicted_power_w_hi, 3), "at_risk": self.at_risk},
            "observed": ({"power_w": round(self.observed_power_w or 0.0, 3), "time_ms": round(self.observed_time_ms, 3)}
                         if self.observed_time_ms else None),
            "steps": [{"t_s": s.t_s, "at_minibatch": s.at_minibatch, "from": s.from_mode, "to": s.to_mode,
                       "kind": s.kind, "reason": s.reason, "observed_power_w": round(s.observed_power_w, 3),
                       "predicted_power_w": round(s.predicted_power_w, 3),
                       "predicted_power_w_hi": round(s.predicted_power_w_hi, 3)} for s in self.steps],
            "segments": [{"mode": s.mode, "device_id": s.device_id, "minibatches": s.minibatches,
                          "seconds": round(s.seconds, 1), "energy_j": round(s.energy_j, 1)} for s in self.segments],
            "max_steps": self.max_steps, "goal_kept": self.goal_kept, "created_s": self.created_s,
            "fleet": self.fleet, "priority": self.priority,
            "finished_s": self.finished_s, "inference": self.inference.to_dict() if self.inference else None,
            "waiting_for": self.waiting_for, "covered": self.covered,
            "verdict": None if self.verdict is None else {
                "judged": self.verdict.judged, "kept": self.verdict.kept, "constraint": self.verdict.constraint,
                "objective": self.verdict.objective, "text": self.verdict.text},
            "runs": [{"run_id": r.run_id, "device_id": r.device_id, "from_minibatch": r.base_done,
                      "trained": r.trained, "seconds": round(r.elapsed_s, 1), "energy_j": round(r.energy_j, 1),
                      "ended": r.ended} for r in self.runs],
            "board_minibatches": self.board_minibatches, "choice_note": self.choice_note,
            "confirms": [{"mode": c.mode, "device_id": c.device_id, "power_w": round(c.power_w, 3),
                          "time_ms": round(c.time_ms, 3), "predicted_power_w_hi": round(c.predicted_power_w_hi, 3),
                          "over": c.over, "seconds": round(c.seconds, 1)} for c in self.confirms],
            "history": [{"state": st, "why": why, "at_s": at} for st, why, at in self.history],
            "template": self.template, "output_tail": list(self.output_tail), "seed": self.seed}


class JobMethods:
    """Jobs: ``submit_job``, ``list_jobs``, ``get_job``, ``cancel_job``, ``wait_job``."""

    _unary: Any

    def submit_job(self, workload: str, *, device_id: str = "", board_model: str = "", power_budget_w: float = 0.0,
                   deadline_s: float = 0.0, min_energy: bool = False, minibatches: int = 0, epochs: int = 0,
                   minibatches_per_epoch: int = 0, profile_modes: int = 0, strategy: str = "", confidence: float = 0.0,
                   max_steps: int = 0, window_s: float = 0.0, request_id: str = "", inference_workload: str = "",
                   arrival_rate: float = 0.0, arrival_times_s: Sequence[float] = (), latency_budget_s: float = 0.0,
                   inference_batch_size: int = 0, fleet: bool = False,
                   priority: float = 0.0, attach: bool = False, attach_timeout_s: float = 0.0,
                   confirm_profiles: int = 0, no_confirm: bool = False, template: str = "",
                   template_args: Mapping[str, str] | None = None, seed: int | None = None) -> Job:
        """Submit a training job of ``workload`` on a board or any online board of a model, under exactly one goal
        (a power budget in W, a deadline in board seconds, or least energy); its length in ``minibatches`` or
        ``epochs`` x ``minibatches_per_epoch``. Zeros take the controller's defaults (50 profiled modes, balanced
        strategy, confidence 0.9, 3 steps, a 10 s window). A retry with the same ``request_id`` returns the job.
        ``fleet``: no target and no goal: the job waits in the fleet queue under the lab-wide cap, which places it
        and paces it with the others (``priority`` weighs it, 0 = 1; ``deadline_s`` then orders the queue).
        Serving inference beside it (needs a power budget): ``inference_workload`` at ``arrival_rate`` requests/s (or
        the trace ``arrival_times_s``) within ``latency_budget_s`` on p95, batches of up to ``inference_batch_size``
        (0: the controller chooses). ``attach``: adopt the operator's own training process on ``device_id``, whose
        session (``jetfleet.session``) is named ``workload``; it must join and keep stepping within
        ``attach_timeout_s`` (0: 60 s). A power budget's choice is measured on the board before the job commits to it
        (at most ``confirm_profiles`` modes, 0 = 3, an attached job's on its own steps and as many as fit in a
        quarter of them; ``no_confirm`` commits to the model's choice unmeasured). ``template``: the agent of
        ``device_id`` launches that job template of its configuration (``template_args``: its --arg values) and the
        job adopts the process as ``attach`` does; ``workload`` is then the template's name. ``seed`` picks the
        profiled modes and the stream's arrivals (None: the job's creation time; a job's ``seed`` replays them)."""
        req = operator_pb2.SubmitJobRequest(
            workload=workload, device_id=device_id, board_model=board_model, power_budget_w=power_budget_w,
            deadline_s=deadline_s, min_energy=min_energy, minibatches=minibatches, epochs=epochs,
            minibatches_per_epoch=minibatches_per_epoch, profile_modes=profile_modes, strategy=strategy,
            confidence=confidence, max_steps=max_steps, window_s=window_s, request_id=request_id,
            inference_workload=inference_workload, arrival_rate=arrival_rate, arrival_times_s=list(arrival_times_s),
            latency_budget_s=latency_budget_s, inference_batch_size=inference_batch_size, fleet=fleet,
            priority=priority, attach=attach, attach_timeout_s=attach_timeout_s, confirm_profiles=confirm_profiles,
            no_confirm=no_confirm, template=template, template_args=dict(template_args or {}), seed=seed)
        return Job.from_pb(self._unary("SubmitJob", req, 120))

    def list_jobs(self) -> list[Job]:
        """Every job with its state and progress."""
        return [Job.from_pb(j) for j in self._unary("ListJobs", operator_pb2.ListJobsRequest()).jobs]

    def get_job(self, job_id: str) -> Job:
        """One job; NotFound if unknown."""
        return Job.from_pb(self._unary("GetJob", operator_pb2.GetJobRequest(job_id=job_id)))

    def cancel_job(self, job_id: str) -> Job:
        """Cancel a queued or running job (its training stops after the current minibatch)."""
        return Job.from_pb(self._unary("CancelJob", operator_pb2.CancelJobRequest(job_id=job_id)))

    def wait_job(self, job_id: str, *, on_update: Callable[[Job], None] | None = None, poll_s: float = 0.5,
                 sleep: Callable[[float], None] = time.sleep) -> Job:
        """Poll a job until it is done, failed or cancelled; ``on_update`` sees every state polled. Interrupting the
        wait (Ctrl-C) leaves the job running on the controller."""
        job = self.get_job(job_id)
        while True:
            if on_update is not None:
                on_update(job)
            if not job.active:
                return job
            sleep(poll_s)
            job = self.get_job(job_id)
