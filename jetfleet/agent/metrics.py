"""The agent's Prometheus metrics, in base units, on a registry of their own."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from jetfleet.agent.device.base import TelemetrySample
from jetfleet.shared.catalog import Catalog, PowerMode


class AgentMetrics:
    def __init__(self, catalog: Catalog, registry: CollectorRegistry | None = None) -> None:
        self.catalog = catalog
        self.registry = r = registry or CollectorRegistry()
        self.rail_power = Gauge("jetfleet_agent_rail_power_watts", "Power per rail", ["rail"], registry=r)
        self.power = Gauge("jetfleet_agent_power_watts", "Board power (sum of the rails that add into the total)",
                           registry=r)
        self.energy = Counter("jetfleet_agent_energy_joules_total", "Board energy, integrated from power samples",
                              registry=r)
        self.freq = Gauge("jetfleet_agent_frequency_hertz", "Clock frequency", ["clock"], registry=r)
        self.cores = Gauge("jetfleet_agent_cpu_cores_online", "Online CPU cores", registry=r)
        self.temp = Gauge("jetfleet_agent_temperature_celsius", "Temperature per sensor", ["sensor"], registry=r)
        self.util = Gauge("jetfleet_agent_utilization_ratio", "Utilisation (0..1)", ["unit"], registry=r)
        self.mode = Info("jetfleet_agent_power_mode", "The power mode the board runs", registry=r)
        self.minibatch = Histogram("jetfleet_agent_minibatch_duration_seconds", "Training minibatch duration",
                                   ["workload"], buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
                                   registry=r)
        self.samples = Counter("jetfleet_agent_telemetry_samples_total", "Telemetry samples taken", registry=r)
        self._last_t: float | None = None

    def observe(self, s: TelemetrySample) -> None:
        for rail, w in s.rails_w.items():
            self.rail_power.labels(rail).set(w)
        self.power.set(s.total_w)
        if self._last_t is not None and 0 < s.t_s - self._last_t < 60:
            self.energy.inc(s.total_w * (s.t_s - self._last_t))
        self._last_t = s.t_s
        for clock, mhz in (("cpu", s.cpu_mhz), ("gpu", s.gpu_mhz), ("memory", s.mem_mhz)):
            self.freq.labels(clock).set(mhz * 1e6)
        self.cores.set(s.cores_online)
        for sensor, c in s.temps_c.items():
            self.temp.labels(sensor).set(c)
        self.util.labels("cpu").set(s.cpu_util)
        self.util.labels("gpu").set(s.gpu_util)
        self.samples.inc()

    def set_mode(self, mode: PowerMode) -> None:
        self.mode.info({"mode": str(mode), "preset": self.catalog.preset_name(mode) or "", "board_model": self.catalog.model})

    def observe_minibatch(self, workload: str, seconds: float) -> None:
        self.minibatch.labels(workload).observe(seconds)


def serve(metrics: AgentMetrics, port: int, addr: str = "127.0.0.1") -> Any:
    """Start the /metrics endpoint; returns (server, thread). Port 0 picks a free port."""
    from prometheus_client import start_http_server

    return start_http_server(port, addr=addr, registry=metrics.registry)
