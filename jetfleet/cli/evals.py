"""`jetfleet eval ...`: PowerTrain's evaluations on emulated boards or any two profile files, with progress on
stderr and `--output json` like every command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import click

from jetfleet.cli.common import emit, handle_errors, output_option, read_text_file
from jetfleet.shared.errors import InvalidArgument


@click.group("eval")
def eval_group() -> None:
    """Reproduce PowerTrain's, Pagoda's and Fulcrum's evaluations (emulated boards, or any two profile files)."""


def _check_repeats(repeats: int | None) -> None:
    if repeats is not None and not 1 <= repeats <= 100:
        raise InvalidArgument("repeats must be 1..100", field="repeats")


def _steps(label: str, output: str) -> tuple[Callable[[str], None], Callable[[int, int, str], None], Any]:
    """The ``say`` and ``progress`` callbacks of an evaluation: a bar of its steps on a terminal, a line per step
    in a pipe, JSON lines with --output json (every step is worth a line: they take tens of seconds each)."""
    from jetfleet.cli.progress import Progress

    progress = Progress.for_output(label, output)
    progress.every_s = 0.0
    return (lambda text: None), (lambda i, n, what: progress.update(i, n, what)), progress


@eval_group.command("transfer")
@click.option("--reference", "reference", required=True, type=click.Path(exists=True, dir_okay=False, allow_dash=True),
              help="a profiles CSV (- for standard input)")
@click.option("--target", "target", required=True, type=click.Path(exists=True, dir_okay=False, allow_dash=True),
              help="a profiles CSV (- for standard input, if --reference is a file)")
