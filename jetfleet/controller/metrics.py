"""The controller's Prometheus metrics, on a registry of their own (no module-level singletons).

One unit per metric (the unit is the name's suffix). No label is called ``job`` or ``instance``: Prometheus
gives those to the scrape target (a job's id is ``job_id``). Series that describe a live board (its power) go
when the board goes offline, so sums over the fleet count only boards that report; a board's state
(``jetfleet_board_online``) stays, at 0, until the board is forgotten, when every series naming it goes."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from jetfleet.shared.concurrency import INFERENCE_LATENCY_BUCKETS_S


class ControllerMetrics:
    """The controller's Prometheus metrics: boards, telemetry, commands, campaigns, models and decisions."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.agents = Gauge("jetfleet_agents", "Known boards by model and state", ["board_model", "state"], registry=r)
        self.board_online = Gauge("jetfleet_board_online", "1 while the board's agent holds a session, 0 while it is "
                                  "offline (until the board is forgotten)", ["device", "board_model"], registry=r)
        # a board's power and sample counters move with every batch: plain numbers read at scrape time
        self.telemetry = TelemetrySeries()
        r.register(self.telemetry)
        self.rejected = Counter("jetfleet_agent_messages_rejected_total", "Agent messages refused, by message kind "
                                "and error code", ["kind", "code"], registry=r)
        self.notices_dropped = Counter("jetfleet_agent_notices_dropped_total", "Refusal notices not queued to an "
                                       "agent that does not read its stream", registry=r)
        self.hellos_refused = Counter("jetfleet_agent_hellos_refused_total", "Agent sessions turned away at their "
                                      "hello (every admission place taken); each was told when to dial again",
                                      registry=r)
        self.store_retries = Counter("jetfleet_store_retries_total", "Store writes retried while the store was "
                                     "unavailable", registry=r)
        self.commands = Counter("jetfleet_commands_total", "Commands sent to boards", ["type", "outcome"], registry=r)
        self.command_latency = Histogram("jetfleet_command_duration_seconds", "Command round trip", ["type"],
                                         buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
                                         registry=r)
        self.campaign_modes = Counter("jetfleet_campaign_modes_total", "Campaign modes by outcome (measured, "
                                      "duplicate, retried, failed)", ["workload", "outcome"], registry=r)
        self.campaign_remaining = Gauge("jetfleet_campaign_modes_remaining", "Modes left to measure",
                                        ["campaign", "workload"], registry=r)
        self.campaign_progress = Gauge("jetfleet_campaign_last_progress_timestamp_seconds", "A running campaign: when "
                                       "a mode last ended (measured or failed), or it started or resumed (Unix time)",
                                       ["campaign", "workload"], registry=r)
        self.model_seconds = Histogram("jetfleet_model_training_seconds", "Reference training and transfer time",
                                       ["kind"], buckets=(0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600), registry=r)
        self.decision_time = Gauge("jetfleet_decision_minibatch_seconds", "Last applied decision per board: time per "
                                   "minibatch, predicted and observed", ["device", "source"], registry=r)
        self.decision_power = Gauge("jetfleet_decision_power_watts", "Last applied decision per board: power, "
                                    "predicted and observed", ["device", "source"], registry=r)
        # one quantity per metric (Prometheus's naming rule: a sum or mean over a metric's labels means something)
        self.decision_time_error = Gauge("jetfleet_decision_time_error_ratio", "Last applied decision per board: "
                                         "predicted / observed time per minibatch", ["device"], registry=r)
        self.decision_power_error = Gauge("jetfleet_decision_power_error_ratio", "Last applied decision per board: "
                                          "predicted / observed power", ["device"], registry=r)
        self.jobs = Gauge("jetfleet_jobs", "Training jobs by state", ["state"], registry=r)
        self.job_progress = Gauge("jetfleet_job_progress_ratio", "Share of a job's minibatches done",
                                  ["job_id", "workload"], registry=r)
        self.job_power = Gauge("jetfleet_job_power_watts", "A running job's observed power: the board's mean over its "
                               "last full window", ["job_id", "device"], registry=r)
        self.job_budget = Gauge("jetfleet_job_power_budget_watts", "A running job's power budget", ["job_id", "device"],
                                registry=r)
        self.job_power_upper = Gauge("jetfleet_job_predicted_power_upper_watts", "A running job's chosen mode: the "
                                     "calibrated upper bound of its predicted power", ["job_id", "device"], registry=r)
        self.job_last_progress = Gauge("jetfleet_job_last_progress_timestamp_seconds", "An active job (not queued, not "
                                       "ended): when it last moved on (a stage, a profiled mode, a minibatch report; "
                                       "Unix time), by its stage", ["job_id", "workload", "stage"], registry=r)
        self.job_steps = Counter("jetfleet_job_steps_total", "Closed-loop mode steps of jobs", ["goal"], registry=r)
        for goal in ("power", "deadline"):   # exported from the start, at 0
            self.job_steps.labels(goal)
        self.inference = InferenceCollector()
        r.register(self.inference)
        self.leader = Gauge("jetfleet_controller_leader", "1 while this controller leads its lab (holds the Redis "
                            "lease, or the SQLite data directory), 0 while it stands by", registry=r)
        self.lease_age = Gauge("jetfleet_controller_lease_age_seconds", "The leader: seconds since it last renewed "
                               "its Redis lease (0 on a standby and on SQLite)", registry=r)
        self.takeovers = Counter("jetfleet_controller_takeovers_total", "Times this controller took the lead of a "
                                 "lab that had a leader before (a Redis lease term after the first)", registry=r)
        self._job_stage: dict[str, tuple[str, str, str]] = {}   # job -> the labels of its progress timestamp series

    def board_offline(self, device_id: str, board_model: str) -> None:
        """A board went offline: its live measurements go (a dead board reports nothing), its state says 0."""
        self.board_online.labels(device_id, board_model).set(0)
        self.telemetry.offline(device_id)

    def board_forgotten(self, device_id: str) -> None:
        """A board was forgotten: every series naming it goes."""
        self.telemetry.forget(device_id)
        for metric in (self.board_online, self.decision_time, self.decision_power, self.decision_time_error,
                       self.decision_power_error):
            _remove_matching(metric, device=device_id)

    def job_moved(self, job_id: str, workload: str, stage: str, t_s: float) -> None:
        """An active job moved on at ``t_s`` (Unix time) in ``stage``; the series of its earlier stage goes.

        Called with every progress report of every running job: O(1), the job's one series is remembered by its
        labels (walking every series of the metric to find it cost 18% of a busy controller with 100 jobs)."""
        labels = (job_id, workload, stage)
        before = self._job_stage.get(job_id)
        if before != labels:
            if before is not None:
                _remove(self.job_last_progress, *before)
            self._job_stage[job_id] = labels
        self.job_last_progress.labels(*labels).set(t_s)

    def job_inactive(self, job_id: str, *, ended: bool) -> None:
        """A job waits in the queue (nothing to stall) or ``ended``: its progress timestamp goes, and once it
        ended, its live power series too (a finished job draws nothing)."""
        self._drop_stage(job_id)
        if ended:
            self.drop_job_power(job_id)

    def _drop_stage(self, job_id: str) -> None:
        before = self._job_stage.pop(job_id, None)
        if before is not None:
            _remove(self.job_last_progress, *before)

    def drop_job_power(self, job_id: str) -> None:
        """Remove a job's power series (it ended, or moved to another board)."""
        for metric in (self.job_power, self.job_budget, self.job_power_upper):
            _remove_matching(metric, job_id=job_id)

    def job_power_now(self, job_id: str, device: str, *, observed_w: float | None, budget_w: float | None,
                      upper_w: float | None) -> None:
        """A running job's power on ``device``: observed (its last full window), its budget and the predicted upper
        bound of its mode, each where it has one."""
        for metric, value in ((self.job_power, observed_w), (self.job_budget, budget_w), (self.job_power_upper, upper_w)):
            if value is not None:
                metric.labels(job_id, device).set(value)

    def job_ended(self, job_id: str) -> None:
        """A job reached a terminal state (done, failed, cancelled): every series naming it goes — its progress,
        power, progress timestamp and inference streams — so an ended job stops being exported (dashboards show
        its history from Prometheus's storage)."""
        _remove_matching(self.job_progress, job_id=job_id)   # once per job: walking the series is fine here
        self._drop_stage(job_id)
        self.drop_job_power(job_id)
        self.inference.forget(job_id)


