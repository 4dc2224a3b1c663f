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
@click.option("--out", "out_dir", default=None, type=click.Path(file_okay=False),
              help="where the report goes [eval-choices; with --grid: nowhere unless given]")
@click.option("--repeats", default=10, show_default=True, type=int)
@click.option("--quick", is_flag=True, help="two workloads on AGX Orin, fewer k values (minutes; the twin only)")
@click.option("--confidence", default=0.9, show_default=True, type=float, help="of the upper bounds")
@click.option("--max-steps", default=3, show_default=True, type=int, help="closed-loop steps")
@click.option("--reference", "reference", default=None, type=click.Path(exists=True, dir_okay=False),
              help="a measured reference grid (profile CSV): with --grid, score on measurements instead of the twin")
@click.option("--grid", "grid", default=None, type=click.Path(exists=True, dir_okay=False),
              help="the measured target grid (profile CSV, every mode): the truth the choices are scored on")
@click.option("--k", default=50, show_default=True, type=int, help="profiled modes of the grid (with --grid)")
@click.option("--strategy", default="balanced", show_default=True,
              type=click.Choice(["balanced", "random", "spread", "active"]), help="which k modes (with --grid)")
@click.option("--profiles", default=3, show_default=True, type=int,
              help="profiles to confirm a choice before committing to it (with --grid)")
@click.option("--window-noise", default=0.02, show_default=True, type=float,
              help="a window's (and a confirming profile's) relative measurement noise (with --grid)")
@output_option
@handle_errors
def eval_choices(out_dir: str | None, repeats: int, quick: bool, confidence: float, max_steps: int,
                 reference: str | None, grid: str | None, k: int, strategy: str, profiles: int, window_noise: float,
                 output: str) -> None:
    """Do budgets hold? Choices with calibrated bounds and the closed loop: on emulated boards (every workload,
    1 W steps, MAPE vs k), or with --reference and --grid on a measured grid (choices before and after the
    loop, confirm before committing, true MAPE beside the model's own)."""
    _check_repeats(repeats)
    if not 0 <= max_steps <= 10:
        raise InvalidArgument("max-steps must be 0..10", field="max_steps")
    if (reference is None) != (grid is None):
        missing = "--grid" if grid is None else "--reference"
        raise InvalidArgument(f"{missing} is missing: a measured evaluation needs both --reference and --grid",
                              field=missing.lstrip("-"))
    if grid is not None and reference is not None:
        if quick:
            raise InvalidArgument("--quick is for the twin's evaluation; with --grid use --k and --repeats",
                                  field="quick")
        _eval_measured(reference, grid, out_dir, repeats, confidence, max_steps, k, strategy, profiles,
                       window_noise, output)
        return
    from jetfleet.research.powertrain.choices_report import run_choices

    say, step, progress = _steps("eval choices", output)
    try:
        path = run_choices(Path(out_dir or "eval-choices"), repeats=repeats, quick=quick, confidence=confidence,
                           max_steps=max_steps, say=say, progress=step)
    finally:
        progress.close()
    results = json.loads((path.parent / "results.json").read_text())
    emit(output, {"report": str(path), "results": str(path.parent / "results.json"), "overall": results.get("overall")},
         lambda d: f"report written to {d['report']}")


def _eval_measured(reference: str, grid: str, out_dir: str | None, repeats: int, confidence: float, max_steps: int,
                   k: int, strategy: str, profiles: int, window_noise: float, output: str) -> None:
    from jetfleet.research.powertrain.measured import MeasuredOptions, evaluate_files, markdown, text_report

    opts = MeasuredOptions(k=k, repeats=repeats, strategy=strategy, confidence=confidence, max_steps=max_steps,
                           window_noise=window_noise, profiles=profiles)
    ref_text, grid_text = read_text_file(reference, "reference"), read_text_file(grid, "grid")
    _, step, progress = _steps("eval choices", output)
    counter = iter(range(1, 100))
    try:
        report = evaluate_files(ref_text, grid_text, opts, names=(Path(reference).name, Path(grid).name),
                                progress=lambda what: step(next(counter), 3, what))
    finally:
        progress.close()
    data = report.as_dict()
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(data, indent=1) + "\n")
        (out / "report.md").write_text(markdown(report) + "\n")
        data["report"] = str(out / "report.md")
    emit(output, data, lambda d: text_report(report))


@eval_group.command("twin-sweeps")
@click.option("--sweeps", "sweeps", required=True, type=click.Path(exists=True, dir_okay=False),
              help="the real NX/Nano sweeps (../shared/data/loudva-nx-nano/profiling-nx-nano.csv)")
@output_option
@handle_errors
def eval_twin_sweeps(sweeps: str, output: str) -> None:
    """The twin's inference power against real GPU-frequency sweeps (Xavier NX, Nano; Inception v3, batch 1):
    real beside twin with the stated tolerances (the table of docs/twin.md §5d); exit 0 even when one is missed."""
    from jetfleet.research.twincheck.inception import forward_cost
    from jetfleet.research.twincheck.sweeps import check_sweeps, markdown

    check = check_sweeps(read_text_file(sweeps, "sweeps"), forward_cost(1), Path(sweeps).name)
    data = {**check.as_dict(), "failures": check.failures()}
    emit(output, data, lambda d: markdown(check) + "".join(f"\nMISSED: {f}" for f in d["failures"]))


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
