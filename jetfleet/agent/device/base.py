"""The device interface every board backend implements (real Jetson, emulated twin)."""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from jetfleet.shared.catalog import Catalog, PowerMode
from jetfleet.shared.errors import DeviceError


@dataclass(frozen=True)
class BoardInfo:
    model: str
    serial: str
    software: Mapping[str, str]  # e.g. {"l4t": "36.3.0", "kernel": "5.15.136-tegra", "jetfleet": "0.1.0"}
    catalog: Catalog
    emulated: bool


@dataclass(frozen=True)
class TelemetrySample:
    t_s: float                      # the board's clock (seconds since the epoch; virtual on a twin)
    rails_w: Mapping[str, float]
    total_w: float
    cpu_mhz: float
    gpu_mhz: float
    mem_mhz: float
    cores_online: int
    temps_c: Mapping[str, float] = field(default_factory=dict)
    cpu_util: float = 0.0           # 0..1, mean over online cores
    gpu_util: float = 0.0           # 0..1


@dataclass(frozen=True)
class RunResult:
    workload: str
    minibatch_times_s: list[float]
    start_s: float                  # board clock when the first minibatch started
    end_s: float


# Called after each minibatch with (index, seconds); returning True ends the run after it.
MinibatchCallback = Callable[[int, float], "bool | None"]


class Device(abc.ABC):
    """One board. Methods block; the agent calls them from worker threads."""

    @abc.abstractmethod
    def describe(self) -> BoardInfo: ...

    @abc.abstractmethod
    def read_mode(self) -> PowerMode:
        """The mode the board is in now, as the board reports it."""

    @abc.abstractmethod
    def _write_mode(self, mode: PowerMode) -> None:
        """Apply an already validated mode."""

    def apply_mode(self, mode: PowerMode) -> PowerMode:
        """Validate against the catalog before touching anything, apply, read back and confirm.

        Returns the confirmed mode; raises DeviceError if the board reports something else."""
        mode = self.describe().catalog.validate(mode)
        self._write_mode(mode)
        confirmed = self.read_mode()
        if confirmed != mode:
            raise DeviceError(f"board did not confirm mode {mode}: it reports {confirmed}", field="mode")
        return confirmed

    @abc.abstractmethod
    def sample(self) -> TelemetrySample: ...

    @abc.abstractmethod
    def run_minibatches(self, workload: str, n: int, *, minibatch_size: int = 16, workers: int = 4,
                        on_minibatch: MinibatchCallback | None = None) -> RunResult: ...

    def now_s(self) -> float:
        """The board's clock (virtual on an accelerated twin)."""
        import time

        return time.time()

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (threads, file handles)."""
