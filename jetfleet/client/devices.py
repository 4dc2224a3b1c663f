"""Boards: list, show, forget, set a mode, watch telemetry."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from jetfleet.shared.catalog import PowerMode
from jetfleet.shared.convert import mode_from_pb
from jetfleet.shared.proto import common_pb2, operator_pb2

V = TypeVar("V")


def speed_text(speed: float, emulated: bool) -> str:
    """How fast a board's clock runs, in words: ``real time`` (a real board), ``instant``, ``100x``, ``?``."""
    if not emulated:
        return "real time"
    if speed <= 0 or math.isnan(speed):
        return "?"          # an agent older than the speed field
    if math.isinf(speed):
        return "instant"
    return "1x (real time)" if speed == 1 else f"{speed:g}x"


def _plain(m: Mapping[str, V]) -> dict[str, V]:
    """A protobuf map as a dict: the map's own iterator and lookups (``dict(m)`` went through the Python-level
    ``Mapping.keys`` view, a third of `devices ls`' conversion over 1,000 boards)."""
    return {k: m[k] for k in m}


@dataclass(frozen=True)
class TelemetrySample:
    """One reading of a board's sensors: board clock (s since the epoch), power per rail and total (W), clocks
    (MHz), online cores, temperatures (°C) and utilisation (0..1)."""

    t_s: float
    total_w: float
    rails_w: dict[str, float]
    cpu_mhz: float
    gpu_mhz: float
    mem_mhz: float
    cores_online: int = 0
    temps_c: dict[str, float] = field(default_factory=dict)
    cpu_util: float = 0.0
    gpu_util: float = 0.0

    @classmethod
    def from_pb(cls, s: common_pb2.TelemetrySample) -> TelemetrySample:
        """From the wire message."""
        return cls(s.t_s, s.total_w, _plain(s.rails_w), s.cpu_mhz, s.gpu_mhz, s.mem_mhz, s.cores_online,
                   _plain(s.temps_c), s.cpu_util, s.gpu_util)

    def to_dict(self) -> dict[str, Any]:
        """As `telemetry watch --output json` prints it (one object per line)."""
        return {"t_s": self.t_s, "total_w": self.total_w, "rails_w": self.rails_w, "cpu_mhz": self.cpu_mhz,
                "gpu_mhz": self.gpu_mhz, "mem_mhz": self.mem_mhz, "cores_online": self.cores_online,
                "temps_c": self.temps_c}


@dataclass(frozen=True)
class CatalogSummary:
    """A board's power-mode catalog in brief: its size, knob values, preset names (with their modes) and rails."""

    modes: int
    cores: list[int]
    cpu_mhz: list[float]
    gpu_mhz: list[float]
    mem_mhz: list[float]
    presets: dict[str, PowerMode]
    rails: list[str]

    @classmethod
    def from_pb(cls, c: common_pb2.Catalog) -> CatalogSummary:
        """From the wire message."""
        return cls(len(c.cores) * len(c.cpu_mhz) * len(c.gpu_mhz) * len(c.mem_mhz), list(c.cores), list(c.cpu_mhz),
                   list(c.gpu_mhz), list(c.mem_mhz), {k: mode_from_pb(v) for k, v in sorted(c.presets.items())},
                   [r.label for r in c.rails])


@dataclass(frozen=True)
class Device:
    """A board the controller knows: identity, online state, the mode it runs, its last sample, how fast its clock
    runs (``speed``: 1 real time, ``math.inf`` instant), and (``get_device`` only) its catalog."""

    device_id: str
    model: str
    online: bool
    current_mode: PowerMode | None     # str() gives CORES/CPU/GPU/MEM
    current_mode_name: str | None
    serial: str
    emulated: bool
    speed: float
    last_seen_s: float
    first_seen_s: float
    software: dict[str, str]
    workloads: list[str]
    broken_workloads: dict[str, str]
    metrics_address: str
    last_telemetry: TelemetrySample | None = None
    catalog: CatalogSummary | None = None
    labels: dict[str, str] = field(default_factory=dict)   # operator labels (rack=GROUP: the board's cap group)
    held_by: str = ""        # who holds the board's lease (a job, a campaign, ...): it does one thing at a time
    busy_command: str = ""   # the command its last heartbeat said it runs
    templates: dict[str, list[str]] = field(default_factory=dict)   # job templates its agent launches: their args
    # the args with a rule, per template: arg -> its rule as the agent said it ("int 1..1000", "one of sgd|adam")
    template_rules: dict[str, dict[str, str]] = field(default_factory=dict)

    @classmethod
    def from_pb(cls, d: operator_pb2.Device) -> Device:
        """From the wire message."""
        return cls(d.device_id, d.model, d.online, mode_from_pb(d.current_mode) if d.HasField("current_mode") else None,
                   d.current_mode_name or None, d.serial, d.emulated, d.speed if d.emulated else 1.0, d.last_seen_s,
                   d.first_seen_s, _plain(d.software), list(d.workloads), _plain(d.broken_workloads), d.metrics_address,
                   TelemetrySample.from_pb(d.last_telemetry) if d.HasField("last_telemetry") else None,
                   CatalogSummary.from_pb(d.catalog) if d.HasField("catalog") else None, _plain(d.labels), d.held_by,
                   d.busy_command, {t.name: list(t.args) for t in d.templates},
                   {t.name: {a: r for a, r in zip(t.args, t.arg_rules) if r} for t in d.templates if any(t.arg_rules)})

    @property
    def power_w(self) -> float | None:
        """The board's total power in its last sample, if there is one."""
        return self.last_telemetry.total_w if self.last_telemetry else None

    @property
    def speed_text(self) -> str:
        """``real time``, ``instant``, ``100x`` (see ``speed_text``)."""
        return speed_text(self.speed, self.emulated)

    def to_dict(self) -> dict[str, Any]:
        """As `devices ls/show --output json` print it. ``speed_factor`` is board seconds per wall second (1 on a
        real board), null for an instant (or unreported) emulated board; ``speed`` says it in words."""
        out: dict[str, Any] = {
            "device_id": self.device_id, "model": self.model, "online": self.online,
            "current_mode": str(self.current_mode) if self.current_mode else None,
            "current_mode_name": self.current_mode_name, "serial": self.serial, "emulated": self.emulated,
            "speed": self.speed_text, "speed_factor": self.speed if 0 < self.speed < math.inf else None,
            "last_seen_s": self.last_seen_s, "first_seen_s": self.first_seen_s, "software": self.software,
            "workloads": self.workloads, "broken_workloads": self.broken_workloads,
            "metrics_address": self.metrics_address or None, "labels": dict(sorted(self.labels.items())),
            "held_by": self.held_by or None, "busy_command": self.busy_command or None,
            "templates": self.templates, "template_rules": self.template_rules}
        if self.last_telemetry is not None:
            out["power_w"] = round(self.last_telemetry.total_w, 3)
            out["rails_w"] = {k: round(v, 3) for k, v in sorted(self.last_telemetry.rails_w.items())}
        if self.catalog is not None:
            c = self.catalog
            out["catalog"] = {"modes": c.modes, "presets": sorted(c.presets), "rails": c.rails, "cores": c.cores,
                              "cpu_mhz": c.cpu_mhz, "gpu_mhz": c.gpu_mhz, "mem_mhz": c.mem_mhz}
        return out


