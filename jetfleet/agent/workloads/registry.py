"""The workload registry: the only workloads an agent will run. Importing this module does not
import torch; the training code (``training.py``) does, and only when a workload really runs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from jetfleet.shared.errors import InvalidArgument, NotFound


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    description: str
    dataset: str
    # Data-pipeline work per sample (decode, augment, collate) in milliseconds of one reference core
    # (Cortex-A78AE) at 1 GHz: it scales with 1/CPU frequency and is spread over the workers.
    cpu_ms_per_sample_at_1ghz: float
    minibatch_size: int = 16
    workers: int = 4


WORKLOADS: dict[str, WorkloadSpec] = {w.name: w for w in (
    WorkloadSpec("resnet18", "ResNet-18 image classification, 224x224", "ImageNet (synthetic)", 9.0),
    WorkloadSpec("mobilenet_v3", "MobileNetV3-Large image classification, 224x224",
                 "Google Landmarks v2 (synthetic)", 52.0),
    WorkloadSpec("yolo_v8n", "YOLOv8n-style detector, 640x640", "COCO (synthetic)", 88.0),
    WorkloadSpec("bert_base", "BERT-base question answering, 256 tokens", "SQuAD v1.1 (synthetic)", 1.5),
    WorkloadSpec("lstm", "2-layer LSTM language model (300 hidden), 35 tokens", "Penn Treebank (synthetic)", 0.05),
)}

MAX_MINIBATCHES = 100_000
MAX_MINIBATCH_SIZE = 1024
MAX_WORKERS = 32


def get_workload(name: str) -> WorkloadSpec:
    if name not in WORKLOADS:
        raise NotFound(f"unknown workload {name!r}; registered: {', '.join(sorted(WORKLOADS))}",
                       field="workload")
    return WORKLOADS[name]


def check_run_args(minibatches: int, minibatch_size: int, workers: int) -> None:
    """Bounds on what a run may ask for (the agent trusts nothing it is sent)."""
    for name, value, hi in (("minibatches", minibatches, MAX_MINIBATCHES),
                            ("minibatch_size", minibatch_size, MAX_MINIBATCH_SIZE),
                            ("workers", workers, MAX_WORKERS)):
        lo = 0 if name == "workers" else 1
        if not lo <= value <= hi:
            raise InvalidArgument(f"{name}={value} is out of range; allowed {lo}..{hi}", field=name)


@cache
def characterisations() -> dict[str, dict[str, Any]]:
    """Per-workload cost figures measured from the torch models by ``characterise.py``.

    Checked in as JSON (regenerate with ``make characterise``; a test fails when it is stale) so the
    twin runs without importing torch."""
    text = resources.files("jetfleet.agent.workloads").joinpath("characterisation.json").read_text()
    data: dict[str, dict[str, Any]] = json.loads(text)
    return data


def characterisation(name: str) -> dict[str, Any]:
    get_workload(name)
    return characterisations()[name]
