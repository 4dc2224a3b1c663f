"""A training job as stored: typed parts (options, choice, the training commands it ran, segments, steps, the last
window, its lifecycle and its verdict) and their one conversion to and from the JSON document both backends keep.

Progress (``minibatches_done``, ``energy_j``, ``elapsed_s``) belongs to the training command ``run_id``; the store
only ever moves it forward for that command (``advance_job``), so a report from a superseded command or one that
arrives late never counts a minibatch twice. Documents written before these types existed (``run`` as one dict,
``options``/``choice`` as dicts) are read too."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

_PROGRESS = ("run_id", "minibatches_done", "energy_j", "elapsed_s")


@dataclass
class StreamSpec:
    """An inference stream served beside the training: workload, arrivals (a Poisson rate or a trace), the p95
    latency budget, the operator's batch size (0: chosen), and the fastest single request measured at MAXN."""

    workload: str
    arrival_rate: float
    arrival_times_s: list[float]
    rate: float                 # requests per second (the trace's mean rate for a trace)
    latency_budget_s: float
    batch_size: int = 0
    fastest_ms: float = 0.0


@dataclass
class JobOptions:
    """How the job runs: the models it may build, its bounds, its closed loop, and (fleet jobs) its priority."""

    profile_modes: int = 0
    strategy: str = ""
    confidence: float = 0.9
    max_steps: int = 0
    window_s: float = 10.0
    epochs: int = 0
    minibatches_per_epoch: int = 0
    request_id: str = ""
    priority: float = 0.0
    inference: StreamSpec | None = None
    confirm_profiles: int = 0      # a power-budget job: modes measured on its board before committing (0: none)
    attach: bool = False           # issue 25: the operator's own training, adopted from its session on the board
    attach_timeout_s: float = 0.0  # for its process to join and to step (0: the agent's 60 s)
    template: str = ""             # issue 25: the agent's job template it launches (attach is then True)
    template_args: dict[str, str] = field(default_factory=dict)   # its --arg values
    profile_steps: int = 0         # an attached job's timed steps per mode profiled online (0: defaults.MINIBATCHES)
    seed: int | None = None        # its profiled modes and its stream's arrivals (None: its creation time)


@dataclass
class InferenceChoice:
    """The stream's batch size chosen at the job's mode, how, and what it was chosen on."""

    batch_size: int
    p95_ms: float
    train_per_s: float
    within: bool
    how: str
    power_w: float
    latency_ms: dict[str, float] = field(default_factory=dict)


@dataclass
class ChoiceRecord:
    """The job's first choice: the mode, its predictions with their bounds, whether it was at risk (no mode met the
    goal at the bounds' confidence), whether the model covered it, and the stream's batch."""

    mode: str
    goal: str
    time_ms: float
    time_hi_ms: float
    power_w: float
    power_hi_w: float
    power_lo_w: float
    at_risk: bool
    confidence: float
    time_lo_ms: float = 0.0
    covered: bool = True
    note: str = ""
    inference: InferenceChoice | None = None


@dataclass
class StreamStats:
    """A stream's figures as the board last reported them for one command."""

    served: int = 0
    late: int = 0
    dropped: int = 0
    p50_ms: float = math.nan
    p95_ms: float = math.nan
    p99_ms: float = math.nan
    window_served: int = 0
    batch_size: int = 0


@dataclass
class RunRecord:
    """One training command of the job: where it went, from which point of the job, and what the board reported
    of it (its own count of minibatches trained, board seconds and energy). ``ended``: '' while it may still run,
    else done, stopped (the board went away or was superseded) or cancelled."""

    run_id: str
    device_id: str
    instance_id: str
    seq: int
    minibatches: int
    base_done: int
    base_energy_j: float
    base_elapsed_s: float
    trained: int = 0
    elapsed_s: float = 0.0
    energy_j: float = 0.0
    ended: str = ""
    inference: StreamStats | None = None
    inference_base: dict[str, int] = field(default_factory=dict)


@dataclass
class Segment:
    """Time and energy the job spent in one mode on one board."""

    mode: str
    device_id: str
    minibatches: int = 0
    seconds: float = 0.0
    energy_j: float = 0.0


@dataclass
class StepRecord:
    """A mode change of the closed loop (or the fleet queue): when, from and to, why, and what it rested on."""

    t_s: float
    at_minibatch: int
    from_mode: str
    to_mode: str
    reason: str
    observed_power_w: float
    observed_time_ms: float
    predicted_power_w: float
    predicted_power_w_hi: float
    predicted_time_ms: float
    kind: str
    predicted_time_ms_hi: float = 0.0


@dataclass
class Observed:
    """The last full window: its mode, mean power (W), time per minibatch (ms), and when it ended (board s)."""

    mode: str
    power_w: float
    time_ms: float
    t_s: float


@dataclass
class Confirmed:
    """A mode measured on the job's board before it committed (``jobs/confirming.py``)."""

    mode: str
    device_id: str
    power_w: float
    time_ms: float
    predicted_power_hi_w: float
    over: bool
    seconds: float


@dataclass
class Transition:
    """One move of the job's lifecycle: the state it entered, why, and when (epoch s)."""

    state: str
    why: str
    at_s: float


@dataclass
class Verdict:
    """Whether the goal was kept, judged once when the job ends: ``judged`` False for a job that did not run to its
    end (cancelled, failed); ``constraint`` and ``objective`` say what was held against what."""

    judged: bool
    kept: bool
    constraint: str = ""
    objective: str = ""

    def text(self) -> str:
        """'goal kept (…; …)' or 'goal MISSED (…)' or 'goal not judged (…)'."""
        parts = "; ".join(p for p in (self.constraint, self.objective) if p)
        word = "not judged" if not self.judged else "kept" if self.kept else "MISSED"
        return f"goal {word}" + (f" ({parts})" if parts else "")


