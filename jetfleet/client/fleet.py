"""The lab as one power budget: caps (lab-wide or per rack group) and the plan under them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jetfleet.shared.proto import operator_pb2


@dataclass(frozen=True)
class FleetBoard:
    """A board under a cap: its group, last power, the job on it (if any), its mode and predicted power."""

    device_id: str
    model: str
    group: str
    online: bool
    power_w: float
    job_id: str
    workload: str
    mode: str
    predicted_w: float

    def to_dict(self) -> dict[str, Any]:
        """As `fleet plan --output json` prints it."""
        return dict(vars(self))


@dataclass(frozen=True)
class FleetCap:
    """A cap: the group it covers ('' = the lab), watts, the boards' summed power (idle ones included), their idle
    power, headroom (cap - power), the predicted sum (running jobs' upper bounds, the others' power), boards."""

    group: str
    cap_w: float
    power_w: float
    idle_w: float
    headroom_w: float
    predicted_w: float
    boards: list[FleetBoard]

    @classmethod
    def from_pb(cls, c: operator_pb2.FleetCap) -> FleetCap:
        """From the wire message."""
        return cls(c.group, c.cap_w, c.power_w, c.idle_w, c.headroom_w, c.predicted_w,
                   [FleetBoard(b.device_id, b.model, b.group, b.online, b.power_w, b.job_id, b.workload, b.mode,
                               b.predicted_w) for b in c.boards])

    def to_dict(self) -> dict[str, Any]:
        """As `fleet plan --output json` prints it."""
        d = {k: v for k, v in vars(self).items() if k != "boards"}
        d["group"] = self.group or "lab"
        d["boards"] = [b.to_dict() for b in self.boards]
        return d


def _caps(plan: operator_pb2.FleetPlan) -> list[FleetCap]:
    return [FleetCap.from_pb(c) for c in plan.caps]


class FleetMethods:
    """Caps: ``set_fleet_cap``, ``clear_fleet_cap``, ``fleet_plan``."""

    _unary: Any

    def set_fleet_cap(self, cap_w: float, group: str = "") -> list[FleetCap]:
        """Cap the lab (``group`` '') or the boards labelled rack=GROUP at ``cap_w`` watts; refused below their idle
        power or for a group matching no board. Returns the plan under that cap."""
        return _caps(self._unary("SetFleetCap", operator_pb2.SetFleetCapRequest(cap_w=cap_w, group=group)))

    def clear_fleet_cap(self, group: str = "") -> list[FleetCap]:
        """Remove a cap (NotFound if there is none); returns the remaining caps' plan."""
        return _caps(self._unary("ClearFleetCap", operator_pb2.ClearFleetCapRequest(group=group)))

    def fleet_plan(self, group: str = "") -> list[FleetCap]:
        """Every cap (or one group's) with its boards, jobs, observed and predicted power and headroom."""
        return _caps(self._unary("GetFleetPlan", operator_pb2.GetFleetPlanRequest(group=group)))
