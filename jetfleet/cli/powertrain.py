"""PowerTrain commands: models, predictions, the Pareto front, choices, evaluations."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

import click

from jetfleet.cli.common import (
    EXIT_INTERRUPTED,
    Connection,
    connection_options,
    emit,
    handle_errors,
    output_option,
    say,
    table,
)
from jetfleet.cli.complete import complete_board_models, complete_devices, complete_workloads
from jetfleet.shared.catalog import format_mhz
from jetfleet.shared.quantity import parse_deadline, parse_power_budget


def coverage_state(cov: dict[str, Any] | None) -> str:
    """'complete', 'PARTIAL', 'PARTIAL (accepted)' or 'unknown' (a controller older than coverage)."""
    if not cov:
        return "unknown"
    if not cov["partial"]:
        return "complete" + (" (partial reference)" if cov.get("partial_reference") else "")
    return "PARTIAL (accepted)" if cov["accepted_partial"] else "PARTIAL"


def coverage_text(cov: dict[str, Any]) -> list[str]:
    """A model's coverage as lines: the grid it came from, then per knob the levels seen against it."""
    state = coverage_state(cov)
    if cov["partial"]:
        state += ": it misses levels of its grid; predictions beyond the levels it saw are marked, their bounds widened"
    lines = [f"  coverage {state}", f"    fitted on {cov['fitted_modes']} of the {cov['grid_modes']} modes of "
             f"{cov['grid']}"]
    for knob, k in cov["knobs"].items():
        seen = k["seen"]
        span = f"{format_mhz(seen[0])}" if len(seen) == 1 else f"{format_mhz(seen[0])}..{format_mhz(seen[-1])}"
        line = f"    {knob}: {len(seen)} of {len(k['grid'])} levels ({span})"
        if k["missing"]:
            line += "; MISSING " + ", ".join(format_mhz(v) for v in k["missing"])
        if k["catalog"]:
            line += f"; catalog {format_mhz(k['catalog'][0])}..{format_mhz(k['catalog'][-1])} ({len(k['catalog'])} levels)"
        lines.append(line)
    if cov.get("partial_reference"):
        lines.append(f"    transferred from the PARTIAL reference {cov['partial_reference']}")
    return lines


def model_text(d: dict[str, Any]) -> str:
    """A model dict as text: what it is and where it comes from, its coverage, its held-out accuracy (and what it
    was measured on), and any in-sample figure labelled as such (a fit on the training modes says little about
    the modes it predicts)."""
    m = d["metrics"]
    cov = d.get("coverage")
    parent = f" from {d['parent_id']}" if d["parent_id"] else ""
    lines = [f"{d['model_id']}: {d['kind']} for {d['workload']} on {d['board_model']} (v{d['version']}, "
             f"{d['training_modes']} modes{parent})"]
    where = ("; measured inside its PARTIAL coverage only, not an accuracy over the catalog"
             if cov and cov["partial"] else "")

    def pair(prefix: str, what: str) -> None:
        t, p = m.get(f"{prefix}time_{what}_mape_pct"), m.get(f"{prefix}power_{what}_mape_pct")
        if t is not None and p is not None:
            label = {"cv": f"held-out MAPE ({int(m.get('folds', 5))}-fold cross-validation on its modes{where})",
                     "val": f"held-out MAPE (10% of its {d['training_modes']} modes kept out of training{where})",
                     "fit": "in-sample fit on its own training modes (not an accuracy)"}[what]
            lines.append(f"  {'from-scratch baseline: ' if prefix else ''}{label}: time {t:.1f}%, power {p:.1f}%")

    for prefix in ("", "scratch_"):
        for what in ("cv", "val", "fit"):
            pair(prefix, what)
    rest = {k: v for k, v in m.items() if "mape" not in k and k != "folds"}
    if rest:
        lines.append("  " + ", ".join(f"{k} {v}" for k, v in rest.items()))
    if not any(k.endswith(("_cv_mape_pct", "_val_mape_pct")) for k in m):
        lines.append("  no held-out accuracy recorded (a model from an older version: transfer again)")
    if cov:
        lines += coverage_text(cov)
    return "\n".join(lines)


@click.group("model")
def model_group() -> None:
    """Time and power prediction models (PowerTrain)."""


