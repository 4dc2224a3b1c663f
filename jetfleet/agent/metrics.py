"""The agent's Prometheus metrics, in base units, on a registry of their own."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from jetfleet.agent.device.base import TelemetrySample
from jetfleet.shared.catalog import Catalog, PowerMode


class AgentMetrics:
    """The agent's Prometheus metrics of one board: power, energy, clocks, temperatures, mode, minibatch times.

    Every series carries the board's ``device`` id (the id it registers with), so a dashboard filters any
    panel by board and a series never needs the scrape target to say whose it is."""

    def __init__(self, catalog: Catalog, device_id: str, registry: CollectorRegistry | None = None) -> None:
        self.catalog = catalog
        self.device_id = device_id
        self.registry = r = registry or CollectorRegistry()
        d = ["device"]
        self.rail_power = Gauge("jetfleet_agent_rail_power_watts", "Power per rail", [*d, "rail"], registry=r)
        self.power = Gauge("jetfleet_agent_power_watts", "Board power (sum of the rails that add into the total)",
                           d, registry=r).labels(device_id)
        self.energy = Counter("jetfleet_agent_energy_joules_total", "Board energy, integrated from power samples",
                              d, registry=r).labels(device_id)
        self.freq = Gauge("jetfleet_agent_frequency_hertz", "Clock frequency", [*d, "clock"], registry=r)
        self.cores = Gauge("jetfleet_agent_cpu_cores_online", "Online CPU cores", d, registry=r).labels(device_id)
        self.temp = Gauge("jetfleet_agent_temperature_celsius", "Temperature per sensor", [*d, "sensor"], registry=r)
        self.util = Gauge("jetfleet_agent_utilization_ratio", "Utilisation (0..1)", [*d, "unit"], registry=r)
        self.mode = Info("jetfleet_agent_power_mode", "The power mode the board runs", d, registry=r).labels(device_id)
        self.minibatch = Histogram("jetfleet_agent_minibatch_duration_seconds", "Training minibatch duration",
                                   [*d, "workload"],
                                   buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30), registry=r)
        self.samples = Counter("jetfleet_agent_telemetry_samples_total", "Telemetry samples taken", d,
                               registry=r).labels(device_id)
        # The board's own count of the training work it did (training commands only, profiles not included): what
        # the controller's accounting of its jobs is held against (a job's minibatches are trained once)
        self.trained = Counter("jetfleet_agent_trained_minibatches_total", "Minibatches trained for training commands",
                               [*d, "workload"], registry=r)
        self._last_t: float | None = None

    def observe(self, s: TelemetrySample) -> None:
        """Record one telemetry sample; energy adds power x the time since the previous sample (gaps of 60 s or more: none)."""
        for rail, w in s.rails_w.items():
            self.rail_power.labels(self.device_id, rail).set(w)
        self.power.set(s.total_w)
        if self._last_t is not None and 0 < s.t_s - self._last_t < 60:
            self.energy.inc(s.total_w * (s.t_s - self._last_t))
        self._last_t = s.t_s
        for clock, mhz in (("cpu", s.cpu_mhz), ("gpu", s.gpu_mhz), ("memory", s.mem_mhz)):
            self.freq.labels(self.device_id, clock).set(mhz * 1e6)
        self.cores.set(s.cores_online)
        for sensor, c in s.temps_c.items():
            self.temp.labels(self.device_id, sensor).set(c)
        self.util.labels(self.device_id, "cpu").set(s.cpu_util)
        self.util.labels(self.device_id, "gpu").set(s.gpu_util)
        self.samples.inc()

    def set_mode(self, mode: PowerMode) -> None:
        """Publish the board's current mode, its preset name (if any) and the board model."""
        self.mode.info({"mode": str(mode), "preset": self.catalog.preset_name(mode) or "", "board_model": self.catalog.model})

    def count_trained(self, workload: str) -> None:
        """One minibatch of a training command of ``workload`` was trained."""
        self.trained.labels(self.device_id, workload).inc()

    def minibatch_observer(self, workload: str) -> Callable[[float], None]:
        """What records one training minibatch's duration (s) of ``workload``: the series looked up once per run,
        not per minibatch (a profile on an instant twin observes ~45 minibatches in under a millisecond)."""
        return self.minibatch.labels(self.device_id, workload).observe
