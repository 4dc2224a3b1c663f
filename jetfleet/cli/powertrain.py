"""PowerTrain commands: models, predictions, the Pareto front, choices, evaluations."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click

from jetfleet.cli.common import emit, handle_errors, output_option, table
from jetfleet.cli.fleet import _client, controller_option
from jetfleet.shared.convert import mode_text
from jetfleet.shared.errors import InvalidArgument
from jetfleet.shared.proto import operator_pb2


def model_dict(m: Any) -> dict[str, Any]:
    return {"model_id": m.model_id, "kind": m.kind, "board_model": m.board_model, "workload": m.workload,
            "parent_id": m.parent_id or None, "version": m.version, "training_modes": m.training_modes,
            "metrics": {k: round(v, 3) for k, v in sorted(m.metrics.items())}}


def model_text(d: dict[str, Any]) -> str:
    metrics = ", ".join(f"{k} {v}" for k, v in d["metrics"].items())
    parent = f" from {d['parent_id']}" if d["parent_id"] else ""
    return (f"{d['model_id']}: {d['kind']} for {d['workload']} on {d['board_model']} (v{d['version']}, "
            f"{d['training_modes']} modes{parent})\n  {metrics}")


@click.group("model")
def model_group() -> None:
    """Time and power prediction models (PowerTrain)."""


@model_group.command("train-reference")
@click.option("--board-model", required=True)
@click.option("--workload", required=True)
@click.option("--campaign", "campaign_id", default="", help="only this campaign's profiles")
@click.option("--epochs", default=100, show_default=True, type=int)
@click.option("--no-dropout", is_flag=True, help="the published MLP without its dropout layers")
@controller_option
@output_option
@handle_errors
def train_reference(board_model: str, workload: str, campaign_id: str, epochs: int, no_dropout: bool,
                    controller: str | None, output: str) -> None:
    """Train the reference time and power MLPs on a fully profiled workload (the published architecture)."""
    with _client(controller) as c:
        m = c.call("TrainReference", operator_pb2.TrainReferenceRequest(
            board_model=board_model, workload=workload, campaign_id=campaign_id, epochs=epochs,
            no_dropout=no_dropout))
    emit(output, model_dict(m), model_text)


@model_group.command("transfer")
@click.option("--reference", "reference_id", default="", help="reference model id (default: the newest of "
              "--reference-board-model/--reference-workload)")
@click.option("--reference-board-model", default="agx-orin", show_default=True)
@click.option("--reference-workload", default="resnet18", show_default=True)
@click.option("--board-model", required=True, help="target board model")
@click.option("--workload", required=True, help="target workload")
@click.option("--campaign", "campaign_id", default="", help="only this campaign's profiles of the target")
@controller_option
@output_option
@handle_errors
def transfer(reference_id: str, reference_board_model: str, reference_workload: str, board_model: str,
             workload: str, campaign_id: str, controller: str | None, output: str) -> None:
    """Fine-tune a reference on the target's profiled modes; the from-scratch baseline is fitted beside it."""
    with _client(controller) as c:
        m = c.call("TransferModel", operator_pb2.TransferModelRequest(
            reference_id=reference_id, reference_board_model=reference_board_model,
            reference_workload=reference_workload, board_model=board_model, workload=workload,
            campaign_id=campaign_id))
    emit(output, model_dict(m), model_text)


@model_group.command("ls")
@controller_option
@output_option
@handle_errors
def model_ls(controller: str | None, output: str) -> None:
    """Every stored model."""
    with _client(controller) as c:
        rows = [model_dict(m) for m in c.call("ListModels", operator_pb2.ListModelsRequest()).models]
    emit(output, rows, lambda rs: table([[r["model_id"], r["kind"], r["board_model"], r["workload"],
                                          r["training_modes"]] for r in rs],
                                        ["MODEL", "KIND", "BOARD", "WORKLOAD", "MODES"]))


@model_group.command("show")
@click.argument("model_id")
@controller_option
@output_option
@handle_errors
def model_show(model_id: str, controller: str | None, output: str) -> None:
    """One model's lineage and metrics."""
    with _client(controller) as c:
        emit(output, model_dict(c.call("GetModel", operator_pb2.GetModelRequest(model_id=model_id))), model_text)


def _predictions(controller: str | None, board_model: str, workload: str, model_id: str, grid: str,
                 pareto_only: bool) -> Any:
    with _client(controller) as c:
        return c.call("Predict", operator_pb2.PredictRequest(board_model=board_model, workload=workload,
                                                             model_id=model_id, grid=grid, pareto_only=pareto_only))