def _train(output: str, label: str, run: Callable[[Any], Any], interrupted: str) -> Any:
    """Run a model training with a progress display of its epochs; Ctrl-C cancels the call, which stops the
    training on the controller (``interrupted`` says so) and exits 130."""
    from jetfleet.cli.progress import Progress

    progress = Progress.for_output(label, output)

    def show(p: Any) -> None:
        losses = ", ".join(f"{v:.3g}" for v in p.losses)
        progress.update(p.epoch, p.epochs, (f"{p.phase} ({p.phase_index}/{p.phases}) " if p.phases > 1 else "")
                        + (f"loss {losses}" if losses else ""))

    try:
        return run(show)
    except KeyboardInterrupt:
        progress.close()
        say(output, interrupted, interrupted=True)
        sys.exit(EXIT_INTERRUPTED)
    finally:
        progress.close()


@model_group.command("train-reference")
@click.option("--board-model", required=True, shell_complete=complete_board_models)
@click.option("--workload", required=True, shell_complete=complete_workloads)
@click.option("--campaign", "campaign_id", default="", help="only this campaign's profiles")
@click.option("--epochs", default=100, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--no-dropout", is_flag=True, help="the published MLP without its dropout layers (the default)")
@click.option("--dropout", "published_dropout", is_flag=True,
              help="the published MLP with its dropout layers (0.4, 0.3): fits worse on the twin (docs/jobs.md)")
@click.option("--accept-partial", is_flag=True, help="fit profiles that miss knob levels of their grid (a cancelled "
              "campaign), refused otherwise; the model is marked partial and trusted only inside the levels it saw")
@connection_options
@output_option
@handle_errors
def train_reference(conn: Connection, board_model: str, workload: str, campaign_id: str, epochs: int, no_dropout: bool,
                    published_dropout: bool, accept_partial: bool, output: str) -> None:
    """Train the reference time and power MLPs on a fully profiled workload (the published layers, by default
    without dropout), showing each epoch; Ctrl-C cancels the training (nothing is stored). Profiles that miss
    knob levels of their grid are refused, naming them, unless --accept-partial."""
    if no_dropout and published_dropout:
        raise click.UsageError("--no-dropout and --dropout contradict each other; give one")
    with conn.client() as c:
        m = _train(output, f"reference {workload}@{board_model}", lambda show: c.train_reference(
            board_model, workload, campaign_id=campaign_id, epochs=epochs, published_dropout=published_dropout,
            accept_partial=accept_partial, on_progress=show),
            "interrupted: training cancelled; the controller stops it at its next epoch and stores no model")
    emit(output, m.to_dict(), model_text)


@model_group.command("transfer")
@click.option("--reference", "reference_id", default="", help="reference model id (default: the newest of "
              "--reference-board-model/--reference-workload)")
@click.option("--reference-board-model", default="agx-orin", show_default=True, shell_complete=complete_board_models)
@click.option("--reference-workload", default="resnet18", show_default=True, shell_complete=complete_workloads)
@click.option("--board-model", required=True, help="target board model", shell_complete=complete_board_models)
@click.option("--workload", required=True, help="target workload", shell_complete=complete_workloads)
@click.option("--campaign", "campaign_id", default="", help="only this campaign's profiles of the target")
@connection_options
@output_option
@handle_errors
def transfer(conn: Connection, reference_id: str, reference_board_model: str, reference_workload: str,
             board_model: str, workload: str, campaign_id: str, output: str) -> None:
    """Fine-tune a reference on the target's profiled modes (with 5-fold calibration); the from-scratch baseline
    is fitted beside it. Shows each pass's epochs; Ctrl-C cancels (nothing is stored)."""
    with conn.client() as c:
        m = _train(output, f"transfer to {workload}@{board_model}", lambda show: c.transfer_model(
            board_model, workload, reference_id=reference_id, reference_board_model=reference_board_model,
            reference_workload=reference_workload, campaign_id=campaign_id, on_progress=show),
            "interrupted: transfer cancelled; the controller stops it at its next epoch and stores no model")
    emit(output, m.to_dict(), model_text)


@model_group.command("ls")
@connection_options
@output_option
@handle_errors
def model_ls(conn: Connection, output: str) -> None:
    """Every stored model."""
    with conn.client() as c:
        rows = [m.to_dict() for m in c.list_models()]
    emit(output, rows, lambda rs: table([[r["model_id"], r["kind"], r["board_model"], r["workload"],
                                          r["training_modes"], coverage_state(r["coverage"])] for r in rs],
                                        ["MODEL", "KIND", "BOARD", "WORKLOAD", "MODES", "COVERAGE"]))


@model_group.command("show")
@click.argument("model_id")
@connection_options
@output_option
@handle_errors
def model_show(conn: Connection, model_id: str, output: str) -> None:
    """One model's lineage, metrics and coverage (the knob levels it was fitted on)."""
    with conn.client() as c:
        emit(output, c.get_model(model_id).to_dict(), model_text)


def _predictions(conn: Connection, board_model: str, workload: str, model_id: str, grid: str,
                 pareto_only: bool, confidence: float = 0.0) -> Any:
    with conn.client() as c:
        return c.predict(board_model, workload, model_id=model_id, grid=grid, pareto_only=pareto_only,
                         confidence=confidence)


def _bounds_note(confidence: float) -> str:
    return (f"bounds: each holds for {confidence:.0%} of modes (calibrated on held-out modes)" if confidence
            else "no bounds: the model has no calibration (transfer it again)")


def _outside_note(rows: list[dict[str, Any]]) -> str:
    outside = sum(not x["covered"] for x in rows)
    return (f"; {outside} OUTSIDE the model's coverage (beyond the knob levels it was fitted on: predicted at the "
            "nearest mode it covers, bounds widened; `model show` says what it saw)" if outside else "")


confidence_option = click.option("--confidence", default=0.0, type=float,
                                  help="level of each calibrated bound (default 0.9)")


@click.command("predict")
@click.option("--board-model", required=True, shell_complete=complete_board_models)
@click.option("--workload", required=True, shell_complete=complete_workloads)
@click.option("--model", "model_id", default="")
@click.option("--grid", default="full", show_default=True)
@confidence_option
@connection_options
@output_option
@handle_errors
def predict(conn: Connection, board_model: str, workload: str, model_id: str, grid: str, confidence: float,
            output: str) -> None:
    """Predicted time per minibatch and power of every mode of a grid, with calibrated bounds."""
    r = _predictions(conn, board_model, workload, model_id, grid, False, confidence)
    rows = [p.to_dict() for p in r.predictions]
    emit(output, {"model_id": r.model_id, "confidence": r.confidence, "predictions": rows}, lambda d: table(
        [[x["mode"], f"{x['time_ms']:.1f}", f"{x['time_ms_lo']:.1f}-{x['time_ms_hi']:.1f}", f"{x['power_w']:.2f}",
          f"{x['power_w_lo']:.2f}-{x['power_w_hi']:.2f}", "*" if x["pareto"] else "", "" if x["covered"] else "OUTSIDE"]
         for x in d["predictions"]],
        ["MODE", "MS/MINIBATCH", "MS BOUNDS", "W", "W BOUNDS", "PARETO", "COVERAGE"])
        + f"\n{len(rows)} modes, model {d['model_id']}; {_bounds_note(d['confidence'])}" + _outside_note(rows))


@click.command("pareto")
@click.option("--board-model", required=True, shell_complete=complete_board_models)
@click.option("--workload", required=True, shell_complete=complete_workloads)
@click.option("--model", "model_id", default="")
@click.option("--plot", type=click.Path(dir_okay=False), default=None, help="write the front as a PNG")
@confidence_option
@connection_options
@output_option
@handle_errors
def pareto(conn: Connection, board_model: str, workload: str, model_id: str, plot: str | None, confidence: float,
           output: str) -> None:
    """The predicted time-power Pareto front of every mode, with calibrated bounds."""
    r = _predictions(conn, board_model, workload, model_id, "full", plot is None, confidence)
    rows = [p.to_dict() for p in r.predictions]
    front = sorted((x for x in rows if x["pareto"]), key=lambda x: x["time_ms"])
    if plot:
        from jetfleet.research.plots import plot_front

        plot_front(rows, Path(plot), f"{workload} on {board_model} ({r.model_id})")
    emit(output, {"model_id": r.model_id, "confidence": r.confidence, "front": front}, lambda d: table(
        [[x["mode"], f"{x['time_ms']:.1f}", f"{x['time_ms_lo']:.1f}-{x['time_ms_hi']:.1f}", f"{x['power_w']:.2f}",
          f"{x['power_w_lo']:.2f}-{x['power_w_hi']:.2f}"] for x in d["front"]],
        ["MODE", "MS/MINIBATCH", "MS BOUNDS", "W", "W BOUNDS"])
        + f"\n{len(front)} Pareto-optimal modes; {_bounds_note(d['confidence'])}" + _outside_note(d["front"])
        + (f"; plot written to {plot}" if plot else ""))


@click.command("optimize")
@click.argument("device", required=False, default="", shell_complete=complete_devices)
@click.option("--board-model", default="", help="instead of DEVICE: every online board of a model",
              shell_complete=complete_board_models)
@click.option("--workload", required=True, shell_complete=complete_workloads)
@click.option("--power-budget", default=None, help="fastest mode under this power, e.g. 30W")
@click.option("--deadline", default=None, help="lowest-power mode finishing an epoch within, e.g. 2h, 90m, 45s (the "
              "unit is required; needs --minibatches-per-epoch)")
@click.option("--min-energy", is_flag=True, help="least energy per minibatch (per epoch with --minibatches-per-epoch)")
@click.option("--minibatches-per-epoch", default=None, type=click.IntRange(1, 2**32 - 1),
              help="an epoch's length: required with --deadline; otherwise figures are per minibatch")
@click.option("--model", "model_id", default="")
@click.option("--apply", "apply_", is_flag=True, help="push the mode to the board(s), then measure and compare")
@click.option("--refine", is_flag=True, help="with --apply: add the observed point to the profiles")
@click.option("--confidence", default=0.0, type=float,
              help="level of the upper bound a budget or deadline is checked against (default 0.9)")
@connection_options
@output_option
@handle_errors
def optimize(conn: Connection, device: str, board_model: str, workload: str, power_budget: str | None,
             deadline: str | None, min_energy: bool, minibatches_per_epoch: int | None, model_id: str, apply_: bool,
             refine: bool, confidence: float, output: str) -> None:
    """Choose the mode that meets a goal for WORKLOAD on DEVICE (or --board-model) by its calibrated upper bound;
    --apply to set and verify it (an observation over the budget is flagged)."""
    budget_w = parse_power_budget(power_budget) if power_budget else 0.0
    deadline_s = parse_deadline(deadline) if deadline else 0.0
    if deadline and minibatches_per_epoch is None:
        raise click.UsageError("--deadline is per epoch: give --minibatches-per-epoch (the epoch's length in "
                               "minibatches), or use `jetfleet job submit --deadline` for a whole job")
    with conn.client() as c:
        r = c.optimize(workload, device_id=device, board_model=board_model, model_id=model_id,
                       power_budget_w=budget_w, deadline_s=deadline_s, min_energy=min_energy,
                       minibatches_per_epoch=minibatches_per_epoch or 1, apply=apply_, refine=refine,
                       confidence=confidence)
    data = r.to_dict()
    data["minibatches_per_epoch"] = minibatches_per_epoch
    per = "epoch" if minibatches_per_epoch else "minibatch"

    def text(d: dict[str, Any]) -> str:
        bound = (f" (<= {d['predicted_power_w_hi']:.2f} W, {d['predicted_time_ms_hi']:.1f} ms at {d['confidence']:.0%})"
                 if d["confidence"] else " (no calibrated bounds)")
        lines = [f"{d['goal']}: {d['mode']}" + (f" ({d['mode_name']})" if d["mode_name"] else ""),
                 f"  predicted {d['predicted_time_ms']:.1f} ms/minibatch, {d['predicted_power_w']:.2f} W{bound}, "
                 + (f"epoch of {d['minibatches_per_epoch']} minibatches {d['epoch_s']:.1f} s, "
                    f"{d['energy_per_epoch_j']:.1f} J/epoch" if per == "epoch" else
                    f"{d['energy_per_epoch_j']:.2f} J/minibatch") + f" (model {d['model_id']})"]
        if d["at_risk"]:
            lines.append(f"  AT RISK: no mode meets the goal at {d['confidence']:.0%}; this is the closest")
        if not d["covered"]:
            lines.append(f"  OUTSIDE COVERAGE: no mode the model covers meets the goal; {d['coverage_note']}")
        for a in d["applied"]:
            lines.append(f"  {a['device_id']} runs {a['confirmed']}: observed {a['observed_time_ms']:.1f} ms, "
                         f"{a['observed_power_w']:.2f} W (prediction off by {a['time_error_pct']:+.1f}% time, "
                         f"{a['power_error_pct']:+.1f}% power)" + (f" — {a['note']}" if a["note"] else ""))
        return "\n".join(lines)

    emit(output, data, text)
