"""Jittered exponential backoff ("full jitter"): reconnecting agents spread out instead of
arriving at a restarted controller all at once."""

from __future__ import annotations

import random


def backoff_delay_s(attempt: int, *, base_s: float, max_s: float, rng: random.Random) -> float:
    """A delay drawn uniformly from [0, min(max_s, base_s * 2**attempt)]."""
    return rng.uniform(0.0, min(max_s, base_s * (2 ** min(attempt, 30))))
