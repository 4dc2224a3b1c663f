"""PowerTrain: prediction models (train, transfer, list), predictions with calibrated bounds, choices."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from jetfleet.shared.catalog import PowerMode
from jetfleet.shared.convert import mode_from_pb
from jetfleet.shared.errors import JetfleetError
from jetfleet.shared.proto import operator_pb2


def _r(x: float) -> float:
    return round(x, 3)


@dataclass(frozen=True)
class KnobCoverage:
    """One knob of a model's coverage: the levels it was fitted on (``seen``), those of the grid its profiles came
    from, those of the target catalog (empty: unknown), and the grid's levels it never saw (``missing``)."""

    knob: str
    seen: list[float]
    grid: list[float]
    catalog: list[float]
    missing: list[float]


@dataclass(frozen=True)
class ModelCoverage:
    """Where a model is valid: per knob, the levels it was fitted on. ``partial``: it misses levels of the grid its
    profiles came from (``grid``, ``grid_modes`` modes); ``accepted_partial``: the operator accepted that;
    ``partial_reference``: a transfer's reference, when that one is partial."""

    knobs: list[KnobCoverage]
    grid: str
    grid_modes: int
    fitted_modes: int
    partial: bool
    accepted_partial: bool
    partial_reference: str | None

    @classmethod
    def from_pb(cls, c: operator_pb2.ModelCoverage) -> ModelCoverage:
        """From the wire message."""
        return cls([KnobCoverage(k.knob, list(k.seen), list(k.grid), list(k.catalog), list(k.missing))
                    for k in c.knobs], c.grid, c.grid_modes, c.fitted_modes, c.partial, c.accepted_partial,
                   c.partial_reference or None)

    def to_dict(self) -> dict[str, Any]:
        """As `model ls/show --output json` print it."""
        return {"grid": self.grid, "grid_modes": self.grid_modes, "fitted_modes": self.fitted_modes,
                "partial": self.partial, "accepted_partial": self.accepted_partial,
                "partial_reference": self.partial_reference,
                "knobs": {k.knob: {"seen": k.seen, "grid": k.grid, "catalog": k.catalog, "missing": k.missing}
                          for k in self.knobs}}


@dataclass(frozen=True)
class Model:
    """A stored time-and-power model: what it predicts, where it comes from, its metrics (MAPE % held out and
    in-sample, fit seconds, the from-scratch baseline beside a transfer) and its coverage (None from a controller
    older than coverage)."""

    model_id: str
    kind: str                 # reference, transfer
    board_model: str
    workload: str
    parent_id: str | None
    version: int
    training_modes: int
    created_s: float
    metrics: dict[str, float]
    coverage: ModelCoverage | None = None

    @classmethod
    def from_pb(cls, m: operator_pb2.ModelInfo) -> Model:
        """From the wire message."""
        return cls(m.model_id, m.kind, m.board_model, m.workload, m.parent_id or None, m.version, m.training_modes,
                   m.created_s, dict(m.metrics), ModelCoverage.from_pb(m.coverage) if m.HasField("coverage") else None)

    def to_dict(self) -> dict[str, Any]:
        """As `model ls/show/train-reference/transfer --output json` print it (metrics to 3 decimals)."""
        return {"model_id": self.model_id, "kind": self.kind, "board_model": self.board_model,
                "workload": self.workload, "parent_id": self.parent_id, "version": self.version,
                "training_modes": self.training_modes, "created_s": self.created_s,
                "metrics": {k: _r(v) for k, v in sorted(self.metrics.items())},
                "coverage": self.coverage.to_dict() if self.coverage else None}


@dataclass(frozen=True)
class TrainingProgress:
    """One step of a model's training: ``epoch`` of ``epochs`` in phase ``phase`` (number ``phase_index`` of
    ``phases``), the best loss so far of each network trained together, wall seconds since the start."""

    phase: str
    epoch: int
    epochs: int
    phase_index: int
    phases: int
    losses: list[float]
    elapsed_s: float

    @property
    def fraction(self) -> float:
        """Share of the whole training done, 0..1 (phases counted as equal)."""
        if not self.phases or not self.epochs:
            return 0.0
        return ((self.phase_index - 1) + self.epoch / self.epochs) / self.phases


@dataclass(frozen=True)
class Prediction:
    """A mode's predicted time per minibatch (ms) and power (W), each with calibrated bounds; on the front or not."""

    mode: PowerMode
    time_ms: float
    power_w: float
    time_ms_lo: float
    time_ms_hi: float
    power_w_lo: float
    power_w_hi: float
    pareto: bool
    covered: bool = True      # False: outside the model's coverage (predicted at the nearest mode in it, bounds wider)

    def to_dict(self) -> dict[str, Any]:
        """As `predict --output json` prints each row (3 decimals)."""
        return {"mode": str(self.mode), "time_ms": _r(self.time_ms), "power_w": _r(self.power_w),
                "time_ms_lo": _r(self.time_ms_lo), "time_ms_hi": _r(self.time_ms_hi),
                "power_w_lo": _r(self.power_w_lo), "power_w_hi": _r(self.power_w_hi), "pareto": self.pareto,
                "covered": self.covered}


