"""The operator's own workloads: Python packages installed on a board that register a workload under the
entry-point group ``jetfleet.workloads``. The agent's registry is the built-ins plus the plugins
installed on that board; it runs only what is installed there, never code from the wire.

A plugin's entry point names a ``WorkloadPlugin`` (or a function returning one): the workload's
spec (name, input, the data pipeline's CPU cost per sample), a model builder and optionally its
loss. Its cost per minibatch (FLOPs, bytes, kernels by arithmetic intensity) is measured from its
model on PyTorch's meta device exactly as the built-ins' are (``characterise.py``), so the twin
emulates it from first principles too. A plugin that fails to import or to characterise is
reported in the agent's hello as broken, with why, and not offered; the agent still starts.

    # pyproject.toml of a plugin package (examples/jetfleet-workload-example)
    [project.entry-points."jetfleet.workloads"]
    squeezenet = "jetfleet_workload_example:plugin"
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Callable

from jetfleet.shared.workloads import WORKLOADS, WorkloadRegistry, WorkloadSpec

log = logging.getLogger(__name__)
GROUP = "jetfleet.workloads"
MAX_REASON = 300


@dataclass(frozen=True)
class WorkloadPlugin:
    """A workload installed on a board: its spec, its torch model at a scale (1.0 = the real shape; tests on a
    CPU use less), its loss (None: cross-entropy) and the input side or length to use below scale 1."""

    spec: WorkloadSpec
    build_model: Callable[[float], Any]                          # scale -> torch.nn.Module
    loss: Callable[[Any, Any], Any] | None = None    # (output, target) -> scalar tensor
    tiny_input_size: int = 0


@dataclass
class AgentWorkloads:
    """What a board runs: the registry the agent and its twin use, and the installed plugins' code."""

    registry: WorkloadRegistry
    plugins: dict[str, WorkloadPlugin] = field(default_factory=dict)


def entry_points(group: str = GROUP) -> list[Any]:
    """The installed entry points of ``group`` (importlib.metadata's API differs before Python 3.10)."""
    from importlib import metadata

    if sys.version_info >= (3, 10):
        return list(metadata.entry_points(group=group))
    return list(metadata.entry_points().get(group, []))  # type: ignore[attr-defined, unused-ignore]


def load_workloads(points: Iterable[Any] | None = None) -> AgentWorkloads:
    """The built-ins plus every plugin that loads and characterises; the others as broken (name -> why).
    torch is imported only when a plugin is installed."""
    registry = WorkloadRegistry.builtin()
    plugins: dict[str, WorkloadPlugin] = {}
    for ep in entry_points() if points is None else points:
        name = str(ep.name)
        try:
            obj = ep.load()
            plugin = obj if isinstance(obj, WorkloadPlugin) else obj()
            if not isinstance(plugin, WorkloadPlugin):
                raise TypeError(f"entry point {ep.value} gave a {type(plugin).__name__}, not a WorkloadPlugin")
            if plugin.spec.name != name:
                raise ValueError(f"entry point {name!r} registers a workload named {plugin.spec.name!r}")
            if name in WORKLOADS or name in plugins:
                raise ValueError(f"workload {name!r} is already registered")
            from jetfleet.agent.workloads.characterise import characterise, characterise_inference_sizes

            cost = characterise(name, plugin.spec.minibatch_size, plugin)
            registry = registry.with_plugin(plugin.spec, cost, characterise_inference_sizes(name, plugin))
            plugins[name] = plugin
            log.info("workload plugin %s loaded from %s", name, ep.value)
        except Exception as e:  # a broken plugin must not stop the agent: report it instead
            why = f"{type(e).__name__}: {e}"[:MAX_REASON]
            log.warning("workload plugin %s is broken and not offered: %s", name, why)
            registry = registry.with_broken(name, why)
    return AgentWorkloads(registry, plugins)
