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

    @abc.abstractmethod
    def close(self) -> None: ...

    @property
    @abc.abstractmethod
    def url(self) -> str: ...