@dataclass(frozen=True)
class Predictions:
    """Every mode of a grid predicted by one model (``predictions``), at a confidence (0: the model has none)."""

    model_id: str
    confidence: float
    pareto_size: int
    predictions: list[Prediction]

    @classmethod
    def from_pb(cls, r: operator_pb2.PredictResponse) -> Predictions:
        """From the wire message."""
        return cls(r.model_id, r.confidence, r.pareto_size, [
            Prediction(mode_from_pb(p.mode), p.time_ms, p.power_w, p.time_ms_lo, p.time_ms_hi, p.power_w_lo, p.power_w_hi,
                       p.pareto, not p.outside_coverage) for p in r.predictions])

    @property
    def front(self) -> list[Prediction]:
        """The Pareto-optimal modes, fastest first."""
        return sorted((p for p in self.predictions if p.pareto), key=lambda p: p.time_ms)


@dataclass(frozen=True)
class Applied:
    """A choice applied to a board: the mode it confirmed, what a short profile observed, the prediction's error
    (%), and whether the observation misses the goal (``note`` says why)."""

    device_id: str
    confirmed: PowerMode
    observed_time_ms: float
    observed_power_w: float
    time_error_pct: float
    power_error_pct: float
    decision_id: str
    goal_missed: bool
    note: str

    def to_dict(self) -> dict[str, Any]:
        """As `optimize --output json` prints each applied board."""
        return {"device_id": self.device_id, "confirmed": str(self.confirmed),
                "observed_time_ms": _r(self.observed_time_ms), "observed_power_w": _r(self.observed_power_w),
                "time_error_pct": round(self.time_error_pct, 2), "power_error_pct": round(self.power_error_pct, 2),
                "decision_id": self.decision_id, "goal_missed": self.goal_missed, "note": self.note or None}


@dataclass(frozen=True)
class Choice:
    """The mode chosen for a goal with its predictions and bounds; ``epoch_s``/``energy_per_epoch_j`` for the
    epoch length asked (one minibatch when none was); ``at_risk`` when only the closest mode could be offered;
    ``covered`` False when it is outside the model's coverage (``coverage_note`` says why); ``applied`` when it
    was pushed to boards."""

    model_id: str
    goal: str
    mode: PowerMode
    mode_name: str | None
    predicted_time_ms: float
    predicted_power_w: float
    epoch_s: float
    energy_per_epoch_j: float
    confidence: float
    predicted_time_ms_lo: float
    predicted_time_ms_hi: float
    predicted_power_w_lo: float
    predicted_power_w_hi: float
    at_risk: bool
    applied: list[Applied]
    covered: bool = True
    coverage_note: str = ""

    @classmethod
    def from_pb(cls, r: operator_pb2.OptimizeResponse) -> Choice:
        """From the wire message."""
        return cls(r.model_id, r.goal, mode_from_pb(r.mode), r.mode_name or None, r.predicted_time_ms,
                   r.predicted_power_w, r.epoch_s, r.energy_per_epoch_j, r.confidence, r.predicted_time_ms_lo,
                   r.predicted_time_ms_hi, r.predicted_power_w_lo, r.predicted_power_w_hi, r.at_risk,
                   [Applied(a.device_id, mode_from_pb(a.confirmed), a.observed_time_ms, a.observed_power_w,
                            a.time_error_pct, a.power_error_pct, a.decision_id, a.goal_missed, a.note)
                    for a in r.applied], not r.outside_coverage, r.coverage_note)

    def to_dict(self) -> dict[str, Any]:
        """As `optimize --output json` prints it."""
        return {"model_id": self.model_id, "goal": self.goal, "mode": str(self.mode), "mode_name": self.mode_name,
                "predicted_time_ms": _r(self.predicted_time_ms), "predicted_power_w": _r(self.predicted_power_w),
                "epoch_s": _r(self.epoch_s), "energy_per_epoch_j": _r(self.energy_per_epoch_j),
                "confidence": self.confidence, "predicted_time_ms_hi": _r(self.predicted_time_ms_hi),
                "predicted_power_w_lo": _r(self.predicted_power_w_lo),
                "predicted_power_w_hi": _r(self.predicted_power_w_hi), "at_risk": self.at_risk,
                "covered": self.covered, "coverage_note": self.coverage_note or None,
                "applied": [a.to_dict() for a in self.applied]}