def _remove(metric: Gauge | Counter, *labels: str) -> None:
    metric.remove(*labels)   # a label set that is not there is no error


def _remove_matching(metric: Gauge | Counter, **match: str) -> None:
    """Remove every series of ``metric`` (a gauge or counter) whose labels include ``match``; found through the
    public collect(), whose samples carry the label values in the metric's label order."""
    series = {tuple(s.labels.values()) for m in metric.collect() for s in m.samples
              if all(s.labels.get(k) == v for k, v in match.items())}
    for values in series:
        _remove(metric, *values)


@dataclass(eq=False)
class BoardSeries:
    """One board's telemetry series, moved by the event loop with every batch (plain attributes, no lock: a scrape
    reads each number whole) and read by ``TelemetrySeries.collect`` in the metrics server's thread."""

    model: str
    created: float                 # Unix time of the board's first batch (the counters' _created)
    power_w: float | None = None   # the newest sample's board power; None while the board is offline
    samples: int = 0
    dropped: int = 0


class TelemetrySeries(Collector):
    """Per-board telemetry: ``jetfleet_board_power_watts`` (online boards only), ``jetfleet_telemetry_samples_total``
    and ``jetfleet_telemetry_dropped_samples_total`` (from a board's first batch, at 0, until it is forgotten).

    These move with every batch of every board (thousands a second); a labelled child per update costs more
    than the rest of a batch's handling (a label lookup under a lock, a lock per set/inc), so the numbers are
    attributes of one object per board and become series only when Prometheus scrapes."""

    def __init__(self) -> None:
        self.boards: dict[str, BoardSeries] = {}

    def board(self, device_id: str, board_model: str) -> BoardSeries:
        """The board's series (created at its first batch)."""
        series = self.boards.get(device_id)
        if series is None:
            series = self.boards[device_id] = BoardSeries(board_model, time.time())
        else:
            series.model = board_model
        return series

    def offline(self, device_id: str) -> None:
        """The board went offline: its power series goes (a dead board reports nothing); its counters stay."""
        series = self.boards.get(device_id)
        if series is not None:
            series.power_w = None

    def forget(self, device_id: str) -> None:
        """The board was forgotten: every series naming it goes."""
        self.boards.pop(device_id, None)

    def describe(self) -> Iterator[Metric]:
        """The three families' names and types (for the registry's duplicate check), without samples."""
        return iter(self._families())

    def _families(self) -> tuple[GaugeMetricFamily, CounterMetricFamily, CounterMetricFamily]:
        return (GaugeMetricFamily("jetfleet_board_power_watts", "Board power relayed from telemetry (online boards)",
                                  labels=["device", "board_model"]),
                CounterMetricFamily("jetfleet_telemetry_samples", "Telemetry samples ingested, per board",
                                    labels=["device"]),
                CounterMetricFamily("jetfleet_telemetry_dropped_samples", "Samples a board's agent dropped from its "
                                    "bounded buffer", labels=["device"]))

    def collect(self) -> Iterator[Metric]:
        """Every board's series as they stand now."""
        power, samples, dropped = self._families()
        for device_id, s in list(self.boards.items()):   # one C-level copy: the event loop may add a board meanwhile
            w = s.power_w
            if w is not None:
                power.add_metric([device_id, s.model], w)
            samples.add_metric([device_id], s.samples, created=s.created)
            dropped.add_metric([device_id], s.dropped, created=s.created)
        yield power
        yield samples
        yield dropped


