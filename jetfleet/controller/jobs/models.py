"""A job's prediction models: which modes to profile when the target has no model yet (the selection
strategies of ``powertrain.select``) and the active strategy's second batch."""

from __future__ import annotations

from typing import Any

import numpy as np

from jetfleet.controller.powertrain.artifacts import ModelRepo, torch_nn
from jetfleet.controller.powertrain.select import pick_balanced, pick_integrated_variance, pick_random, pick_spread
from jetfleet.shared.catalog import Catalog, PowerMode
from jetfleet.shared.errors import InvalidArgument

JOB_STRATEGIES = ("balanced", "active", "random", "spread")
MAX_CANDIDATES = 5000     # modes the active strategy's second batch is chosen among (a sample of a large catalog)


def knobs(modes: list[PowerMode]) -> np.ndarray:
    """The modes as rows of (cores, CPU MHz, GPU MHz, memory MHz)."""
    return np.array([m.as_tuple() for m in modes], float)


def first_batch(strategy: str, catalog: Catalog, k: int, seed: int) -> list[PowerMode]:
    """The modes to profile first: all k, or the active strategy's balanced first half."""
    if strategy not in JOB_STRATEGIES:
        raise InvalidArgument(f"strategy {strategy!r}: expected one of {', '.join(JOB_STRATEGIES)}", field="strategy")
    modes = catalog.grid("full")
    x = knobs(modes)
    rng = np.random.default_rng(seed)
    if strategy == "random":
        idx = pick_random(x, k, rng)
    elif strategy == "spread":
        idx = pick_spread(x, k, rng)
    else:
        idx = pick_balanced(x, (k + 1) // 2 if strategy == "active" else k, rng)
    return [modes[int(i)] for i in idx]


def second_batch(repo: ModelRepo, reference: dict[str, Any], catalog: Catalog, board_model: str, workload: str,
                 k: int, seed: int, planned: list[PowerMode]) -> list[PowerMode]:
    """The active strategy's second batch (blocking): transfer the reference on what is profiled so far, and
    pick the k - len(planned) modes that, beside the ``planned`` first batch (profiled or still on the boards),
    most reduce that model's summed predictive variance in its learned features."""
    P = torch_nn()  # noqa: N806
    done, t, p = repo.profiles(board_model, workload)
    x_done = knobs(done)
    ref_time, ref_power = repo.nets(reference)
    tn = P.transfer_many(ref_time, [(x_done, t)], epochs=150, seed=seed)[0]
    pn = P.transfer_many(ref_power, [(x_done, p)], epochs=150, seed=seed)[0]
    modes = catalog.grid("full")
    rng = np.random.default_rng([seed, 2])
    position = {m: i for i, m in enumerate(modes)}
    fixed = sorted({position[m] for m in list(planned) + list(done) if m in position})
    pool = np.arange(len(modes))
    if len(pool) > MAX_CANDIDATES:
        pool = np.union1d(rng.choice(len(modes), MAX_CANDIDATES, replace=False), fixed)
    x = knobs([modes[i] for i in pool])
    features = np.concatenate([P.penultimate(tn, x), P.penultimate(pn, x)], axis=1)
    local = {int(g): j for j, g in enumerate(pool)}
    want = min(len(pool), len(fixed) + max(0, k - len(planned)))
    picked = pick_integrated_variance(features, want, np.asarray([local[i] for i in fixed]), rng)
    return [modes[int(pool[j])] for j in picked[len(fixed):]]
