"""Which k modes to profile. Besides PowerTrain's random choice:

- ``spread``: greedy max-min distance in the standardised knob space (covers the corners and
  the middle evenly, where random picks cluster);
- ``uncertain``: start from a spread half, then repeatedly add the modes where the transferred
  model's Monte-Carlo-dropout spread is widest (profiling where the model is least sure).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from jetfleet.shared.errors import InvalidArgument

STRATEGIES = ("random", "spread", "uncertain")


def pick_random(x: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    return rng.choice(len(x), size=k, replace=False)


def pick_spread(x: np.ndarray, k: int, rng: np.random.Generator, start: np.ndarray | None = None) -> np.ndarray:
    z = (x - x.mean(axis=0)) / np.where(x.std(axis=0) > 0, x.std(axis=0), 1)
    chosen = list(start) if start is not None and len(start) else [int(rng.integers(len(x)))]
    dist = np.min(np.linalg.norm(z[:, None, :] - z[None, chosen, :], axis=2), axis=1)
    while len(chosen) < k:
        i = int(np.argmax(dist))
        chosen.append(i)
        dist = np.minimum(dist, np.linalg.norm(z - z[i], axis=1))
    return np.asarray(chosen)


def pick_uncertain(x: np.ndarray, k: int, rng: np.random.Generator,
                   fit_spread: Callable[[np.ndarray], np.ndarray], rounds: int = 3) -> np.ndarray:
    """``fit_spread(indices)`` trains on those modes and returns a per-mode uncertainty for all."""
    chosen = list(pick_spread(x, max(2, k // 2), rng))
    per_round = max(1, (k - len(chosen) + rounds - 1) // rounds)
    while len(chosen) < k:
        spread = fit_spread(np.asarray(chosen))
        spread[chosen] = -np.inf
        add = np.argsort(-spread)[: min(per_round, k - len(chosen))]
        chosen.extend(int(i) for i in add)
    return np.asarray(chosen)


def check_k(k: int, n: int, minimum: int = 5) -> None:
    if not minimum <= k <= n:
        raise InvalidArgument(f"k={k} modes: must be {minimum}..{n} (the catalog's grid)", field="k")
