"""Board commands: list a catalog's modes; measure a workload on the emulated board."""

from __future__ import annotations

import click

from jetfleet.cli.common import emit, handle_errors, output_option, table
from jetfleet.shared import defaults
from jetfleet.shared.catalog import builtin_catalogs, get_catalog


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
