"""Board commands: list a catalog's modes; measure a workload on the emulated board."""

from __future__ import annotations

import click

from jetfleet.cli.common import emit, handle_errors, output_option, table
from jetfleet.shared import defaults
from jetfleet.shared.catalog import builtin_catalogs, get_catalog
from jetfleet.shared.quantity import parse_latency


@click.command("modes")
@click.argument("board")
@click.option("--grid", default="full", show_default=True, help="full, powertrain or presets")
@output_option
@handle_errors
def modes_cmd(board: str, grid: str, output: str) -> None:
    """List the power modes of BOARD (agx-orin, agx-xavier, nano, orin-nano, tx2, xavier-nx)."""
    cat = get_catalog(board)
    modes = cat.grid(grid)
    rows = [{"mode": str(m), "cores": m.cores, "cpu_mhz": m.cpu_mhz, "gpu_mhz": m.gpu_mhz,
             "mem_mhz": m.mem_mhz, "preset": cat.preset_name(m)} for m in modes]
    emit(output, {"board": cat.model, "grid": grid, "count": len(rows), "modes": rows},
         lambda d: table([[r["mode"], r["preset"] or ""] for r in d["modes"]], ["MODE", "PRESET"])
         + f"\n{d['count']} modes ({d['board']}, grid {d['grid']})")


@click.group("twin")
def twin_group() -> None:
    """The emulated board (digital twin)."""


@twin_group.command("measure")
@click.option("--board", required=True, help=f"board model ({', '.join(sorted(builtin_catalogs()))})")
@click.option("--workload", required=True, help="registered workload name")
@click.option("--mode", "mode_text", required=True, help="CORES/CPU/GPU/MEM in MHz, or a preset name")
@click.option("--minibatches", default=defaults.MINIBATCHES, show_default=True, type=click.IntRange(1, 10_000),
              help="minibatches kept (forward passes with --inference)")
@click.option("--inference", is_flag=True, help="serve the workload forward-only (eval, no_grad) instead of training")
@click.option("--batch-size", default=1, show_default=True, type=int, help="requests per forward pass with --inference (1..64)")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0, 2**32 - 1))
@output_option
@handle_errors
def twin_measure(board: str, workload: str, mode_text: str, minibatches: int, inference: bool, batch_size: int,
                 seed: int, output: str) -> None:
    """What the emulated board measures for WORKLOAD in MODE (warm-up excluded): training minibatches, or with
    --inference forward passes of --batch-size requests."""
    from jetfleet.shared.workloads import check_run_args, get_workload
    from jetfleet.shared.workloads.inference import check_batch_size
    from jetfleet.twin.board import EmulatedBoard
    from jetfleet.twin.measure import measure_inference_on_twin, measure_on_twin

    cat = get_catalog(board)
    get_workload(workload)
    check_run_args(minibatches, defaults.MINIBATCH_SIZE, defaults.WORKERS)
    mode = cat.parse_mode(mode_text)
    if inference:
        check_batch_size(batch_size, "batch-size")
        m = measure_inference_on_twin(EmulatedBoard(board, seed), workload, mode, minibatches, batch_size=batch_size)
    else:
        m = measure_on_twin(EmulatedBoard(board, seed), workload, mode, minibatches)
    data = {"board": board, "workload": workload, "mode": str(mode), "seed": seed,
            "kind": "inference" if inference else "training", **({"batch_size": batch_size} if inference else {}),
            **m.summary.to_dict()}
    what = f"inference, batch {batch_size}" if inference else "training"
    unit = "forward passes" if inference else "minibatches"
    emit(output, data, lambda d: (
        f"{d['workload']} ({what}) on emulated {d['board']} in {d['mode']} ({d['minibatches']} {unit})\n"
        f"  {'batch latency' if inference else 'minibatch time'}  median {d['minibatch_time_median_ms']:.1f} ms"
        f"  mean {d['minibatch_time_mean_ms']:.1f} ms"
        f"  p5 {d['minibatch_time_p5_ms']:.1f}  p95 {d['minibatch_time_p95_ms']:.1f}\n"
        f"  power           mean {d['power_mean_w']:.2f} W over {d['power_samples']} samples\n"
        f"  energy          {d['energy_per_minibatch_j']:.3f} J per {'batch' if inference else 'minibatch'}"))


@twin_group.command("concurrent")
@click.option("--board", required=True, help=f"board model ({', '.join(sorted(builtin_catalogs()))})")
@click.option("--training", required=True, help="workload to train")
@click.option("--inference", "inference", required=True, help="workload to serve")
@click.option("--mode", "mode_text", default="MAXN", show_default=True, help="CORES/CPU/GPU/MEM in MHz, or a preset")
@click.option("--arrival-rate", type=float, default=None, help="Poisson requests per second (or --trace)")
@click.option("--trace", "trace_path", type=click.Path(exists=True, dir_okay=False, allow_dash=True), default=None,
              help="arrival times, one per line in seconds (- for standard input)")
@click.option("--latency-budget", required=True, help="on the p95 latency, e.g. 50ms or 0.2s")
@click.option("--batch-size", default=8, show_default=True, type=int, help="largest inference batch (1..64)")
@click.option("--duration", default=60.0, show_default=True, type=click.FloatRange(1.0, 3600.0),
              help="board seconds of Poisson arrivals")
