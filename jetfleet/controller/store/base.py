"""The controller's state behind one interface. Two backends (SQLite, Redis) run one contract
test suite (tests/test_store_contract.py) that pins one behaviour for every call. Calls are
blocking; the controller runs them off the event loop. A write returns only once it is durable
(SQLite: synchronous=FULL in WAL mode; Redis: the server's append-only file with fsync on every
write, which the backend checks). A store that cannot be reached raises StoreUnavailable and
changes nothing; a record that is physically impossible (NaN, negative, above the board model's
power limit) raises InvalidArgument and is not written — a write is never silently ignored."""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass, field
from typing import Any

from jetfleet.controller.store.job_record import JobRecord
from jetfleet.shared.bounds import MAX_MINIBATCH_S, MAX_TIMESTAMP_S
from jetfleet.shared.catalog import power_limit_w
from jetfleet.shared.errors import FailedPrecondition, InvalidArgument

MAX_EVENTS_PER_DEVICE = 10_000   # events kept per board (the oldest go first), on every backend


class Fenced(FailedPrecondition):
    """A write by a controller that no longer leads (its fencing token is not current): nothing was written."""


@dataclass
class DeviceRecord:
    """A board as stored: identity, software, catalog (as a dict), current mode, first and last seen (epoch s)."""

    device_id: str
    model: str
    serial: str
    software: dict[str, str]
    catalog: dict[str, Any]        # Catalog.to_dict()
    emulated: bool
    current_mode: str              # CORES/CPU/GPU/MEM, '' if unknown
    first_seen_s: float
    last_seen_s: float


@dataclass
class CommandRecord:
    """A command in the log: what was sent to which board, its status, and its (compacted) result or error."""

    command_id: str
    device_id: str
    kind: str                      # set_mode, run_training, run_profile, cancel
    payload: dict[str, Any]
    created_s: float
    status: str = "pending"        # pending, acked, done, failed
    result: dict[str, Any] = field(default_factory=dict)
    error: dict[str, str] = field(default_factory=dict)
    finished_s: float = 0.0


@dataclass
class Event:
    """One entry of a board's history: online, offline or a mode change, at ``t_s`` (epoch s)."""

    device_id: str
    t_s: float
    kind: str                      # online, offline, mode
    detail: str


@dataclass
class CampaignRecord:
    """A profiling campaign as stored: workload, target board or model, modes spec, minibatches per mode, status."""

    campaign_id: str
    workload: str
    target_device: str             # one board, or ''
    target_model: str              # the board model (of the device, or whose online boards share the work)
    modes_spec: str                # full, powertrain, presets, random:K, file:NAME
    minibatches: int
    created_s: float
    status: str = "running"        # running, paused, cancelled, done
    finished_s: float = 0.0
    seed: int = 0


@dataclass
class ModeState:
    """The progress of one mode of a campaign: status, attempts, the board that ran it last, the last error."""

    mode: str
    status: str = "pending"        # pending, done, failed
    attempts: int = 0
    device_id: str = ""
    error: str = ""


@dataclass
class ProfileRecord:
    """One observation of a workload in a mode: a campaign's result (observation 0) or an imported row."""

    source: str                    # campaign id, or import-<id>
    mode: str
    observation: int
    board_model: str
    device_id: str
    workload: str
    minibatch_time_ms: float       # median over the window
    power_w: float                 # mean over the window
    observed_at: float
    minibatch_time_mean_ms: float = float("nan")
    energy_j: float = float("nan")
    power_samples: int = 0
    steady_state_found: bool = False
    raw: dict[str, Any] | None = None  # {"minibatch_times_s": [...], "power": [[t_s, total_w, {rail: w}], ...]}
    # A campaign's raw samples as the board sent them (its ProfileResult, serialized): written instead of
    # ``raw`` with no per-sample work; queries with raw samples return them as ``raw`` (``store/raw.py``).
    raw_pb: bytes = b""

    @property
    def knobs(self) -> tuple[int, float, float, float]:
        """The mode as (cores, CPU MHz, GPU MHz, memory MHz)."""
        c, f, g, m = self.mode.split("/")
        return int(c), float(f), float(g), float(m)

    def check(self) -> ProfileRecord:
        """Return the record if it is physically possible; InvalidArgument naming the bad field otherwise.

        Minibatch time in (0, 1 h], power in (0, the board model's limit], a finite observation time."""
        limit_w = power_limit_w(self.board_model)
        for name, value, hi in (("minibatch_time_ms", self.minibatch_time_ms, MAX_MINIBATCH_S * 1e3),
                                ("power_w", self.power_w, limit_w)):
            if not (math.isfinite(value) and 0 < value <= hi):
                raise InvalidArgument(f"profile of {self.workload} on {self.board_model} in {self.mode}: {name}="
                                      f"{value!r} is impossible; allowed (0, {hi:g}]", field=name)
        if not (math.isfinite(self.observed_at) and 0 <= self.observed_at <= MAX_TIMESTAMP_S):
            raise InvalidArgument(f"observed_at={self.observed_at!r} is not a time", field="observed_at")
        if self.power_samples < 0 or self.observation < 0:
            raise InvalidArgument("power_samples and observation must be >= 0", field="power_samples")
        try:
            self.knobs  # noqa: B018 - parses the mode
        except ValueError:
            raise InvalidArgument(f"mode {self.mode[:64]!r} is not CORES/CPU/GPU/MEM", field="mode") from None
        return self


