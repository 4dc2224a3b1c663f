"""The device interface every board backend implements: the real Jetson (``jetson.py``) and the
emulated board (``jetfleet.twin``). What a backend can do beyond the common methods is declared in
its ``capabilities``, never probed with ``hasattr``."""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

from jetfleet.shared import defaults
from jetfleet.shared.catalog import Catalog, PowerMode
from jetfleet.shared.errors import DeviceError, InvalidArgument
from jetfleet.shared.workloads import WorkloadSpec

if TYPE_CHECKING:
    from jetfleet.agent.trace import PowerTrace


@dataclass(frozen=True)
class Capabilities:
    """What a backend offers beyond the common interface."""

    # Sampling and mode changes take microseconds and never block, so the agent may call them on
    # its event loop instead of a worker thread (the twin; not a real board reading sysfs).
    cheap_io: bool = False
    # The board can replay the power samples a sampler would have taken over a past interval of its
    # clock (``Device.trace``): an accelerated twin, whose clock runs ahead of the wall clock.
    power_trace: bool = False
    # The board takes a training process's steps on its own clock (the twin: each step of the operator's model in
    # the current mode, at the lab's speed): ``step_training`` and ``add_workload`` (``jetfleet.agent.sessions``).
    emulated_steps: bool = False


@dataclass(frozen=True)
class BoardInfo:
    """Who a board is: model, serial, software versions, its power-mode catalog."""

    model: str
    serial: str
    software: Mapping[str, str]  # e.g. {"l4t": "36.3.0", "kernel": "5.15.136-tegra", "jetfleet": "0.1.0"}
    catalog: Catalog
    emulated: bool
    speed: float = 1.0  # board seconds per wall second: 1 on a real board; an emulated one's acceleration (inf: instant)


@dataclass(frozen=True)
class TelemetrySample:
    """One reading of the board's sensors."""

    t_s: float                      # the board's clock (seconds since the epoch; virtual on a twin)
    rails_w: Mapping[str, float]
    total_w: float
    cpu_mhz: float
    gpu_mhz: float
    mem_mhz: float
    cores_online: int
    temps_c: Mapping[str, float] = field(default_factory=dict)
    cpu_util: float = 0.0           # 0..1, mean over online cores
    gpu_util: float = 0.0           # 0..1


@dataclass(frozen=True)
class RunResult:
    """The minibatches a run completed, on the board's clock."""

    workload: str
    minibatch_times_s: list[float]
    start_s: float                  # board clock when the first minibatch started
    end_s: float


@dataclass(frozen=True)
class KernelRun:
    """One micro-benchmark kernel run (issue 16): the work it did, on the board's clock."""

    kernel: str                     # "idle" (the host thread spins, GPU idle), "compute" or "memory"
    flops: float                    # FLOPs done
    dram_bytes: float               # DRAM bytes moved
    start_s: float
    end_s: float
    method: str                     # "twin" or "torch-cuda"


# Called after each minibatch with (index, seconds); returning True ends the run after it.
MinibatchCallback = Callable[[int, float], Optional[bool]]  # typing.Callable: subscripted at run time (3.8)


class ConcurrentSteps(abc.ABC):
    """One step at a time of a concurrent session: ``train()`` one minibatch, ``infer(n)`` one forward pass of n
    requests; each returns its seconds on the board's clock."""

    @abc.abstractmethod
    def train(self) -> float:
        """Train one minibatch."""

    @abc.abstractmethod
    def infer(self, n: int) -> float:
        """Serve one batch of ``n`` requests."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the session's models and loader."""


