"""The controller's state behind one interface. Two backends (SQLite, Redis) run one contract
test suite (tests/test_store_contract.py). Calls are blocking; the controller runs them off the
event loop. A write returns only once it is durable (SQLite: synchronous=FULL in WAL mode;
Redis: the server's append-only file with fsync on every write, which the backend checks)."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any


@dataclass
class DeviceRecord:
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
    device_id: str
    t_s: float
    kind: str                      # online, offline, mode
    detail: str


@dataclass
class CampaignRecord:
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

    @property
    def knobs(self) -> tuple[int, float, float, float]:
        c, f, g, m = self.mode.split("/")
        return int(c), float(f), float(g), float(m)


class Store(abc.ABC):
    @abc.abstractmethod
    def upsert_device(self, rec: DeviceRecord) -> None: ...

    @abc.abstractmethod
    def get_device(self, device_id: str) -> DeviceRecord | None: ...

    @abc.abstractmethod
    def list_devices(self) -> list[DeviceRecord]: ...

    @abc.abstractmethod
    def insert_command(self, cmd: CommandRecord) -> bool:
        """Store a new command; False (and nothing written) if its id exists already."""

    @abc.abstractmethod
    def finish_command(self, command_id: str, status: str, result: dict[str, Any], error: dict[str, str],
                       finished_s: float) -> None: ...

    @abc.abstractmethod
    def get_command(self, command_id: str) -> CommandRecord | None: ...

    @abc.abstractmethod
    def append_event(self, event: Event) -> None: ...

    @abc.abstractmethod
    def list_events(self, device_id: str, limit: int = 100) -> list[Event]:
        """Newest first."""

    # --- campaigns and profiles --------------------------------------------------------------
    @abc.abstractmethod
    def create_campaign(self, rec: CampaignRecord, modes: list[str]) -> None:
        """All or nothing: the campaign and every one of its modes (pending)."""

    @abc.abstractmethod
    def get_campaign(self, campaign_id: str) -> CampaignRecord | None: ...

    @abc.abstractmethod
    def list_campaigns(self) -> list[CampaignRecord]: ...

    @abc.abstractmethod
    def set_campaign_status(self, campaign_id: str, status: str, finished_s: float = 0.0) -> None: ...

    @abc.abstractmethod
    def campaign_modes(self, campaign_id: str) -> list[ModeState]:
        """In the campaign's order."""

    @abc.abstractmethod
    def set_mode_state(self, campaign_id: str, state: ModeState) -> None: ...

    @abc.abstractmethod
    def record_result(self, rec: ProfileRecord) -> bool:
        """Store a campaign's result and mark its mode done, atomically. False (nothing written) if a
        result for (source, mode, observation) exists already: a duplicate from a retry."""

    @abc.abstractmethod
    def import_profiles(self, records: list[ProfileRecord], catalogs: dict[str, dict[str, Any]]) -> None:
        """All or nothing: the rows and the catalogs of board models that had none."""

    @abc.abstractmethod
    def query_profiles(self, *, board_model: str = "", device_id: str = "", workload: str = "", mode: str = "",
                       source: str = "", with_raw: bool = False) -> list[ProfileRecord]:
        """Matching rows ordered by (source, mode, observation); raw samples only when asked."""

    @abc.abstractmethod
    def put_catalog(self, model: str, catalog: dict[str, Any]) -> None: ...

    @abc.abstractmethod
    def get_catalog(self, model: str) -> dict[str, Any] | None: ...

    # --- documents (model artifacts, decisions) ----------------------------------------------
    @abc.abstractmethod
    def put_doc(self, kind: str, doc_id: str, doc: dict[str, Any]) -> None:
        """Insert or replace a JSON document of a kind ("model", "decision")."""

    @abc.abstractmethod
    def get_doc(self, kind: str, doc_id: str) -> dict[str, Any] | None: ...

    @abc.abstractmethod
    def list_docs(self, kind: str) -> list[dict[str, Any]]:
        """Every document of a kind, in insertion order."""

    @abc.abstractmethod
    def close(self) -> None: ...

    @property
    @abc.abstractmethod
    def url(self) -> str: ...
