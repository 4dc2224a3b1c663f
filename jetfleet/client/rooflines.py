"""Pagoda's time and energy rooflines per power mode (issue 16): ``roofline``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jetfleet.shared.convert import mode_from_pb
from jetfleet.shared.proto import operator_pb2


@dataclass(frozen=True)
class ProfiledWorkload:
    """A workload as profiled in a mode (time, energy per minibatch) and what each energy fit says it costs."""

    workload: str
    flops: float
    bytes: float
    time_s: float
    energy_j: float
    profiles: int
    profile_fit_energy_j: float
    bench_fit_energy_j: float

    @classmethod
    def from_pb(cls, p: operator_pb2.ProfiledWorkload) -> ProfiledWorkload:
        """From the API's message."""
        return cls(p.workload, p.flops, p.bytes, p.time_s, p.energy_j, p.profiles, p.profile_fit_energy_j,
                   p.bench_fit_energy_j)


@dataclass(frozen=True)
class RooflinePoint:
    """One mode's rooflines (peak FLOP/s, DRAM bytes/s, the energy constants) and, when a workload was named,
    that workload in the mode: its FLOPs and bytes per minibatch, roofline time T (s) and energy E (J)."""

    mode: str
    mode_name: str
    peak_flops: float
    peak_bytes_per_s: float
    eps_flop_j: float
    eps_byte_j: float
    pi0_w: float
    idle_w: float
    measured_s: float
    device_id: str
    method: str
    workload_flops: float
    workload_bytes: float
    time_s: float
    energy_j: float
    memory_bound: bool
    observed_time_s: float = 0.0      # the workload as profiled in this mode (0: no stored profile)
    observed_energy_j: float = 0.0
    observed_profiles: int = 0
    # profile_fit=True: the energy constants fitted from the mode's profiled workloads, both fits' MAPE of E there
    profile_eps_flop_j: float = 0.0
    profile_eps_byte_j: float = 0.0
    profile_pi0_w: float = 0.0
    profile_fit_mape: float = 0.0
    bench_fit_mape: float = 0.0
    profile_energy_j: float = 0.0
    profiled: tuple[ProfiledWorkload, ...] = ()

    @property
    def ridge(self) -> float:
        """The arithmetic intensity (FLOPs per byte) where the roof turns from bandwidth to compute."""
        return self.peak_flops / self.peak_bytes_per_s

    @classmethod
    def from_pb(cls, p: operator_pb2.RooflinePoint) -> RooflinePoint:
        """From the API's message."""
        return cls(str(mode_from_pb(p.mode)), p.mode_name, p.peak_flops, p.peak_bytes_per_s, p.eps_flop_j,
                   p.eps_byte_j, p.pi0_w, p.idle_w, p.measured_s, p.device_id, p.method, p.workload_flops,
                   p.workload_bytes, p.time_s, p.energy_j, p.memory_bound, p.observed_time_s, p.observed_energy_j,
                   p.observed_profiles, p.profile_eps_flop_j, p.profile_eps_byte_j, p.profile_pi0_w,
                   p.profile_fit_mape, p.bench_fit_mape, p.profile_energy_j,
                   tuple(ProfiledWorkload.from_pb(x) for x in p.profiled))

    def to_dict(self) -> dict[str, Any]:
        """The fields (and the ridge point) as a plain dict, for JSON output."""
        return {**self.__dict__, "profiled": [x.__dict__ for x in self.profiled], "ridge": self.ridge}


@dataclass(frozen=True)
class Rooflines:
    """A board model's rooflines per mode, with a workload placed on them (``workload`` '' when none)."""

    board_model: str
    workload: str
    phase: str
    minibatch_size: int
    intensity: float           # the workload's FLOPs per byte
    measured: int              # modes this call measured
    points: list[RooflinePoint]

    def to_dict(self) -> dict[str, Any]:
        """The whole answer as a plain dict, for JSON output."""
        return {"board_model": self.board_model, "workload": self.workload, "phase": self.phase,
                "minibatch_size": self.minibatch_size, "intensity": self.intensity, "measured": self.measured,
                "points": [p.to_dict() for p in self.points]}


class RooflineMethods:
    """Rooflines: ``roofline``."""

    _unary: Any

    def roofline(self, board_model: str, *, workload: str = "", modes: list[str] | None = None, measure: bool = False,
                 device_id: str = "", seconds: float = 0.0, minibatch_size: int = 0,
                 phase: str = "training", remeasure: bool = False, profile_fit: bool = False) -> Rooflines:
        """The stored rooflines of ``modes`` (all stored ones when None) of ``board_model``; ``measure``: measure
        the missing ones first on ``device_id`` (or any online board of the model), ``seconds`` per kernel;
        ``remeasure``: measure the named modes again, replacing the stored ones; ``profile_fit``: also fit each mode's
        energy constants from the stored profiles of the workloads profiled there (>= 3, else FailedPrecondition
        naming the modes and their counts)."""
        req = operator_pb2.RooflineRequest(board_model=board_model, workload=workload, modes=list(modes or []),
                                           measure=measure, device_id=device_id, seconds=seconds,
                                           minibatch_size=minibatch_size, phase=phase, remeasure=remeasure,
                                           profile_fit=profile_fit)
        r = self._unary("Roofline", req, 3600)
        return Rooflines(r.board_model, r.workload, r.phase, r.minibatch_size, r.intensity, r.measured,
                         [RooflinePoint.from_pb(p) for p in r.points])