class Device(abc.ABC):
    """One board. Methods block; the agent calls them from worker threads unless
    ``capabilities.cheap_io`` says they never block."""

    capabilities = Capabilities()

    @abc.abstractmethod
    def describe(self) -> BoardInfo:
        """Model, serial, software and catalog of this board."""

    @abc.abstractmethod
    def read_mode(self) -> PowerMode:
        """The mode the board is in now, as the board reports it."""

    @abc.abstractmethod
    def _write_mode(self, mode: PowerMode) -> None:
        """Apply an already validated mode."""

    def apply_mode(self, mode: PowerMode, preset: str = "") -> PowerMode:
        """Validate against the catalog before touching anything, apply, read back and confirm.

        ``preset`` names the board's preset the operator asked for (its values must be ``mode``), so a
        board that has NVIDIA's presets can enter that preset itself. Returns the confirmed mode; raises
        DeviceError if the board reports something else."""
        catalog = self.describe().catalog
        mode = catalog.validate(mode)
        if preset:
            named = catalog.preset_named(preset)   # the board's own name for it (30W is AGX Orin's MODE_30W)
            if named is None or catalog.presets[named] != mode:
                names = ", ".join(sorted(catalog.presets)) or "none"
                raise InvalidArgument(f"preset {preset!r} is not {mode} on this {catalog.model} (its presets: {names})",
                                      field="preset")
            self._write_preset(named, mode)
        else:
            self._write_mode(mode)
        confirmed = self.read_mode()
        if confirmed != mode:
            raise DeviceError(f"board did not confirm mode {mode}: it reports {confirmed}", field="mode")
        return confirmed

    def _write_preset(self, name: str, mode: PowerMode) -> None:
        """Enter the board's preset ``name`` (whose values are ``mode``); by default the same as any mode."""
        self._write_mode(mode)

    @abc.abstractmethod
    def sample(self) -> TelemetrySample:
        """Read the sensors now."""

    @abc.abstractmethod
    def run_minibatches(self, workload: str, n: int, *, minibatch_size: int = defaults.MINIBATCH_SIZE,
                        workers: int = defaults.WORKERS, on_minibatch: MinibatchCallback | None = None) -> RunResult:
        """Train ``n`` minibatches of a registered workload (fewer if ``on_minibatch`` returns True)."""

    def run_kernel(self, kernel: str, seconds: float) -> KernelRun:
        """Run one of the Empirical Roofline Toolkit's kernels for about ``seconds`` (issue 16): ``idle`` (the
        host thread spins, nothing on the GPU), ``compute`` (dense FP32 matmuls) or ``memory`` (a streaming triad)."""
        raise DeviceError(f"{type(self).__name__} cannot run roofline micro-benchmarks", field="kernel")

    @abc.abstractmethod
    def run_inference(self, workload: str, n: int, *, batch_size: int = 1,
                      on_batch: MinibatchCallback | None = None) -> RunResult:
        """Serve ``n`` forward passes of ``batch_size`` requests of a registered workload back to back (fewer if
        ``on_batch`` returns True); ``minibatch_times_s`` holds each batch's latency (issue 15)."""

    @abc.abstractmethod
    def open_concurrent(self, training: str, inference: str, *, minibatch_size: int = defaults.MINIBATCH_SIZE,
                        workers: int = defaults.WORKERS) -> ConcurrentSteps:
        """A session training ``training`` and serving ``inference`` one step at a time (issue 15): the model and
        loader stay loaded between steps, so the managed scheduler can interleave them."""

    def step_training(self, workload: str, *, minibatch_size: int = defaults.MINIBATCH_SIZE,
                      workers: int = defaults.WORKERS, steps: int = 1) -> float:
        """``steps`` training minibatches of a running loop on the board's clock, their seconds (only with
        ``capabilities.emulated_steps``)."""
        raise DeviceError(f"{type(self).__name__} runs a training process's steps for real, not emulated",
                          field="emulated_steps")

    def emulated_workload(self, name: str) -> WorkloadSpec | None:
        """The spec of ``name`` if ``step_training`` can run it (``emulated_steps`` only), else None."""
        return None

    def add_workload(self, spec: WorkloadSpec, cost: Mapping[str, Any]) -> None:
        """Offer an operator's own model (its characterisation) for ``step_training`` (``emulated_steps`` only)."""
        raise DeviceError(f"{type(self).__name__} does not emulate workloads", field="emulated_steps")

    def trace(self, t0_s: float, t1_s: float, period_s: float) -> list[TelemetrySample]:
        """The samples a sampler every ``period_s`` would have taken from t0 to t1 on the board's clock.

        Only backends whose ``capabilities.power_trace`` is set can replay the past."""
        raise DeviceError(f"{type(self).__name__} cannot replay power samples; sample it while it runs",
                          field="power_trace")

    def trace_columns(self, t0_s: float, t1_s: float, period_s: float) -> PowerTrace:
        """``trace`` as columns (``jetfleet.agent.trace``); a backend that builds its samples as arrays (the twin)
        gives them without making an object per sample."""
        from jetfleet.agent.trace import PowerTrace  # it holds TelemetrySample, defined here

        return PowerTrace.from_samples(self.trace(t0_s, t1_s, period_s))

    def now_s(self) -> float:
        """The board's clock (virtual on an accelerated twin)."""
        import time

        return time.time()

    def wait(self, seconds: float) -> None:
        """Let ``seconds`` of board time pass idle (a scheduler waiting for requests; the twin accelerates it)."""
        import time

        if seconds > 0:
            time.sleep(seconds)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (threads, file handles)."""