class InferenceCollector(Collector):
    """Jobs' inference streams (issue 15): ``jetfleet_inference_latency_seconds`` (a histogram of request latency
    by job and board, from the latency buckets each progress report carries) and
    ``jetfleet_inference_requests_total`` (served, late, dropped). Cumulative over a job's life; they go when it
    ends (``forget``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hist: dict[tuple[str, str], tuple[list[int], float]] = {}   # (job, device) -> (bucket counts, sum)
        self._requests: dict[tuple[str, str, str], int] = {}             # (job, device, outcome) -> count

    def observe(self, job_id: str, device: str, buckets: Sequence[int], sum_s: float) -> None:
        """Requests served since a board's last report, per latency bucket (+Inf last), and their summed latency."""
        if len(buckets) != len(INFERENCE_LATENCY_BUCKETS_S) + 1:
            return   # a board with other buckets: nothing to add up
        with self._lock:
            counts, total = self._hist.get((job_id, device), ([0] * len(buckets), 0.0))
            self._hist[(job_id, device)] = ([a + int(b) for a, b in zip(counts, buckets)], total + float(sum_s))

    def count(self, job_id: str, device: str, outcome: str, n: int) -> None:
        """Add ``n`` requests of ``outcome`` (served, late, dropped); the series exists from the first report, at 0."""
        with self._lock:
            key = (job_id, device, outcome)
            self._requests[key] = self._requests.get(key, 0) + max(0, int(n))

    def forget(self, job_id: str) -> None:
        """Drop an ended job's series."""
        with self._lock:
            for key in [k for k in self._hist if k[0] == job_id]:
                del self._hist[key]
            for rkey in [k for k in self._requests if k[0] == job_id]:
                del self._requests[rkey]

    def collect(self) -> Iterator[Metric]:
        """The two families."""
        hist = HistogramMetricFamily("jetfleet_inference_latency_seconds", "Request latency of jobs' inference "
                                     "streams (queueing + batching + execution)", labels=["job_id", "device"])
        req = CounterMetricFamily("jetfleet_inference_requests", "Requests of jobs' inference streams, by outcome "
                                  "(served; late: served over the latency budget; dropped)",
                                  labels=["job_id", "device", "outcome"])
        with self._lock:
            for (job, dev), (counts, total) in self._hist.items():
                cum, acc = [], 0
                for bound, c in zip([*map(str, INFERENCE_LATENCY_BUCKETS_S), "+Inf"], counts):
                    acc += c
                    cum.append((bound, float(acc)))
                hist.add_metric([job, dev], cum, total)
            for (job, dev, outcome), n in self._requests.items():
                req.add_metric([job, dev, outcome], float(n))
        yield hist
        yield req