@click.option("--k", default=50, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--repeats", default=10, show_default=True, type=int)
@click.option("--strategy", default="random", type=click.Choice(["random", "spread", "uncertain"]))
@output_option
@handle_errors
def eval_transfer(reference: str, target: str, k: int, repeats: int, strategy: str, output: str) -> None:
    """MAPE of time and power over every target mode, transfer vs from scratch, from k profiled modes."""
    from jetfleet.research.powertrain.evaluate import transfer_files

    _check_repeats(repeats)
    from jetfleet.shared.files import source_name

    if reference == target == "-":
        raise InvalidArgument("--reference and --target cannot both be standard input", field="target")
    r = transfer_files(read_text_file(reference, "reference"), read_text_file(target, "target"), k, repeats,
                       strategy=strategy, names=(source_name(reference), source_name(target)))

    def text(d: dict[str, Any]) -> str:
        m = d["mape"]
        return (f"{d['reference']} ({d['reference_modes']} modes) -> {d['target']} ({d['target_modes']} modes), "
                f"k={d['k']}, {d['repeats']} repeats, {d['strategy']} modes; MAPE median [IQR]\n"
                + "\n".join(f"  {name:<16} {v[0]:6.2f}% [{v[1]:.2f}-{v[2]:.2f}]" for name, v in m.items()))

    emit(output, r, text)


@eval_group.command("powertrain")
@click.option("--out", "out_dir", default="eval-powertrain", show_default=True, type=click.Path(file_okay=False))
@click.option("--repeats", default=None, type=int, help="repeats of each trial [10; 5 with --quick]")
@click.option("--quick", is_flag=True, help="one reference, fewer targets, k values and repeats (minutes, not an hour)")
@output_option
@handle_errors
def eval_powertrain(out_dir: str, repeats: int | None, quick: bool, output: str) -> None:
    """The paper's tables on emulated boards: markdown report and PNG plots in --out (progress on stderr)."""
    from jetfleet.research.powertrain.report import run_report

    _check_repeats(repeats)
    say, step, progress = _steps("eval powertrain", output)
    try:
        path = run_report(Path(out_dir), repeats=repeats, quick=quick, say=say, progress=step)
    finally:
        progress.close()
    emit(output, {"report": str(path), "plots": sorted(str(p) for p in path.parent.glob("*.png")), "quick": quick},
         lambda d: f"report written to {d['report']}")


@eval_group.command("choices")
@click.option("--out", "out_dir", default="eval-choices", show_default=True, type=click.Path(file_okay=False))
@click.option("--repeats", default=10, show_default=True, type=int)
@click.option("--quick", is_flag=True, help="two workloads on AGX Orin, fewer k values (minutes)")
@click.option("--confidence", default=0.9, show_default=True, type=float, help="of the upper bounds")
@click.option("--max-steps", default=3, show_default=True, type=int, help="closed-loop steps")
@output_option
@handle_errors
def eval_choices(out_dir: str, repeats: int, quick: bool, confidence: float, max_steps: int, output: str) -> None:
    """Do budgets hold? Choices with calibrated bounds and the closed loop, 1 W steps, every workload; MAPE vs k."""
    from jetfleet.research.powertrain.choices_report import run_choices

    _check_repeats(repeats)
    if not 0 <= max_steps <= 10:
        raise InvalidArgument("max-steps must be 0..10", field="max_steps")
    say, step, progress = _steps("eval choices", output)
    try:
        path = run_choices(Path(out_dir), repeats=repeats, quick=quick, confidence=confidence, max_steps=max_steps,
                           say=say, progress=step)
    finally:
        progress.close()
    results = json.loads((path.parent / "results.json").read_text())
    emit(output, {"report": str(path), "results": str(path.parent / "results.json"), "overall": results.get("overall")},
         lambda d: f"report written to {d['report']}")


@eval_group.command("pagoda")
@click.option("--out", "out_dir", default="eval-pagoda", show_default=True, type=click.Path(file_okay=False),
              help="where pagoda.md, pagoda-results.json and the plots go (--out docs regenerates docs/pagoda.md)")
@output_option
@handle_errors
def eval_pagoda(out_dir: str, output: str) -> None:
    """Rooflines per power mode and inference energy tuning on emulated AGX Orin, Nano and Xavier NX (Pagoda)."""
    from jetfleet.research.pagoda.report import run_report

    say, step, progress = _steps("eval pagoda", output)
    try:
        path = run_report(Path(out_dir), say=say, progress=step)
    finally:
        progress.close()
    emit(output, {"report": str(path), "results": str(path.parent / "pagoda-results.json"),
                  "plots": sorted(str(p) for p in path.parent.glob("pagoda-*.png"))},
         lambda d: f"report written to {d['report']}")


@eval_group.command("fulcrum")
@click.option("--out", "out_dir", default="eval-fulcrum", show_default=True, type=click.Path(file_okay=False))
@click.option("--quick", is_flag=True, help="one scenario on AGX Orin (seconds): the machinery, not the figures")
@output_option
@handle_errors
def eval_fulcrum(out_dir: str, quick: bool, output: str) -> None:
    """Fulcrum: concurrent training + inference, GMD / ALS / baselines vs the exhaustive optimum on emulated boards:
    share of runs within both budgets, throughput gap, modes profiled (markdown + PNG in --out)."""
    from jetfleet.research.fulcrum.evaluate import run_report

    say, step, progress = _steps("eval fulcrum", output)
    try:
        path = run_report(Path(out_dir), quick=quick, progress=step)
    finally:
        progress.close()
    results = json.loads((path.parent / "results.json").read_text())
    emit(output, {"report": str(path), "results": str(path.parent / "results.json"), "table": results["table"],
                  "infeasible_scenarios": len(results["infeasible_scenarios"]), "quick": quick},
         lambda d: f"report written to {d['report']}\n" + "\n".join(
             f"  {r['strategy']:<10} within budgets {r['within_budgets_pct']:5.1f}%  gap mean {r['gap_mean_pct']:5.1f}%  "
             f"modes {r['modes_profiled_max']}" for r in d["table"]))


@eval_group.command("fleet")
@click.option("--out", "out_dir", default="eval-fleet", show_default=True, type=click.Path(file_okay=False))
@click.option("--jobs", default=30, show_default=True, type=int, help="jobs in the emulated queue")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--quick", is_flag=True, help="4 boards, two workloads, 8 jobs, three caps (a couple of minutes)")
@output_option
@handle_errors
def eval_fleet(out_dir: str, jobs: int, seed: int, quick: bool, output: str) -> None:
    """The lab as one power budget: the fleet scheduler against MAXN held back and an equal split, caps 40-100%."""
    from jetfleet.research.fleet.report import run_fleet

    if not 1 <= jobs <= 500:
        raise InvalidArgument("jobs must be 1..500", field="jobs")
    say, step, progress = _steps("eval fleet", output)
    counter = iter(range(10_000))
    try:
        path = run_fleet(Path(out_dir), jobs=jobs, seed=seed, quick=quick,
                         progress=lambda what: progress.update(next(counter), None, what))
    finally:
        progress.close()
    results = json.loads((path.parent / "results.json").read_text())
    emit(output, {"report": str(path), "results": str(path.parent / "results.json"),
                  "over_s_max": results["over_s_max"], "vs_maxn_min": results["vs_maxn_min"],
                  "optimum_ratio_min": results["optimum_ratio_min"]},
         lambda d: f"report written to {d['report']}")
