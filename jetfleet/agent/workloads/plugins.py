"""The operator's own workloads: Python packages installed on a board that register a workload under the
entry-point group ``jetfleet.workloads``. The agent's registry is the built-ins plus the plugins
installed on that board; it runs only what is installed there, never code from the wire.

A plugin's entry point names a ``WorkloadPlugin`` (or a function returning one): the workload's
spec (name, input, the data pipeline's CPU cost per sample), a model builder and optionally its
loss. Its cost per minibatch (FLOPs, bytes, kernels by arithmetic intensity) is measured from its
model on PyTorch's meta device exactly as the built-ins' are (``characterise.py``), so the twin
emulates it from first principles too. A plugin that fails to import or to characterise is
reported in the agent's hello as broken, with why, and not offered; the agent still starts. Each plugin is
loaded in a step of its own with a time limit (``PLUGIN_LOAD_TIMEOUT_S``): one that calls ``sys.exit`` while it
loads, raises anything at all, or never finishes (a sleep or a network call at import) is broken, not fatal.

    # pyproject.toml of a plugin package (examples/jetfleet-workload-example)
    [project.entry-points."jetfleet.workloads"]
    squeezenet = "jetfleet_workload_example:plugin"
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Callable

from jetfleet.shared.workloads import WORKLOADS, WorkloadRegistry, WorkloadSpec

log = logging.getLogger(__name__)
GROUP = "jetfleet.workloads"
MAX_REASON = 300
PLUGIN_LOAD_TIMEOUT_S = 60.0   # importing, building and characterising one plugin (torch's import takes seconds)


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


class PluginLoadTimeout(Exception):
    """A plugin did not finish loading within its time limit."""


def _guarded(step: Callable[[], Any], timeout_s: float, name: str) -> Any:
    """``step()`` in a thread of its own, waited for at most ``timeout_s``: its result, or its error re-raised
    (``SystemExit`` turned into an error naming the exit code). A step still running after the limit is left to
    itself in that daemon thread (Python cannot stop it) and PluginLoadTimeout raised."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = step()
        except SystemExit as e:   # sys.exit() in a plugin's import must not end the agent
            box["error"] = RuntimeError(f"it called sys.exit({e.code!r}) while loading")
        except BaseException as e:  # noqa: BLE001 - whatever a plugin raises, it is the plugin's fault
            box["error"] = e if isinstance(e, Exception) else RuntimeError(f"{type(e).__name__}: {e}")

    t = threading.Thread(target=run, name=f"plugin-{name}", daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        raise PluginLoadTimeout(f"it did not finish loading within {timeout_s:g} s (a sleep or a blocking call at "
                                "import?); the agent started without it")
    if "error" in box:
        raise box["error"]
    return box["value"]


def load_workloads(points: Iterable[Any] | None = None, timeout_s: float = PLUGIN_LOAD_TIMEOUT_S) -> AgentWorkloads:
    """The built-ins plus every plugin that loads and characterises within ``timeout_s``; the others as broken
    (name -> why). torch is imported only when a plugin is installed."""
    registry = WorkloadRegistry.builtin()
    plugins: dict[str, WorkloadPlugin] = {}
    for ep in entry_points() if points is None else points:
        name = str(ep.name)
        try:
            if name in WORKLOADS or name in plugins:
                raise ValueError(f"workload {name!r} is already registered")
            plugin, cost, inference = _guarded(functools.partial(_load_one, ep, name), timeout_s, name)
            registry = registry.with_plugin(plugin.spec, cost, inference)
            plugins[name] = plugin
            log.info("workload plugin %s loaded from %s", name, ep.value)
        except Exception as e:  # a broken plugin must not stop the agent: report it instead
            why = f"{type(e).__name__}: {e}"[:MAX_REASON]
            log.warning("workload plugin %s is broken and not offered: %s", name, why)
            registry = registry.with_broken(name, why)
    return AgentWorkloads(registry, plugins)


def _load_one(ep: Any, name: str) -> tuple[WorkloadPlugin, Any, Any]:
    """Import one entry point, build its plugin and characterise it (the guarded step)."""
    obj = ep.load()
    plugin = obj if isinstance(obj, WorkloadPlugin) else obj()
    if not isinstance(plugin, WorkloadPlugin):
        raise TypeError(f"entry point {ep.value} gave a {type(plugin).__name__}, not a WorkloadPlugin")
    if plugin.spec.name != name:
        raise ValueError(f"entry point {name!r} registers a workload named {plugin.spec.name!r}")
    from jetfleet.agent.workloads.characterise import characterise, characterise_inference_sizes

    return plugin, characterise(name, plugin.spec.minibatch_size, plugin), characterise_inference_sizes(name, plugin)
