"""The controller's Prometheus metrics, on a registry of their own (no module-level singletons)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class ControllerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.agents = Gauge("jetfleet_agents", "Known boards by model and state", ["board_model", "state"], registry=r)
        self.telemetry_samples = Counter("jetfleet_telemetry_samples_total", "Telemetry samples ingested",
                                         registry=r)
        self.telemetry_dropped = Counter("jetfleet_telemetry_dropped_samples_total",
                                         "Samples agents dropped from their bounded buffers", registry=r)
        self.rejected = Counter("jetfleet_agent_messages_rejected_total", "Agent messages refused", ["reason"],
                                registry=r)
        self.commands = Counter("jetfleet_commands_total", "Commands sent to boards", ["type", "outcome"], registry=r)
        self.command_latency = Histogram("jetfleet_command_duration_seconds", "Command round trip", ["type"],
                                         buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
                                         registry=r)
        self.campaign_modes = Counter("jetfleet_campaign_modes_total", "Campaign modes by outcome (measured, "
                                      "duplicate, retried, failed)", ["workload", "outcome"], registry=r)
        self.campaign_remaining = Gauge("jetfleet_campaign_modes_remaining", "Modes left to measure",
                                        ["campaign", "workload"], registry=r)
        self.model_seconds = Histogram("jetfleet_model_training_seconds", "Reference training and transfer time",
                                       ["kind"], buckets=(0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600), registry=r)
        self.decision = Gauge("jetfleet_decision_value", "Last applied decision per board: minibatch time (s) or "
                              "power (W), predicted and observed", ["device", "quantity", "source"], registry=r)
        self.decision_error = Gauge("jetfleet_decision_error_ratio", "Last applied decision: predicted / observed",
                                    ["device", "quantity"], registry=r)
        self.board_power = Gauge("jetfleet_board_power_watts", "Board power relayed from telemetry",
                                 ["device", "board_model"], registry=r)
