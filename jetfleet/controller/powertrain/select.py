"""Which k modes to profile. Besides PowerTrain's random choice:

- ``spread``: greedy max-min distance in the standardised knob space (covers the corners and
  the middle evenly, where random picks cluster);
- ``uncertain``: start from a spread half, then repeatedly add the modes where the transferred
  model is least sure (a small ensemble's disagreement);
- ``balanced``: random, but every knob's values appear equally often (a Latin hypercube over the
  catalog's levels), so no core count or clock is left out or crowded;
- ``active``: a balanced first half; then, from a model transferred on the first half's results,
  the modes that most reduce the model's predictive variance summed over every mode of the catalog
  (integrated-variance design in the transferred network's last hidden layer). Two batches: the
  second is chosen while the first one's last modes are still on the boards.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from jetfleet.shared.errors import InvalidArgument

STRATEGIES = ("random", "spread", "uncertain", "balanced", "active")


def pick_random(x: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of k distinct modes drawn at random (PowerTrain's choice)."""
    return rng.choice(len(x), size=k, replace=False)


def pick_spread(x: np.ndarray, k: int, rng: np.random.Generator, start: np.ndarray | None = None) -> np.ndarray:
    """Indices of k modes spread over the standardised knob space, each farthest from those chosen (from ``start``)."""
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
    """Indices of k modes: a spread half, then, over ``rounds`` rounds, the modes the model is least sure of.

    ``fit_spread(indices)`` trains on those modes and returns a per-mode uncertainty for all."""
    chosen = list(pick_spread(x, max(2, k // 2), rng))
    per_round = max(1, (k - len(chosen) + rounds - 1) // rounds)
    while len(chosen) < k:
        spread = fit_spread(np.asarray(chosen))
        spread[chosen] = -np.inf
        add = np.argsort(-spread)[: min(per_round, k - len(chosen))]
        chosen.extend(int(i) for i in add)
    return np.asarray(chosen)


def check_k(k: int, n: int, minimum: int = 5) -> None:
    """Raise InvalidArgument unless ``minimum`` <= k <= n (the modes there are)."""
    if not minimum <= k <= n:
        raise InvalidArgument(f"k={k} modes: must be {minimum}..{n} (the catalog's grid)", field="k")


def pick_balanced(x: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of k distinct modes of ``x`` in which each knob's values appear equally often (+-1), at random."""
    lookup = {tuple(row): i for i, row in enumerate(x.tolist())}
    cols = []
    for j in range(x.shape[1]):
        levels = np.unique(x[:, j])
        cols.append(levels[rng.permutation(np.resize(rng.permutation(len(levels)), k))])
    chosen: list[int] = []
    seen: set[int] = set()
    for row in zip(*(c.tolist() for c in cols), strict=True):
        i = lookup.get(tuple(row))
        if i is not None and i not in seen:
            seen.add(i)
            chosen.append(i)
    while len(chosen) < k:  # a level combination the grid lacks, or drawn twice: fill at random
        i = int(rng.integers(len(x)))
        if i not in seen:
            seen.add(i)
            chosen.append(i)
    return np.asarray(chosen)


def pick_integrated_variance(features: np.ndarray, k: int, fixed: np.ndarray, rng: np.random.Generator,
                             evaluation_points: int = 1500, ridge: float = 1.0) -> np.ndarray:
    """``fixed`` plus modes up to k, each the one whose profile most reduces the summed predictive variance
    of a ridge regression on ``features`` over (a sample of) every mode; returns all k indices."""
    f = (features - features.mean(axis=0)) / (features.std(axis=0) + 1e-6)
    n, d = f.shape
    ev = rng.choice(n, min(evaluation_points, n), replace=False)
    chosen = [int(i) for i in fixed]
    a_inv = np.linalg.inv(ridge * np.eye(d) + f[chosen].T @ f[chosen]) if chosen else np.eye(d) / ridge
    v = f @ a_inv
    g = v @ f[ev].T                    # phi_c' A^-1 phi_e for every candidate c and evaluation mode e
    lev = np.einsum("ij,ij->i", v, f)
    while len(chosen) < k:
        score = (g ** 2).sum(axis=1) / (1 + lev)
        score[chosen] = -np.inf
        c = int(np.argmax(score))
        chosen.append(c)
        u = a_inv @ f[c]
        denom = 1 + f[c] @ u
        fu = f @ u
        g -= np.outer(fu, fu[ev]) / denom
        lev -= fu ** 2 / denom
        a_inv -= np.outer(u, u) / denom
    return np.asarray(chosen)


def pick_active(x: np.ndarray, k: int, rng: np.random.Generator,
                features_of: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Indices of k modes: a balanced half, then the integrated-variance second batch in the features
    ``features_of(first_half)`` returns for every mode (a model transferred on the first half's results)."""
    first = pick_balanced(x, max(2, (k + 1) // 2), rng)
    return pick_integrated_variance(features_of(first), k, first, rng)
