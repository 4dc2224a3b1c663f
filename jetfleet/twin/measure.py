"""Measure a workload in a mode on the emulated board directly (no agent, no protocol): what
``jetfleet twin measure``, the anchor tests and the benchmarks use."""

from __future__ import annotations

from dataclasses import dataclass

from jetfleet.agent.device.base import RunResult, TelemetrySample
from jetfleet.shared import defaults
from jetfleet.shared.catalog import PowerMode
from jetfleet.shared.summary import Summary, summarise
from jetfleet.twin.board import EmulatedBoard


@dataclass(frozen=True)
class Measurement:
    """A run on the twin, the power samples over its kept window, and their summary."""

    mode: PowerMode
    run: RunResult
    power: list[TelemetrySample]
    summary: Summary


def measure_on_twin(board: EmulatedBoard, workload: str, mode: PowerMode, minibatches: int = defaults.MINIBATCHES,
                    *, minibatch_size: int = defaults.MINIBATCH_SIZE, workers: int = defaults.WORKERS, skip: int = 5,
                    sample_period_s: float = defaults.SAMPLE_INTERVAL_S) -> Measurement:
    """Apply ``mode``, run ``skip + minibatches`` minibatches and keep the last ``minibatches`` with
    the power samples a 100 ms sampler would have taken over them (warm-up excluded)."""
    board.apply_mode(mode)
    run = board.run_minibatches(workload, skip + minibatches, minibatch_size=minibatch_size, workers=workers)
    kept = run.minibatch_times_s[skip:]
    t0 = run.start_s + sum(run.minibatch_times_s[:skip])
    power = board.trace(t0, run.end_s, sample_period_s)
    return Measurement(mode, run, power, summarise(kept, [s.total_w for s in power]))


def measure_inference_on_twin(board: EmulatedBoard, workload: str, mode: PowerMode, batches: int = defaults.MINIBATCHES,
                              *, batch_size: int = 1, skip: int = 5,
                              sample_period_s: float = defaults.SAMPLE_INTERVAL_S) -> Measurement:
    """``measure_on_twin`` for inference: ``skip + batches`` forward passes of ``batch_size`` requests back to
    back, the last ``batches`` kept (their latencies in the summary's minibatch columns) with their power."""
    board.apply_mode(mode)
    run = board.run_inference(workload, skip + batches, batch_size=batch_size)
    kept = run.minibatch_times_s[skip:]
    t0 = run.start_s + sum(run.minibatch_times_s[:skip])
    power = board.trace(t0, run.end_s, min(sample_period_s, max(1e-3, (run.end_s - t0) / 4)))
    return Measurement(mode, run, power, summarise(kept, [s.total_w for s in power]))