ProgressCallback = Callable[[TrainingProgress], None]


class ModelMethods:
    """PowerTrain: ``train_reference``, ``transfer_model``, ``list_models``, ``get_model``, ``predict``,
    ``optimize``."""

    _unary: Any
    _stream: Any

    def _train(self, method: str, request: Any, on_progress: ProgressCallback | None) -> Model:
        for msg in self._stream(method, request):
            if msg.HasField("model"):
                return Model.from_pb(msg.model)
            if on_progress is not None:
                on_progress(TrainingProgress(msg.phase, msg.epoch, msg.epochs, msg.phase_index, msg.phases,
                                             list(msg.losses), msg.elapsed_s))
        raise JetfleetError(f"{method} ended without a model")

    def train_reference(self, board_model: str, workload: str, *, campaign_id: str = "", epochs: int = 100,
                        published_dropout: bool = False, accept_partial: bool = False,
                        on_progress: ProgressCallback | None = None) -> Model:
        """Train and store the reference time and power networks on every profiled mode of (board model, workload)
        (only campaign ``campaign_id``'s if given): the published layers, without dropout unless
        ``published_dropout``. Profiles that miss knob levels of their grid (a cancelled campaign) are refused
        (FailedPrecondition naming the levels) unless ``accept_partial``; the model then says it is partial.
        ``on_progress`` sees every epoch. Interrupting the call (Ctrl-C, or leaving it from ``on_progress`` with
        an exception) stops the training on the controller; nothing is stored."""
        req = operator_pb2.TrainReferenceRequest(board_model=board_model, workload=workload, campaign_id=campaign_id,
                                                 epochs=epochs, published_dropout=published_dropout,
                                                 accept_partial=accept_partial)
        return self._train("TrainReferenceStream", req, on_progress)

    def transfer_model(self, board_model: str, workload: str, *, reference_id: str = "",
                       reference_board_model: str = "agx-orin", reference_workload: str = "resnet18",
                       campaign_id: str = "", on_progress: ProgressCallback | None = None) -> Model:
        """Fine-tune a reference (``reference_id``, else the newest of the reference board model and workload) on
        the target's profiled modes with 5-fold calibration, fit the from-scratch baseline beside it, and store it.
        ``on_progress`` and interruption as in ``train_reference``."""
        req = operator_pb2.TransferModelRequest(reference_id=reference_id, reference_board_model=reference_board_model,
                                                reference_workload=reference_workload, board_model=board_model,
                                                workload=workload, campaign_id=campaign_id)
        return self._train("TransferModelStream", req, on_progress)

    def list_models(self) -> list[Model]:
        """Every stored model, oldest first."""
        return [Model.from_pb(m) for m in self._unary("ListModels", operator_pb2.ListModelsRequest()).models]

    def get_model(self, model_id: str) -> Model:
        """One stored model; NotFound if unknown."""
        return Model.from_pb(self._unary("GetModel", operator_pb2.GetModelRequest(model_id=model_id)))

    def predict(self, board_model: str, workload: str, *, model_id: str = "", grid: str = "full",
                pareto_only: bool = False, confidence: float = 0.0) -> Predictions:
        """Predicted time and power of every mode of ``grid`` (or only the Pareto front) by the newest model of
        (board model, workload) or ``model_id``, with bounds at ``confidence`` (0: 0.9)."""
        req = operator_pb2.PredictRequest(board_model=board_model, workload=workload, model_id=model_id, grid=grid,
                                          pareto_only=pareto_only, confidence=confidence)
        return Predictions.from_pb(self._unary("Predict", req, 120))

    def optimize(self, workload: str, *, device_id: str = "", board_model: str = "", power_budget_w: float = 0.0,
                 deadline_s: float = 0.0, min_energy: bool = False, minibatches_per_epoch: int = 0,
                 model_id: str = "", apply: bool = False, refine: bool = False, confidence: float = 0.0) -> Choice:
        """Choose the mode that meets one goal (a power budget, a deadline per epoch of ``minibatches_per_epoch``,
        or least energy) by its calibrated upper bound; with ``apply``, push it to the board(s), profile it and
        compare (``refine`` adds the observation to the profiles)."""
        req = operator_pb2.OptimizeRequest(device_id=device_id, board_model=board_model, workload=workload,
                                           model_id=model_id, power_budget_w=power_budget_w, deadline_s=deadline_s,
                                           min_energy=min_energy, minibatches_per_epoch=minibatches_per_epoch,
                                           apply=apply, refine=refine, confidence=confidence)
        return Choice.from_pb(self._unary("Optimize", req, 600))
