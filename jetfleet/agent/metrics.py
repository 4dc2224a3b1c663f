"""The agent's Prometheus metrics, in base units, on a registry of their own."""

from __future__ import annotations

import math
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Info
from prometheus_client import metrics as prometheus_metrics
from prometheus_client.metrics_core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from jetfleet.agent.device.base import TelemetrySample
from jetfleet.shared.catalog import Catalog, PowerMode

MINIBATCH_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class MinibatchSeries:
    """One series of ``MinibatchHistogram``: bucket counts (+Inf last) and the sum, under a lock of its own."""

    __slots__ = ("_bounds", "_counts", "_lock", "created", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        self._counts = [0] * len(bounds)
        self._lock = threading.Lock()
        self.sum = 0.0
        self.created = time.time()

    def observe(self, value: float) -> None:
        """Count one minibatch of ``value`` seconds (in the first bucket whose bound is at least that)."""
        i = bisect_left(self._bounds, value)
        with self._lock:
            if value == value:   # a NaN falls in no bucket, as prometheus_client's Histogram has it
                self._counts[i] += 1
            self.sum += value

    def snapshot(self) -> tuple[list[int], float]:
        """The bucket counts and the sum, read together."""
        with self._lock:
            return list(self._counts), self.sum


class MinibatchHistogram(Collector):
    """A histogram exposed exactly as prometheus_client's ``Histogram`` exposes it (``_bucket`` with the same ``le``
    labels, ``_count``, ``_sum``, ``_created``), observed for less: one bisection and one lock an observation instead
    of a lock for the sum and one for the bucket (0.8 us). A profile on an instant twin observes ~42 minibatches in
    about half a millisecond, in the thread that holds the agent's GIL for the whole campaign."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str], buckets: Sequence[float]) -> None:
        self.name, self.documentation, self.labelnames = name, documentation, tuple(labelnames)
        self._bounds = (*map(float, buckets), math.inf)
        self._series: dict[tuple[str, ...], MinibatchSeries] = {}
        self._lock = threading.Lock()

    def labels(self, *values: str) -> MinibatchSeries:
        """The series of these label values (created at first use, at 0)."""
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name}: {len(self.labelnames)} label values expected ({', '.join(self.labelnames)})")
        key = tuple(map(str, values))
        series = self._series.get(key)
        if series is None:
            with self._lock:
                series = self._series.setdefault(key, MinibatchSeries(self._bounds))
        return series

    def describe(self) -> Iterator[Metric]:
        """The family's name and type (for the registry's duplicate check), without samples."""
        return iter([HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)])

    def collect(self) -> Iterator[Metric]:
        """Every series as it stands now."""
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        les = [floatToGoString(b) for b in self._bounds]
        with self._lock:
            series = list(self._series.items())
        for key, s in series:
            counts, total = s.snapshot()
            cumulative, acc = [], 0
            for le, c in zip(les, counts):
                acc += c
                cumulative.append((le, float(acc)))
            family.add_metric(list(key), cumulative, total)
            # as prometheus_client's own: none where PROMETHEUS_DISABLE_CREATED_SERIES (or disable_created_metrics())
            if getattr(prometheus_metrics, "_use_created", True):
                family.add_sample(self.name + "_created", dict(zip(self.labelnames, key)), s.created)
        yield family


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
        self.minibatch = MinibatchHistogram("jetfleet_agent_minibatch_duration_seconds", "Training minibatch duration",
                                            [*d, "workload"], MINIBATCH_BUCKETS_S)
        r.register(self.minibatch)
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
