"""What a job's runner is given: the controller's parts it uses (store, board registry, command router, campaigns,
models, the board leases, the store retry, the fleet queue), its settings and clocks, and where it reports a
change. The runner gets these, not the manager that created it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jetfleet.controller.campaigns import CampaignManager
from jetfleet.controller.commands import CommandRouter
from jetfleet.controller.leases import BoardLeases
from jetfleet.controller.metrics import ControllerMetrics
from jetfleet.controller.powertrain.cache import PredictionCache
from jetfleet.controller.powertrain.calibrate import DEFAULT_CONFIDENCE
from jetfleet.controller.powertrain.service import ModelService
from jetfleet.controller.registry import Registry
from jetfleet.controller.retry import StoreRetry
from jetfleet.controller.store import JobRecord, Store

if TYPE_CHECKING:
    from jetfleet.controller.fleet.queue import FleetQueue


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


@dataclass(frozen=True)
class JobContext:
    """The parts of the controller a job runs on (module docstring)."""

    store: Store
    registry: Registry
    router: CommandRouter
    campaigns: CampaignManager
    models: ModelService
    cache: PredictionCache
    leases: BoardLeases
    retry: StoreRetry
    metrics: ControllerMetrics
    config: JobsConfig
    fleet: FleetQueue | None
    clock: Callable[[], float]           # monotonic seconds (pacing)
    wall: Callable[[], float]            # epoch seconds (what is stored and shown)
    changed: Callable[[JobRecord], None]  # a job's record changed: gauges and anyone watching