@dataclass(frozen=True)
class SetModeResult:
    """What a board confirmed after a mode change, the command's id and how long it took."""

    device_id: str
    requested: PowerMode
    confirmed: PowerMode
    command_id: str
    latency_s: float

    @classmethod
    def from_pb(cls, r: operator_pb2.SetModeResponse) -> SetModeResult:
        """From the wire message."""
        return cls(r.device_id, mode_from_pb(r.requested), mode_from_pb(r.confirmed), r.command_id, r.latency_s)

    def to_dict(self) -> dict[str, Any]:
        """As `mode set --output json` prints it."""
        return {"device_id": self.device_id, "requested": str(self.requested), "confirmed": str(self.confirmed),
                "command_id": self.command_id, "latency_ms": round(self.latency_s * 1e3, 2)}


SERVER_COMMAND_TIMEOUT_S = 30.0     # what the controller waits for a board when the request gives no timeout


class DeviceMethods:
    """Boards: ``list_devices``, ``get_device``, ``set_mode``, ``watch_telemetry``, ``forget_device``."""

    _unary: Any
    _stream: Any

    def list_devices(self, model: str = "") -> list[Device]:
        """Every board the controller knows (of board model ``model`` if given)."""
        resp = self._unary("ListDevices", operator_pb2.ListDevicesRequest(model=model))
        return [Device.from_pb(d) for d in resp.devices]

    def get_device(self, device_id: str) -> Device:
        """One board in detail, its catalog included; NotFound if the controller does not know it."""
        return Device.from_pb(self._unary("GetDevice", operator_pb2.GetDeviceRequest(device_id=device_id)))

    def set_mode(self, device_id: str, mode: str, *, request_id: str = "", timeout_s: float = 30.0) -> SetModeResult:
        """Set a board's mode (``CORES/CPU/GPU/MEM`` in MHz, or a preset name) and return what it confirmed; a retry
        with the same ``request_id`` does not repeat it. ``timeout_s`` 0 means the controller's default (30 s)."""
        req = operator_pb2.SetModeRequest(device_id=device_id, mode=mode, request_id=request_id, timeout_s=timeout_s)
        return SetModeResult.from_pb(self._unary("SetMode", req, (timeout_s or SERVER_COMMAND_TIMEOUT_S) + 5))

    def label_device(self, device_id: str, labels: dict[str, str]) -> Device:
        """Add or replace a board's labels (an empty value removes one); ``rack=GROUP`` puts it in a cap group."""
        return Device.from_pb(self._unary("SetDeviceLabels", operator_pb2.SetDeviceLabelsRequest(
            device_id=device_id, labels=labels)))

    def forget_device(self, device_id: str) -> str:
        """Remove an offline board and its history; returns its id (FailedPrecondition while it is online)."""
        return str(self._unary("ForgetDevice", operator_pb2.ForgetDeviceRequest(device_id=device_id)).device_id)

    def watch_telemetry(self, device_id: str, max_samples: int = 0, timeout_s: float = 0.0) -> Iterator[TelemetrySample]:
        """A board's live samples as they arrive, up to ``max_samples`` (0: until the caller stops iterating).

        Unavailable when the board is or goes offline; DeadlineExceeded when no sample comes for ``timeout_s``
        (0: the controller's 10 s)."""
        req = operator_pb2.WatchTelemetryRequest(device_id=device_id, max_samples=max_samples, timeout_s=timeout_s)
        for s in self._stream("WatchTelemetry", req):
            yield TelemetrySample.from_pb(s)

    watch = watch_telemetry
