"""Inference workloads (issue 15): every registered workload served forward-only at a batch size of 1..64.

The cost of one forward pass (model.eval(), torch.no_grad()) is measured from the torch model on the meta
device at the characterised batch sizes ``CHARACTERISED_BATCH_SIZES`` the way a training step's is
(``jetfleet.agent.workloads.characterise``), checked in as ``inference_characterisation.json``; the twin
interpolates between the two characterised sizes around any other batch size. Inputs are those a serving
endpoint receives: the training input shape, except BERT, served at 128 tokens (the published inference
figures' sequence length). Importing this module does not import torch.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from jetfleet.shared.errors import InvalidArgument, NotFound
from jetfleet.shared.workloads import WORKLOADS

MIN_BATCH_SIZE = 1
MAX_BATCH_SIZE = 64
CHARACTERISED_BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
# Input length served where it differs from training (Pagoda's BERT figures are at 128 tokens).
INFERENCE_INPUT_SIZE = {"bert_base": 384}


def check_batch_size(batch_size: int, field: str = "batch_size") -> int:
    """An inference batch size: 1..64; InvalidArgument naming ``field`` otherwise."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not MIN_BATCH_SIZE <= batch_size <= MAX_BATCH_SIZE:
        raise InvalidArgument(f"{field}={batch_size!r} is out of range; allowed {MIN_BATCH_SIZE}..{MAX_BATCH_SIZE}",
                              field=field)
    return batch_size


def input_size(name: str, trained_size: int) -> int:
    """The input side or sequence length served for ``name``."""
    return INFERENCE_INPUT_SIZE.get(name, trained_size)


@lru_cache(maxsize=None)
def inference_characterisations() -> dict[str, dict[str, Any]]:
    """Per built-in workload: {"input": ..., "by_batch": {"1": cost, "2": cost, ...}} (cost as in
    ``characterisation.json``, for one forward pass of the batch). Regenerate with ``make characterise``."""
    text = (Path(__file__).parent / "inference_characterisation.json").read_text()
    data: dict[str, dict[str, Any]] = json.loads(text)
    return data


def inference_characterisation(name: str) -> dict[str, Any]:
    """The forward-pass cost figures of one built-in workload; NotFound naming the registered ones."""
    if name not in WORKLOADS:
        raise NotFound(f"unknown inference workload {name[:64]!r}; registered: {', '.join(sorted(WORKLOADS))}",
                       field="inference_workload")
    return inference_characterisations()[name]


def bracket(batch_size: int) -> tuple[int, int, float]:
    """The characterised batch sizes (lo, hi) around ``batch_size`` and its weight w between them
    (value = (1 - w) * at(lo) + w * at(hi): a forward pass's FLOPs and activation bytes grow linearly with
    the batch, its weight bytes do not, so cost is affine in the batch between two characterised sizes)."""
    check_batch_size(batch_size)
    sizes = CHARACTERISED_BATCH_SIZES
    if batch_size in sizes:
        return batch_size, batch_size, 0.0
    hi = next(s for s in sizes if s > batch_size)
    lo = sizes[sizes.index(hi) - 1]
    return lo, hi, (batch_size - lo) / (hi - lo)