@dataclass
class JobRecord:
    """A training job as stored: what to run, where and under which goal, and how far it got (module docstring)."""

    job_id: str
    workload: str
    target_device: str             # one board, or ''
    target_model: str              # the board model
    goal: str                      # power, deadline, energy, fleet
    power_budget_w: float
    deadline_s: float              # board seconds for the whole job
    minibatches: int               # the job's length
    created_s: float
    options: JobOptions = field(default_factory=JobOptions)
    state: str = "queued"          # a JobState value (controller/jobs/state.py)
    detail: str = ""               # what it is doing, or why it is in its state
    waiting_for: str = ""          # what it waits for ('' when it waits for nothing)
    model_id: str = ""
    campaign_ids: list[str] = field(default_factory=list)
    mode: str = ""                 # the mode it runs in now
    choice: ChoiceRecord | None = None
    run_id: str = ""               # the training command running it now
    runs: list[RunRecord] = field(default_factory=list)
    minibatches_done: int = 0
    energy_j: float = 0.0
    elapsed_s: float = 0.0         # board seconds of training
    segments: list[Segment] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    observed: Observed | None = None
    goal_kept: bool = True         # while it runs: its last window kept the goal; once ended: the verdict
    verdict: Verdict | None = None
    history: list[Transition] = field(default_factory=list)
    finished_s: float = 0.0
    confirms: list[Confirmed] = field(default_factory=list)
    confirmed: bool = False        # the confirmation is over (or was not asked for): the choice stands
    profiled_steps: int = 0        # an attached job's steps trained while its modes were profiled online
    profiled_s: float = 0.0        # and their board seconds
    confirmed_steps: int = 0       # an attached job's steps trained while its choice was measured (``confirming.py``)
    output_tail: list[str] = field(default_factory=list)   # a launched job's last lines of stdout+stderr

    @property
    def board_trained(self) -> int:
        """What the boards trained for the job: its training commands, and an attached job's steps profiled online
        and measured confirming its choice (above its length when work was redone)."""
        return sum(r.trained for r in self.runs) + self.profiled_steps + self.confirmed_steps

    @property
    def run(self) -> RunRecord | None:
        """The current training command (None before the first)."""
        return self.runs[-1] if self.runs and self.runs[-1].run_id == self.run_id else None

    @property
    def device_id(self) -> str:
        """The board its current command went to ('' before the first)."""
        run = self.run
        return run.device_id if run is not None else ""

    @property
    def seed(self) -> int:
        """What picks its profiled modes and its inference stream's arrivals: the one it was given, or its creation
        time (whole seconds)."""
        return int(self.created_s) if self.options.seed is None else self.options.seed


# --- one conversion to and from the stored document -------------------------------------------------------------
def job_doc(rec: JobRecord) -> dict[str, Any]:
    """The record as a JSON-able document, without the progress columns (stored beside it)."""
    d = asdict(rec)
    for k in _PROGRESS:
        d.pop(k)
    return d


def job_from_doc(doc: dict[str, Any], run_id: str, minibatches_done: int, energy_j: float, elapsed_s: float) -> JobRecord:
    """A record from its document and progress columns (older documents too)."""
    d = dict(doc)
    old_run = d.pop("run", None)
    d.pop("device_id", None)
    opts = dict(d.pop("options", {}) or {})
    stream = opts.pop("inference", None)
    options = _make(JobOptions, opts)
    options.inference = _make(StreamSpec, stream) if stream else None
    choice = d.pop("choice", None)
    rec = JobRecord(**{k: v for k, v in d.items() if k in _FIELDS and k not in _TYPED}, options=options,
                    run_id=run_id, minibatches_done=minibatches_done, energy_j=energy_j, elapsed_s=elapsed_s)
    rec.choice = _choice(choice) if choice else None
    runs = d.get("runs")
    if runs is None and old_run:   # one dict of the current command, before the command history was kept
        runs = [{**old_run, "run_id": run_id}]
    rec.runs = [_run(r) for r in runs or []]
    rec.segments = [_make(Segment, s) for s in d.get("segments", [])]
    rec.steps = [_make(StepRecord, s) for s in d.get("steps", [])]
    rec.observed = _make(Observed, d["observed"]) if d.get("observed") else None
    rec.verdict = _make(Verdict, d["verdict"]) if d.get("verdict") else None
    rec.history = [_make(Transition, t) for t in d.get("history", [])]
    rec.confirms = [_make(Confirmed, c) for c in d.get("confirms", [])]
    return rec


_FIELDS = {f.name for f in fields(JobRecord)}
_TYPED = {"options", "choice", "runs", "segments", "steps", "observed", "verdict", "history", "confirms"}


def _make(cls: Any, d: dict[str, Any]) -> Any:
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in d.items() if k in names})


def _choice(d: dict[str, Any]) -> ChoiceRecord:
    inf = d.get("inference")
    c = _make(ChoiceRecord, {k: v for k, v in d.items() if k != "inference"})
    c.inference = _make(InferenceChoice, inf) if inf else None
    return c


def _run(d: dict[str, Any]) -> RunRecord:
    stats = d.get("inference")
    r = _make(RunRecord, {k: v for k, v in d.items() if k != "inference"})
    r.inference = _make(StreamStats, stats) if stats else None
    return r