def _rows(r: Any) -> list[dict[str, Any]]:
    return [{"mode": mode_text(p.mode), "time_ms": round(p.time_ms, 3), "power_w": round(p.power_w, 3),
             "pareto": p.pareto} for p in r.predictions]


@click.command("predict")
@click.option("--board-model", required=True)
@click.option("--workload", required=True)
@click.option("--model", "model_id", default="")
@click.option("--grid", default="full", show_default=True)
@controller_option
@output_option
@handle_errors
def predict(board_model: str, workload: str, model_id: str, grid: str, controller: str | None, output: str) -> None:
    """Predicted time per minibatch and power of every mode of a grid."""
    r = _predictions(controller, board_model, workload, model_id, grid, False)
    rows = _rows(r)
    emit(output, {"model_id": r.model_id, "predictions": rows}, lambda d: table(
        [[x["mode"], f"{x['time_ms']:.1f}", f"{x['power_w']:.2f}", "*" if x["pareto"] else ""] for x in d["predictions"]],
        ["MODE", "MS/MINIBATCH", "W", "PARETO"]) + f"\n{len(rows)} modes, model {d['model_id']}")


@click.command("pareto")
@click.option("--board-model", required=True)
@click.option("--workload", required=True)
@click.option("--model", "model_id", default="")
@click.option("--plot", type=click.Path(dir_okay=False), default=None, help="write the front as a PNG")
@controller_option
@output_option
@handle_errors
def pareto(board_model: str, workload: str, model_id: str, plot: str | None, controller: str | None,
           output: str) -> None:
    """The predicted time-power Pareto front of every mode."""
    r = _predictions(controller, board_model, workload, model_id, "full", plot is None)
    rows = _rows(r)
    front = sorted((x for x in rows if x["pareto"]), key=lambda x: x["time_ms"])
    if plot:
        from jetfleet.controller.powertrain.report import plot_front

        plot_front(rows, Path(plot), f"{workload} on {board_model} ({r.model_id})")
    emit(output, {"model_id": r.model_id, "front": front}, lambda d: table(
        [[x["mode"], f"{x['time_ms']:.1f}", f"{x['power_w']:.2f}"] for x in d["front"]], ["MODE", "MS/MINIBATCH", "W"])
        + f"\n{len(front)} Pareto-optimal modes" + (f"; plot written to {plot}" if plot else ""))


