"""What both sides know about workloads: their names, input shapes, the cost of a minibatch
(measured from the torch models, ``characterisation.json``) and the bounds of a run.

The agent runs only workloads registered here (its torch models and training loop live in
``jetfleet.agent.workloads``) or installed on its board as plugins (``WorkloadRegistry``: the
built-ins plus the plugins, with each plugin's cost measured from its own model the way the
built-ins' are); the controller validates requests against the built-ins and the workloads a
board offers; the twin turns the characterisation into time and power. Importing this module
does not import torch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from jetfleet.shared import defaults
from jetfleet.shared.errors import InvalidArgument, NotFound


@dataclass(frozen=True)
class WorkloadSpec:
    """One registered workload: what it is, its published input shape and its data-pipeline cost."""

    name: str
    description: str
    dataset: str
    # Data-pipeline work per sample (decode, augment, collate) in milliseconds of one reference core
    # (Cortex-A78AE) at 1 GHz: it scales with 1/CPU frequency and is spread over the workers.
    cpu_ms_per_sample_at_1ghz: float
    input_kind: str                     # "image" (side x side RGB) or "tokens" (a sequence of ids)
    input_size: int                     # image side or sequence length
    classes: int                        # classes, or the vocabulary for token models
    minibatch_size: int = defaults.MINIBATCH_SIZE
    workers: int = defaults.WORKERS


WORKLOADS: dict[str, WorkloadSpec] = {w.name: w for w in (
    WorkloadSpec("resnet18", "ResNet-18 image classification, 224x224", "ImageNet (synthetic)", 9.0,
                 "image", 224, 1000),
    WorkloadSpec("mobilenet_v3", "MobileNetV3-Large image classification, 224x224",
                 "Google Landmarks v2 (synthetic)", 52.0, "image", 224, 1000),
    WorkloadSpec("yolo_v8n", "YOLOv8n-style detector, 640x640", "COCO (synthetic)", 88.0, "image", 640, 80),
    WorkloadSpec("bert_base", "BERT-base question answering, 256 tokens", "SQuAD v1.1 (synthetic)", 1.5,
                 "tokens", 256, 30522),
    WorkloadSpec("lstm", "2-layer LSTM language model (300 hidden), 35 tokens", "Penn Treebank (synthetic)", 0.05,
                 "tokens", 35, 10000),
)}

MAX_MINIBATCHES = 100_000
MAX_MINIBATCH_SIZE = 1024
MAX_WORKERS = 32


def get_workload(name: str) -> WorkloadSpec:
    """The registered workload ``name``; NotFound naming the registered ones otherwise."""
    if name not in WORKLOADS:
        raise NotFound(f"unknown workload {name[:64]!r}; registered: {', '.join(sorted(WORKLOADS))}",
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


@lru_cache(maxsize=None)
def characterisations() -> dict[str, dict[str, Any]]:
    """Per-workload cost figures measured from the torch models by ``jetfleet.agent.workloads.characterise``.

    Checked in as JSON (regenerate with ``make characterise``; a test fails when it is stale) so the
    twin runs without importing torch."""
    text = (Path(__file__).parent / "characterisation.json").read_text()
    data: dict[str, dict[str, Any]] = json.loads(text)
    return data


def characterisation(name: str) -> dict[str, Any]:
    """The cost figures of one registered workload."""
    get_workload(name)
    return characterisations()[name]


class WorkloadRegistry:
    """The workloads one board runs: the built-ins plus the plugins installed on it, each with its cost
    figures; plugins that failed to load are kept in ``broken`` (name -> why) and not offered."""

    def __init__(self, specs: Mapping[str, WorkloadSpec], costs: Mapping[str, Mapping[str, Any]],
                 broken: Mapping[str, str] | None = None,
                 inference: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        missing = set(specs) - set(costs)
        if missing:
            raise InvalidArgument(f"workloads without cost figures: {', '.join(sorted(missing))}", field="workload")
        self._specs = dict(specs)
        self._costs = {k: dict(v) for k, v in costs.items()}
        self.broken: dict[str, str] = dict(broken or {})
        # forward-pass costs by batch size (``inference.py``); a workload without them is not served
        self._inference = {k: dict(v) for k, v in (inference or {}).items()}

    @classmethod
    def builtin(cls) -> WorkloadRegistry:
        """The built-in workloads only."""
        from jetfleet.shared.workloads.inference import inference_characterisations

        return cls(WORKLOADS, characterisations(), inference=inference_characterisations())

    def with_plugin(self, spec: WorkloadSpec, cost: Mapping[str, Any],
                    inference: Mapping[str, Any] | None = None) -> WorkloadRegistry:
        """A registry that also offers ``spec`` (and serves it for inference if ``inference`` costs are given);
        InvalidArgument if its name is taken."""
        if spec.name in self._specs:
            raise InvalidArgument(f"workload {spec.name!r} is already registered", field="workload")
        check_workload_name(spec.name)
        more = {spec.name: inference} if inference is not None else {}
        return WorkloadRegistry({**self._specs, spec.name: spec}, {**self._costs, spec.name: cost}, self.broken,
                                {**self._inference, **more})

    def with_broken(self, name: str, why: str) -> WorkloadRegistry:
        """A registry that also reports plugin ``name`` as broken (and does not offer it)."""
        return WorkloadRegistry(self._specs, self._costs, {**self.broken, name: why}, self._inference)

    def inference_names(self) -> list[str]:
        """The workloads this board serves for inference, sorted."""
        return sorted(self._inference)

    def inference_characterisation(self, name: str) -> dict[str, Any]:
        """The forward-pass costs of ``name`` by batch size; NotFound naming the served workloads otherwise."""
        if name not in self._inference:
            raise NotFound(f"unknown inference workload {name[:64]!r}; served: {', '.join(self.inference_names())}",
                           field="inference_workload")
        return self._inference[name]

    def names(self) -> list[str]:
        """The names of the workloads offered, sorted."""
        return sorted(self._specs)

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def get(self, name: str) -> WorkloadSpec:
        """The workload ``name``; NotFound naming the registered ones (and any broken plugin of that name)."""
        if name not in self._specs:
            why = f" (plugin {name!r} is installed but broken: {self.broken[name]})" if name in self.broken else ""
            raise NotFound(f"unknown workload {name!r}{why}; registered: {', '.join(self.names())}", field="workload")
        return self._specs[name]

    def characterisation(self, name: str) -> dict[str, Any]:
        """The cost figures of one offered workload (what the twin turns into time and power)."""
        self.get(name)
        return self._costs[name]


def check_workload_name(name: str) -> str:
    """A workload name: 1..64 of a-z, 0-9, '_' and '-', starting with a letter (it travels on the wire)."""
    ok = 1 <= len(name) <= 64 and name[0].isalpha() and all(c.isalnum() or c in "_-" for c in name)
    if not ok or name != name.lower():
        raise InvalidArgument(f"workload name {name[:40]!r}: 1..64 lowercase letters, digits, '_' or '-', starting "
                              "with a letter", field="workload")
    return name
