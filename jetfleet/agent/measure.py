"""Summaries of a measured run: per-minibatch time statistics, mean power, energy per minibatch."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from jetfleet.agent.device.base import RunResult, TelemetrySample
from jetfleet.shared.catalog import PowerMode

if TYPE_CHECKING:  # the controller imports summarise(); it needs no twin
    from jetfleet.agent.device.emulated import EmulatedBoard


@dataclass(frozen=True)
class Summary:
    minibatches: int
    minibatch_time_median_ms: float
    minibatch_time_mean_ms: float
    minibatch_time_p5_ms: float
    minibatch_time_p95_ms: float
    power_mean_w: float
    energy_per_minibatch_j: float
    power_samples: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _pct(sorted_values: Sequence[float], q: float) -> float:
    k = (len(sorted_values) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


def summarise(times_s: Sequence[float], power: Sequence[TelemetrySample]) -> Summary:
    if not times_s:
        raise ValueError("no minibatches to summarise")
    ms = sorted(t * 1e3 for t in times_s)
    mean_w = statistics.fmean(s.total_w for s in power) if power else float("nan")
    mean_ms = statistics.fmean(ms)
    return Summary(len(ms), statistics.median(ms), mean_ms, _pct(ms, 0.05), _pct(ms, 0.95), mean_w,
                   mean_w * mean_ms / 1e3, len(power))


@dataclass(frozen=True)
class Measurement:
    mode: PowerMode
    run: RunResult
    power: list[TelemetrySample]
    summary: Summary


def measure_on_twin(board: EmulatedBoard, workload: str, mode: PowerMode, minibatches: int = 40, *,
                    minibatch_size: int = 16, workers: int = 4, skip: int = 5,
                    sample_period_s: float = 0.1) -> Measurement:
    """Apply ``mode``, run ``skip + minibatches`` minibatches and keep the last ``minibatches`` with
    the power samples a 100 ms sampler would have taken over them (warm-up excluded)."""
    board.apply_mode(mode)
    run = board.run_minibatches(workload, skip + minibatches, minibatch_size=minibatch_size, workers=workers)
    kept = run.minibatch_times_s[skip:]
    t0 = run.start_s + sum(run.minibatch_times_s[:skip])
    power = board.trace(t0, run.end_s, sample_period_s)
    return Measurement(mode, run, power, summarise(kept, power))