def parse_quantity(text: str, unit: str) -> float:
    """'30W' / '30' -> 30.0 ; '2h', '90m', '45s', '120' (seconds) for a deadline."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", text)
    scale = {"W": {"": 1, "w": 1}, "s": {"": 1, "s": 1, "m": 60, "min": 60, "h": 3600}}[unit]
    if not m or m.group(2).lower() not in scale:
        raise InvalidArgument(f"{text!r} is not a {'power like 30W' if unit == 'W' else 'duration like 2h, 90m, 45s'}",
                              field="power_budget" if unit == "W" else "deadline")
    return float(m.group(1)) * scale[m.group(2).lower()]


@click.command("optimize")
@click.argument("device", required=False, default="")
@click.option("--board-model", default="", help="instead of DEVICE: every online board of a model")
@click.option("--workload", required=True)
@click.option("--power-budget", default=None, help="fastest mode under this power, e.g. 30W")
@click.option("--deadline", default=None, help="lowest-power mode finishing an epoch within, e.g. 2h")
@click.option("--min-energy", is_flag=True, help="least energy per epoch")
@click.option("--minibatches-per-epoch", default=1, show_default=True, type=int)
@click.option("--model", "model_id", default="")
@click.option("--apply", "apply_", is_flag=True, help="push the mode to the board(s), then measure and compare")
@click.option("--refine", is_flag=True, help="with --apply: add the observed point to the profiles")
@controller_option
@output_option
@handle_errors
def optimize(device: str, board_model: str, workload: str, power_budget: str | None, deadline: str | None,
             min_energy: bool, minibatches_per_epoch: int, model_id: str, apply_: bool, refine: bool,
             controller: str | None, output: str) -> None:
    """Choose the mode that meets a goal for WORKLOAD on DEVICE (or --board-model); --apply to set and verify it."""
    req = operator_pb2.OptimizeRequest(
        device_id=device, board_model=board_model, workload=workload, model_id=model_id,
        power_budget_w=parse_quantity(power_budget, "W") if power_budget else 0.0,
        deadline_s=parse_quantity(deadline, "s") if deadline else 0.0, min_energy=min_energy,
        minibatches_per_epoch=minibatches_per_epoch, apply=apply_, refine=refine)
    with _client(controller) as c:
        r = c.call("Optimize", req)
    data = {"model_id": r.model_id, "goal": r.goal, "mode": mode_text(r.mode), "mode_name": r.mode_name or None,
            "predicted_time_ms": round(r.predicted_time_ms, 3), "predicted_power_w": round(r.predicted_power_w, 3),
            "epoch_s": round(r.epoch_s, 3), "energy_per_epoch_j": round(r.energy_per_epoch_j, 3),
            "applied": [{"device_id": a.device_id, "confirmed": mode_text(a.confirmed),
                         "observed_time_ms": round(a.observed_time_ms, 3), "observed_power_w": round(a.observed_power_w, 3),
                         "time_error_pct": round(a.time_error_pct, 2), "power_error_pct": round(a.power_error_pct, 2),
                         "decision_id": a.decision_id} for a in r.applied]}

    def text(d: dict[str, Any]) -> str:
        lines = [f"{d['goal']}: {d['mode']}" + (f" ({d['mode_name']})" if d["mode_name"] else ""),
                 f"  predicted {d['predicted_time_ms']:.1f} ms/minibatch, {d['predicted_power_w']:.2f} W, "
                 f"epoch {d['epoch_s']:.1f} s, {d['energy_per_epoch_j']:.1f} J/epoch (model {d['model_id']})"]
        for a in d["applied"]:
            lines.append(f"  {a['device_id']} runs {a['confirmed']}: observed {a['observed_time_ms']:.1f} ms, "
                         f"{a['observed_power_w']:.2f} W (prediction off by {a['time_error_pct']:+.1f}% time, "
                         f"{a['power_error_pct']:+.1f}% power)")
        return "\n".join(lines)

    emit(output, data, text)


@click.group("eval")
def eval_group() -> None:
    """Reproduce PowerTrain's evaluations (emulated boards, or any two profile files)."""


@eval_group.command("transfer")
@click.option("--reference", "reference", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--target", "target", required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--k", default=50, show_default=True, type=int)
@click.option("--repeats", default=10, show_default=True, type=int)
@click.option("--strategy", default="random", type=click.Choice(["random", "spread", "uncertain"]))
@output_option
@handle_errors
def eval_transfer(reference: str, target: str, k: int, repeats: int, strategy: str, output: str) -> None:
    """MAPE of time and power over every target mode, transfer vs from scratch, from k profiled modes."""
    from jetfleet.controller.powertrain.evaluate import transfer_files

    if not 1 <= repeats <= 100:
        raise InvalidArgument("repeats must be 1..100", field="repeats")
    r = transfer_files(Path(reference).read_text(), Path(target).read_text(), k, repeats, strategy=strategy,
                       names=(Path(reference).name, Path(target).name))

    def text(d: dict[str, Any]) -> str:
        m = d["mape"]
        return (f"{d['reference']} ({d['reference_modes']} modes) -> {d['target']} ({d['target_modes']} modes), "
                f"k={d['k']}, {d['repeats']} repeats, {d['strategy']} modes; MAPE median [IQR]\n"
                + "\n".join(f"  {name:<16} {v[0]:6.2f}% [{v[1]:.2f}-{v[2]:.2f}]" for name, v in m.items()))

    emit(output, r, text)


@eval_group.command("powertrain")
@click.option("--out", "out_dir", default="eval-powertrain", show_default=True, type=click.Path(file_okay=False))
@click.option("--repeats", default=10, show_default=True, type=int)
@click.option("--quick", is_flag=True, help="fewer targets and k values (minutes, not tens of minutes)")
@handle_errors
def eval_powertrain(out_dir: str, repeats: int, quick: bool) -> None:
    """The paper's tables on emulated boards: markdown report and PNG plots in --out."""
    from jetfleet.controller.powertrain.report import run_report

    if not 1 <= repeats <= 100:
        raise InvalidArgument("repeats must be 1..100", field="repeats")
    path = run_report(Path(out_dir), repeats=repeats, quick=quick, say=lambda s: click.echo(s, err=True))
    click.echo(f"report written to {path}")