@dataclass
class RooflineRecord:
    """One power mode's measured rooflines (issue 16): the ERT kernels' rates and the three windows' power,
    with the energy constants fitted from them. Keyed by (board model, mode); a new measurement replaces it."""

    board_model: str
    mode: str                      # CORES/CPU/GPU/MEM
    peak_flops: float
    peak_bytes_per_s: float
    idle_w: float
    compute_w: float
    memory_w: float
    compute_bytes_per_s: float
    memory_flops: float
    eps_flop_j: float
    eps_byte_j: float
    pi0_w: float
    device_id: str
    method: str                    # twin or torch-cuda
    measured_s: float
    samples: int = 0

    def check(self) -> RooflineRecord:
        """InvalidArgument naming the first field that is not a positive finite number (or a missing key)."""
        if not self.board_model or not self.mode:
            raise InvalidArgument("a roofline needs a board model and a mode", field="board_model")
        for name in ("peak_flops", "peak_bytes_per_s", "idle_w", "compute_w", "memory_w"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise InvalidArgument(f"roofline {name}={v!r} must be a positive number", field=name)
        for name in ("eps_flop_j", "eps_byte_j", "pi0_w", "compute_bytes_per_s", "memory_flops"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise InvalidArgument(f"roofline {name}={v!r} must be a number >= 0", field=name)
        return self


class Store(abc.ABC):
    """The controller's durable state: boards, commands, events, campaigns, profiles, catalogs and documents."""

    @abc.abstractmethod
    def upsert_device(self, rec: DeviceRecord) -> None:
        """Insert a board or replace its record, keeping the first-seen time already stored (``rec`` is not changed)."""

    @abc.abstractmethod
    def delete_device(self, device_id: str) -> bool:
        """Remove a board's record and its events; False if it was not stored."""

    @abc.abstractmethod
    def get_device(self, device_id: str) -> DeviceRecord | None:
        """The stored record of a board, or None if it was never seen."""

    @abc.abstractmethod
    def list_devices(self) -> list[DeviceRecord]:
        """Every stored board, by id."""

    @abc.abstractmethod
    def insert_command(self, cmd: CommandRecord) -> bool:
        """Store a new command; False (and nothing written) if its id exists already."""

    @abc.abstractmethod
    def finish_command(self, command_id: str, status: str, result: dict[str, Any], error: dict[str, str],
                       finished_s: float) -> None:
        """Record a command's outcome (done or failed), result or error, and finish time; an unknown id is ignored."""

    @abc.abstractmethod
    def get_command(self, command_id: str) -> CommandRecord | None:
        """A command of the log by id, or None."""

    @abc.abstractmethod
    def append_event(self, event: Event) -> None:
        """Add an event to its board's history; the history keeps the newest ``max_events`` events."""

    @abc.abstractmethod
    def list_events(self, device_id: str, limit: int = 100) -> list[Event]:
        """A board's most recent events, at most ``limit`` (none for ``limit`` <= 0), newest first."""

    # --- campaigns and profiles --------------------------------------------------------------
    @abc.abstractmethod
    def create_campaign(self, rec: CampaignRecord, modes: list[str]) -> None:
        """All or nothing: the campaign and every one of its modes (pending). AlreadyExists if the id is taken."""

    @abc.abstractmethod
    def get_campaign(self, campaign_id: str) -> CampaignRecord | None:
        """A stored campaign by id, or None."""

    @abc.abstractmethod
    def list_campaigns(self) -> list[CampaignRecord]:
        """Every stored campaign, oldest first (by creation time, then id)."""

    @abc.abstractmethod
    def set_campaign_status(self, campaign_id: str, status: str, finished_s: float = 0.0) -> None:
        """Set a campaign's status (running, paused, cancelled, done) and its finish time (0 while unfinished)."""

    @abc.abstractmethod
    def campaign_modes(self, campaign_id: str) -> list[ModeState]:
        """The state of every mode of a campaign, in the campaign's order."""

    @abc.abstractmethod
    def set_mode_state(self, campaign_id: str, state: ModeState, command: CommandRecord | None = None) -> None:
        """Store the progress of one mode of a campaign (status, attempts, board, error) and, when given, the
        log entry of the command that ran it (replacing an older entry of its id), in one durable write."""

    @abc.abstractmethod
    def record_result(self, rec: ProfileRecord, command: CommandRecord | None = None) -> bool:
        """Store a campaign's result, mark its mode done and, when given, write the log entry of the command
        that measured it (replacing an older entry of its id): one atomic, durable write. False if a result for
        (source, mode, observation) exists already (a duplicate from a retry): the stored result and mode
        are kept, only the command's entry is written. InvalidArgument (nothing written) for an impossible
        record (``ProfileRecord.check``)."""

    def record_results(self, items: list[tuple[ProfileRecord, CommandRecord | None]]) -> list[bool]:
        """``record_result`` of each item, all in one atomic, durable write where the store can (a group commit:
        the results of a campaign's quick modes that arrived together); one bool per item, as ``record_result``
        says. InvalidArgument (nothing written) if any record is impossible. Here: one write per item."""
        for rec, _ in items:
            rec.check()
        return [self.record_result(rec, command) for rec, command in items]

    @abc.abstractmethod
    def import_profiles(self, records: list[ProfileRecord], catalogs: dict[str, dict[str, Any]]) -> int:
        """All or nothing: the rows, and the catalogs of board models that have none stored yet (a stored
        catalog is kept). A row whose (source, mode, observation) is stored already is kept as stored
        and not counted: importing the same rows twice stores them once. Returns the rows added.
        InvalidArgument (nothing written) if any record is impossible."""

    @abc.abstractmethod
    def query_profiles(self, *, board_model: str = "", device_id: str = "", workload: str = "", mode: str = "",
                       source: str = "", with_raw: bool = False) -> list[ProfileRecord]:
        """Matching rows ordered by (source, mode, observation); raw samples only when asked."""

    def has_profiles(self, *, workload: str) -> bool:
        """Whether any profile of ``workload`` is stored (an import tells a new workload from a known one)."""
        return bool(self.query_profiles(workload=workload))

    @abc.abstractmethod
    def put_catalog(self, model: str, catalog: dict[str, Any]) -> None:
        """Insert or replace the catalog (as a dict) of a board model."""

    @abc.abstractmethod
    def get_catalog(self, model: str) -> dict[str, Any] | None:
        """The stored catalog of a board model, or None."""

    # --- jobs ---------------------------------------------------------------------------------
    @abc.abstractmethod
    def create_job(self, rec: JobRecord) -> bool:
        """Store a new job; False (and nothing written) if its id exists already."""

    @abc.abstractmethod
    def get_job(self, job_id: str) -> JobRecord | None:
        """A job by id, or None."""

    @abc.abstractmethod
    def list_jobs(self) -> list[JobRecord]:
        """Every job, oldest first (by creation time, then id)."""

    @abc.abstractmethod
    def update_job(self, rec: JobRecord) -> None:
        """Replace a stored job's record (an unknown id is ignored)."""

    @abc.abstractmethod
    def advance_job(self, job_id: str, run_id: str, minibatches_done: int, energy_j: float, elapsed_s: float) -> bool:
        """Record progress of the job's training command ``run_id``, atomically and only forward: nothing is
        written (False) unless ``run_id`` is the job's current one and neither count goes back."""

    # --- rooflines (issue 16) -------------------------------------------------------------------
    @abc.abstractmethod
    def put_roofline(self, rec: RooflineRecord) -> None:
        """Insert or replace the roofline of (board model, mode), after ``rec.check()``."""

    @abc.abstractmethod
    def get_rooflines(self, board_model: str) -> list[RooflineRecord]:
        """Every stored roofline of a board model, by mode string."""

    # --- documents (model artifacts, decisions) ----------------------------------------------
    @abc.abstractmethod
    def put_doc(self, kind: str, doc_id: str, doc: dict[str, Any]) -> None:
        """Insert or replace a JSON document of a kind ("model", "decision")."""

    @abc.abstractmethod
    def get_doc(self, kind: str, doc_id: str) -> dict[str, Any] | None:
        """A stored document by kind and id, or None."""

    @abc.abstractmethod
    def list_docs(self, kind: str) -> list[dict[str, Any]]:
        """Every document of a kind, in insertion order."""

    @abc.abstractmethod
    def delete_doc(self, kind: str, doc_id: str) -> bool:
        """Remove a document; False if there was none."""
    @abc.abstractmethod
    def durability(self) -> dict[str, str]:
        """How writes are made durable, as the backend reports it (SQLite: journal_mode, synchronous;
        Redis: appendonly, appendfsync); the controller logs it and warns when it is weaker than promised."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection; the store is not used afterwards."""

    @property
    @abc.abstractmethod
    def url(self) -> str:
        """Where the data lives, for logs: the SQLite file's path or the Redis URL."""
