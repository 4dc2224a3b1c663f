"""Jittered exponential backoff ("full jitter"): reconnecting agents spread out instead of
arriving at a restarted controller all at once; and the wait a controller admitting agents asks for, honoured
with jitter on top."""

from __future__ import annotations

import random


def backoff_delay_s(attempt: int, *, base_s: float, max_s: float, rng: random.Random) -> float:
    """A delay drawn uniformly from [0, min(max_s, base_s * 2**attempt)]."""
    return rng.uniform(0.0, min(max_s, base_s * (2 ** min(attempt, 30))))


ADMISSION_JITTER = 1.0   # a told wait w is taken as w x (1 + up to this): never sooner than told


def admission_delay_s(told_s: float, rng: random.Random) -> float:
    """The wait before dialling a controller again that said to wait ``told_s``: at least that, up to twice it,
    drawn uniformly (agents told the same wait at the same moment come back spread over it)."""
    return told_s * (1.0 + rng.uniform(0.0, ADMISSION_JITTER))
