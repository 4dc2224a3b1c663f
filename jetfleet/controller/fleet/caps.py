"""Lab-wide and per-group power caps and board labels: stored (documents in either backend), checked against
the boards' idle power, shown as a plan (board -> job -> mode, predicted and observed power, headroom) and
exported as ``jetfleet_fleet_cap_watts`` / ``jetfleet_fleet_power_watts`` (computed at each scrape).
A group is the boards labelled ``rack=GROUP``; the lab-wide cap (group '') covers every board."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily

from jetfleet.shared.errors import InvalidArgument, NotFound
from jetfleet.shared.proto import operator_pb2
from jetfleet.shared.quantity import check_cap_w

if TYPE_CHECKING:
    from jetfleet.controller.registry import Registry
    from jetfleet.controller.store import JobRecord
    from jetfleet.controller.telemetry import TelemetryHub

CAP_KIND, LABEL_KIND = "fleet_cap", "device_labels"
GROUP_LABEL = "rack"
LAB = "lab"                    # the lab-wide cap's document id and metric label
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
MAX_LABELS = 16


@dataclass(frozen=True)
class BoardView:
    """A board as the caps see it, taken on the event loop: model, online, last total power, idle power (W)."""

    device_id: str
    model: str
    online: bool
    power_w: float
    idle_w: float


class FleetCaps:
    """Caps and labels over the registry's boards (this module's docstring). ``refresh`` runs on the event loop
    (it reads the registry and the telemetry windows); everything else reads its snapshot and the store, so it may
    run in a worker thread or in a metrics scrape."""

    def __init__(self, registry: Registry, telemetry: TelemetryHub) -> None:
        self.registry, self.telemetry = registry, telemetry
        self.store = registry.store
        self._idle: dict[str, float] = {}    # board -> the lowest total power it has shown (its idle, or above)
        self._views: dict[str, BoardView] = {}
        # Labels and caps are read on every `devices ls` and scrape: held here (written through to the store, loaded
        # at start and when a standby takes the lead) so that those keep answering while the store is unavailable.
        self._labels: dict[str, dict[str, str]] = {}
        self._caps: dict[str, float] = {}
        self.load()

    def load(self) -> None:
        """Read the labels and caps from the store (at start, and when this controller takes the lead)."""
        self._labels = {str(d["device_id"]): dict(d.get("labels", {})) for d in self.store.list_docs(LABEL_KIND)}
        self._caps = {str(d["group"]): float(d["cap_w"]) for d in self.store.list_docs(CAP_KIND)}

    def refresh(self) -> dict[str, BoardView]:
        """Snapshot every known board (event loop only): its power now and the lowest it has shown."""
        views = {}
        for d in self.registry.list():
            dev = d.record.device_id
            low = self.telemetry.lowest_w(dev)   # kept at ingest: no window is expanded here, once a tick per board
            if low < self._idle.get(dev, math.inf):
                self._idle[dev] = low
            last_w = self.telemetry.last_w(dev)
            views[dev] = BoardView(dev, d.record.model, d.online, last_w if last_w is not None and d.online else 0.0,
                                   self.idle_w(dev))
        self._views = views
        return views

    # --- labels -------------------------------------------------------------------------------------------
    def labels(self, device_id: str) -> dict[str, str]:
        """A board's labels (none when it has none)."""
        return dict(self._labels.get(device_id, {}))

    def all_labels(self) -> Mapping[str, Mapping[str, str]]:
        """Every labelled board's labels as held (not copied: `devices ls` reads 1,000 a call). A change replaces
        a board's mapping, never edits it, so a caller may keep one to see whether it changed. Read only."""
        return MappingProxyType(self._labels)

    def set_labels(self, device_id: str, changes: dict[str, str]) -> dict[str, str]:
        """Add or replace labels (an empty value removes one); every key and value checked before any is kept."""
        self.registry.get(device_id)   # NotFound for an unknown board
        for k, v in changes.items():
            if not _NAME.match(k):
                raise InvalidArgument(f"label key {k[:64]!r}: letters, digits, '_', '.', '-', at most 63", field="labels")
            if v and not _NAME.match(v):
                raise InvalidArgument(f"label {k}={v[:64]!r}: the value must be letters, digits, '_', '.', '-', "
                                      "at most 63 (empty removes it)", field="labels")
        labels = self.labels(device_id)
        for k, v in changes.items():
            if v:
                labels[k] = v
            else:
                labels.pop(k, None)
        if len(labels) > MAX_LABELS:
            raise InvalidArgument(f"{len(labels)} labels: at most {MAX_LABELS} per board", field="labels")
        self.store.put_doc(LABEL_KIND, device_id, {"device_id": device_id, "labels": labels})
        self._labels[device_id] = dict(labels)
        return labels

    # --- caps ----------------------------------------------------------------------------------------------
    def members(self, group: str) -> list[str]:
        """The boards a cap covers: every known board (group ''), or those labelled rack=GROUP."""
        ids = list(self._views)
        return ids if not group else [i for i in ids if self.labels(i).get(GROUP_LABEL) == group]

    def idle_w(self, device_id: str) -> float:
        """What a board draws idle: the lowest total power it has shown this controller (0 when it sent none)."""
        seen = self._idle.get(device_id, math.inf)
        return 0.0 if math.isinf(seen) else seen

    def set_cap(self, cap_w: float, group: str) -> operator_pb2.FleetPlan:
        """Store a cap after checking it: positive, finite, a group that matches a board, not below idle power."""
        if group and not _NAME.match(group):
            raise InvalidArgument(f"group {group[:64]!r}: letters, digits, '_', '.', '-', at most 63", field="group")
        check_cap_w(cap_w)
        members = self.members(group)
        if group and not members:
            raise InvalidArgument(f"group {group!r} matches no board: label boards with "
                                  f"`jetfleet devices label DEVICE {GROUP_LABEL}={group}` first", field="group")
        if not members:
            raise InvalidArgument("the lab has no boards yet: a cap needs boards to cover", field="group")
        idle = sum(self.idle_w(i) for i in members)
        if cap_w < idle:
            raise InvalidArgument(f"cap {cap_w:g} W is below the idle power of {group or 'the lab'} "
                                  f"({len(members)} boards idle at {idle:.1f} W): nothing could ever run",
                                  field="cap_w")
        self.store.put_doc(CAP_KIND, group or LAB, {"group": group, "cap_w": cap_w})
        self._caps[group] = cap_w
        return self.plan(group)

    def clear_cap(self, group: str) -> operator_pb2.FleetPlan:
        """Remove a cap; NotFound when there is none."""
        if group not in self._caps:
            raise NotFound(f"no cap on {group or 'the lab'}", field="group")
        self.store.delete_doc(CAP_KIND, group or LAB)
        del self._caps[group]
        return self.plan()

    def caps(self) -> list[tuple[str, float]]:
        """Every stored cap as (group, watts); group '' is the lab-wide one."""
        return sorted(self._caps.items())

    # --- the plan --------------------------------------------------------------------------------------------
    def plan(self, group: str = "", jobs: Iterable[JobRecord] = (),
             rows: Mapping[str, Mapping[str, object]] | None = None) -> operator_pb2.FleetPlan:
        """Every cap (or one group's): its boards, the ``jobs`` on them (the fleet queue's ``rows`` for its own),
        observed and predicted power, headroom."""
        jobs = sorted(jobs, key=lambda r: r.created_s)
        running = {r.device_id: r for r in jobs if r.state in ("applying", "running")}
        fleet = rows or {}
        out = operator_pb2.FleetPlan(queued_jobs=[r.job_id for r in jobs if r.goal == "fleet" and r.state == "queued"])
        views = self._views
        for g, cap in self.caps():
            if group and g != group:
                continue
            msg = out.caps.add(group=g, cap_w=cap)
            for dev in self.members(g):
                v = views[dev]
                b = msg.boards.add(device_id=dev, model=v.model, group=self.labels(dev).get(GROUP_LABEL, ""),
                                   online=v.online, power_w=v.power_w)
                job = running.get(dev)
                if job is not None:
                    b.job_id, b.workload, b.mode = job.job_id, job.workload, job.mode
                    row = fleet.get(dev)
                    if row is not None and row["job_id"] == job.job_id:   # the queue's current reckoning
                        b.predicted_w = float(row["predicted_w"])  # type: ignore[arg-type]
                    else:
                        b.predicted_w = job.choice.power_hi_w if job.choice is not None else 0.0
                msg.power_w += v.power_w
                msg.idle_w += v.idle_w
                msg.predicted_w += b.predicted_w or v.power_w
            msg.headroom_w = cap - msg.power_w
        return out

    # --- metrics (a collector: computed at each scrape) -------------------------------------------------------
    def collect(self) -> Iterator[GaugeMetricFamily]:
        """The cap and power gauges per group, from the last snapshot (a scrape never touches the event loop's state)."""
        caps = GaugeMetricFamily("jetfleet_fleet_cap_watts", "Power cap of the lab (group=lab) or a rack group",
                                 labels=["group"])
        power = GaugeMetricFamily("jetfleet_fleet_power_watts", "Summed board power under a cap (last telemetry, "
                                  "idle boards included)", labels=["group"])
        for c in self.plan().caps:
            caps.add_metric([c.group or LAB], c.cap_w)
            power.add_metric([c.group or LAB], c.power_w)
        yield caps
        yield power
        # which rack each known board is in, for dashboards to filter the per-board series by (a join on device)
        racks = GaugeMetricFamily("jetfleet_board_rack_info", "1 for every known board, labelled with its rack (the "
                                  "label rack=GROUP; empty: none)", labels=["device", "rack"])
        for dev in list(self.registry.devices):
            racks.add_metric([dev, self._labels.get(dev, {}).get(GROUP_LABEL, "")], 1.0)
        yield racks

    def describe(self) -> list[GaugeMetricFamily]:
        """Nothing up front: the registry collects at each scrape."""
        return []