@click.option("--native", is_flag=True, help="native GPU time-sharing (two threads) instead of managed interleaving")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0, 2**32 - 1))
@output_option
@handle_errors
def twin_concurrent(board: str, training: str, inference: str, mode_text: str, arrival_rate: float | None,
                    trace_path: str | None, latency_budget: str, batch_size: int, duration: float, native: bool,
                    seed: int, output: str) -> None:
    """Train and serve at once on the emulated board: per-request latency (queueing + batching + execution, p50/p95/
    p99; the budget is on p95), training throughput and power, managed interleaving or --native time-sharing.
    Refused before anything runs: a stream no mode serves within the budget, a budget below the fastest single
    request, a batch size outside 1..64, an unknown workload."""
    import numpy as np

    from jetfleet.cli.common import MAX_SMALL_FILE_BYTES, read_text_file
    from jetfleet.shared.concurrency import ManagedScheduler, check_serviceable, poisson_arrivals, read_trace
    from jetfleet.shared.errors import InvalidArgument
    from jetfleet.shared.workloads.inference import CHARACTERISED_BATCH_SIZES, check_batch_size
    from jetfleet.twin.board import EmulatedBoard
    from jetfleet.twin.concurrent import BoardClock, native_power_w, run_native

    cat = get_catalog(board)
    budget_s = parse_latency(latency_budget)
    check_batch_size(batch_size, "batch-size")
    dev = EmulatedBoard(board, seed)
    dev.workloads.get(training)
    dev.workloads.inference_characterisation(inference)
    mode = cat.parse_mode(mode_text)
    if (arrival_rate is None) == (trace_path is None):
        raise InvalidArgument("give exactly one of --arrival-rate and --trace", field="arrival_rate")
    arrivals = (poisson_arrivals(arrival_rate, duration, seed) if arrival_rate is not None
                else read_trace(read_text_file(trace_path, "trace", MAX_SMALL_FILE_BYTES)))  # type: ignore[arg-type]
    rate = arrival_rate if arrival_rate is not None else len(arrivals) / max(float(arrivals[-1]), 1e-9)
    grid = cat.grid("inference") if "inference" in cat.grid_names else cat.grid("presets")
    best = {b: min(dev.expected_inference(inference, m, batch_size=b)[0] for m in grid)
            for b in CHARACTERISED_BATCH_SIZES}
    check_serviceable(rate, budget_s, best, inference)
    dev.apply_mode(mode)
    t_tr, w_tr = dev.expected(training, mode)
    w_idle = dev.idle_power_w(mode)

    def infer_w(n: int) -> float:
        return dev.expected_inference(inference, mode, batch_size=n)[1]

    if native:
        r, states = run_native(arrivals, batch_size=batch_size, seed=seed, train_s=lambda: t_tr,
                               infer_s=lambda n: dev.expected_inference(inference, mode, batch_size=n)[0])
        power = native_power_w(states, w_tr, infer_w(batch_size), w_idle)
    else:
        steps = dev.open_concurrent(training, inference)
        t0 = dev.now_s()
        r = ManagedScheduler(batch_size=batch_size, latency_budget_s=budget_s, infer=steps.infer, train=steps.train,
                             infer_estimate_s=lambda n: dev.expected_inference(inference, mode, batch_size=n)[0],
                             train_estimate_s=t_tr, clock=BoardClock(dev)).run(arrivals)
        power = float(np.mean([s.total_w for s in dev.trace(t0, t0 + r.span_s, 0.1)]))
    summary = r.summary(budget_s)
    data: dict[str, object] = {"board": board, "mode": str(mode), "training": training, "inference": inference,
            "sharing": "native" if native else "managed", "batch_size": batch_size, "arrival_rate": rate,
            "latency_budget_ms": budget_s * 1e3, "percentile": 95, "power_mean_w": power, **summary,
                               "within_budget": summary["p95_ms"] <= budget_s * 1e3}
    emit(output, data, lambda d: (
        f"{d['training']} training + {d['inference']} serving ({d['sharing']}) on emulated {d['board']} in {d['mode']}\n"
        f"  requests   {d['served']:.0f} served, {d['late']:.0f} late, {d['dropped']:.0f} dropped "
        f"({d['arrival_rate']:.1f}/s, batches of up to {d['batch_size']}, mean {d['mean_batch']:.1f})\n"
        f"  latency    p50 {d['p50_ms']:.1f} ms  p95 {d['p95_ms']:.1f} ms  p99 {d['p99_ms']:.1f} ms  "
        f"(budget {d['latency_budget_ms']:g} ms on p95: {'met' if d['within_budget'] else 'MISSED'})\n"
        f"  split      queueing {d['queueing_mean_ms']:.1f} + batching {d['batching_mean_ms']:.1f} + execution "
        f"{d['execution_mean_ms']:.1f} ms (means)\n"
        f"  training   {d['train_per_s']:.2f} minibatches/s over {d['span_s']:.1f} s\n"
        f"  power      {d['power_mean_w']:.1f} W mean"))
