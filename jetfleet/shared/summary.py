"""Window statistics of a measured run: per-minibatch time statistics, mean power, energy per
minibatch. The agent's profiler, the twin and the controller summarise windows the same way."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Summary:
    """The statistics of one window of minibatches and the power samples taken over it."""

    minibatches: int
    minibatch_time_median_ms: float
    minibatch_time_mean_ms: float
    minibatch_time_p5_ms: float
    minibatch_time_p95_ms: float
    power_mean_w: float                 # NaN when the window holds no power sample
    energy_per_minibatch_j: float
    power_samples: int

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (for JSON output)."""
        return asdict(self)


def _pct(sorted_values: Sequence[float], q: float) -> float:
    k = (len(sorted_values) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


def summarise(times_s: Sequence[float], power_w: Sequence[float]) -> Summary:
    """Summarise minibatch times (s) and the board power samples (W) taken over the same window."""
    if not times_s:
        raise ValueError("no minibatches to summarise")
    ms = sorted(t * 1e3 for t in times_s)
    mean_w = statistics.fmean(power_w) if power_w else float("nan")
    mean_ms = statistics.fmean(ms)
    return Summary(len(ms), statistics.median(ms), mean_ms, _pct(ms, 0.05), _pct(ms, 0.95), mean_w,
                   mean_w * mean_ms / 1e3, len(power_w))
