"""PowerTrain on the controller: train references from stored profiles, transfer them with calibrated
uncertainty, predict a catalog with bounds, choose a mode, apply it and check the choice. Training
runs in a worker thread, off the event loop; models are versioned artifacts (``artifacts.py``)."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import numpy as np

from jetfleet.controller.campaigns import CampaignManager
from jetfleet.controller.campaigns.results import profile_command
from jetfleet.controller.commands import CommandRouter
from jetfleet.controller.metrics import ControllerMetrics
from jetfleet.controller.powertrain.artifacts import ModelRepo, torch_nn
from jetfleet.controller.powertrain.calibrate import (
    DEFAULT_CONFIDENCE,
    DEFAULT_FOLDS,
    Calibration,
    calibrated_passes,
    fit_calibrated_many,
)
from jetfleet.controller.powertrain.coverage import Coverage
from jetfleet.controller.powertrain.optimize import Choice, Predictions, choose, pareto_front
from jetfleet.controller.powertrain.progress import EpochReporter, stream_training
from jetfleet.controller.registry import Registry
from jetfleet.controller.store import ProfileRecord
from jetfleet.shared.catalog import Catalog
from jetfleet.shared.columns import profile_power_w
from jetfleet.shared.convert import mode_from_pb, mode_to_pb
from jetfleet.shared.errors import FailedPrecondition, InvalidArgument, NotFound
from jetfleet.shared.proto import agent_pb2, operator_pb2

# A window's mean power within this share of the budget counts as meeting it: the rails' shunt monitors
# (INA3221) are good to about 1%, and a 40-minibatch window's mean keeps ~0.3% of the twin's sensor noise.
POWER_TOLERANCE = 0.01


def tolerance_w(budget_w: float) -> float:
    """How far over a power budget an observed mean may be before it counts as over: the sensor noise."""
    return POWER_TOLERANCE * budget_w


class ModelService:
    """PowerTrain on the controller: trains and transfers models from stored profiles, predicts, chooses, applies."""

    def __init__(self, registry: Registry, router: CommandRouter, campaigns: CampaignManager,
                 metrics: ControllerMetrics) -> None:
        self.registry, self.router, self.campaigns, self.metrics = registry, router, campaigns, metrics
        self.store = registry.store
        self.repo = ModelRepo(self.store)
        self.trainings_running = 0   # trainings whose worker thread has not ended (a cancelled one until its next epoch)

    @staticmethod
    def info(doc: dict[str, Any]) -> operator_pb2.ModelInfo:
        """A stored model document as the operator API's ModelInfo (without its weights)."""
        return operator_pb2.ModelInfo(model_id=doc["model_id"], kind=doc["kind"], board_model=doc["board_model"],
                                      workload=doc["workload"], parent_id=doc["parent_id"], version=doc["version"],
                                      created_s=doc["created_s"], training_modes=len(doc["training_modes"]),
                                      metrics={k: float(v) for k, v in doc["metrics"].items()},
                                      coverage=coverage_to_pb(ModelRepo.coverage(doc)))

    def model_doc(self, model_id: str = "", board_model: str = "", workload: str = "",
                  kind: str = "") -> dict[str, Any]:
        """A stored model by id, else the newest for (board model, workload[, kind]); NotFound if there is none."""
        return self.repo.doc(model_id, board_model, workload, kind)

    # --- training ----------------------------------------------------------------------------------
    def _train_reference(self, req: operator_pb2.TrainReferenceRequest,
                         progress: EpochReporter | None = None) -> dict[str, Any]:
        if req.no_dropout and req.published_dropout:
            raise InvalidArgument("give no_dropout or published_dropout, not both", field="published_dropout")
        epochs = req.epochs or 100
        if not 1 <= epochs <= 10_000:
            raise InvalidArgument("epochs must be 1..10000", field="epochs")
        modes, t, p, coverage = self.repo.profiles_covered(req.board_model, req.workload, req.campaign_id,
                                                           self._known_catalog(req.board_model), req.accept_partial)
        if coverage.partial and not req.accept_partial:
            raise FailedPrecondition(
                f"the profiles of {req.workload} on {req.board_model} are a partial grid: {coverage.fitted_modes} of "
                f"the {coverage.grid_modes} modes of {coverage.grid}, missing the knob levels "
                f"{coverage.missing_text()}; a reference fitted on them would only guess the rest of the catalog. "
                "Profile the missing levels (a paused campaign: `jetfleet profile resume ID`), or accept a partial "
                "reference with --accept-partial (accept_partial): it is then marked partial and trusted only "
                "inside the levels it saw", field="accept_partial")
        x = np.array([m.as_tuple() for m in modes], float)
        P = torch_nn()  # noqa: N806
        start = time.perf_counter()
        dropout = P.PUBLISHED_DROPOUT if req.published_dropout else P.NO_DROPOUT
        tn, pn = P.train_references(x, [t, p], epochs=epochs, dropout=dropout, on_epoch=progress)
        if progress is not None:
            progress.check()   # cancelled after the last epoch: still nothing is stored
        fit_s = time.perf_counter() - start
        self.metrics.model_seconds.labels("reference").observe(fit_s)
        cal = (Calibration(tn.val_log_residuals), Calibration(pn.val_log_residuals)) if tn.val_log_residuals else None
        return self.repo.save("reference", req.board_model, req.workload, "", modes, tn, pn,
                              {"time_val_mape_pct": tn.val_mape, "power_val_mape_pct": pn.val_mape, "fit_s": fit_s,
                               "epochs": float(epochs)}, dropout, cal, coverage)

    async def train_reference(self, req: operator_pb2.TrainReferenceRequest) -> operator_pb2.ModelInfo:
        """Train reference time and power networks on a board model's profiles of a workload, and store them."""
        return self.info(await asyncio.to_thread(self._train_reference, req))

    def _running(self, delta: int) -> None:
        self.trainings_running += delta

    def train_reference_stream(self, req: operator_pb2.TrainReferenceRequest
                               ) -> AsyncIterator[operator_pb2.ModelProgress]:
        """``train_reference`` with a progress message per epoch and the model in the last; the caller leaving
        early stops the training at its next epoch and nothing is stored."""
        return stream_training(lambda progress: self._train_reference(req, progress), ["reference"], self.info,
                               self._running)

    @staticmethod
    def transfer_phases(baseline: bool = True) -> list[str]:
        """The stacked training passes of a transfer, by name (its progress reports count them)."""
        return (["transfer: time"] * calibrated_passes(1) + ["transfer: power"] * calibrated_passes(1)
                + (["baseline"] * calibrated_passes(2) if baseline else []))

    def transfer_doc(self, reference: dict[str, Any] | None, board_model: str, workload: str, campaign_id: str = "",
                     *, baseline: bool = True, progress: EpochReporter | None = None) -> dict[str, Any]:
        """Transfer ``reference`` to the target's profiled modes with 5-fold calibration, fit the from-scratch
        baseline the same way beside it (unless ``baseline`` is False), and store the model (blocking).
        With no reference (None: a lab that has none yet) the stored model is that baseline itself, of kind
        ``scratch``: the same networks fitted on the profiled modes alone, calibrated the same way.
        ``progress`` hears of every epoch of the ``transfer_phases`` and may stop it before anything is stored."""
        modes, t, p, coverage = self.repo.profiles_covered(board_model, workload, campaign_id,
                                                           self._known_catalog(board_model))
        if reference is not None and self.repo.coverage(reference).partial:
            coverage = replace(coverage, partial_reference=reference["model_id"])
        x = np.array([m.as_tuple() for m in modes], float)
        P = torch_nn()  # noqa: N806
        start = time.perf_counter()
        if reference is None:
            ct, cp = fit_calibrated_many(None, [(x, t), (x, p)], on_epoch=progress)
        else:
            ref_time, ref_power = self.repo.nets(reference)
            ct, cp = (fit_calibrated_many(ref, [(x, y)], on_epoch=progress)[0]
                      for ref, y in ((ref_time, t), (ref_power, p)))
        fit_s = time.perf_counter() - start
        self.metrics.model_seconds.labels("transfer" if reference is not None else "scratch").observe(fit_s)
        metrics = {"time_cv_mape_pct": ct.cv_mape, "power_cv_mape_pct": cp.cv_mape,
                   "time_fit_mape_pct": ct.fit_mape, "power_fit_mape_pct": cp.fit_mape,
                   "folds": float(DEFAULT_FOLDS), "fit_s": fit_s}
        if baseline and reference is not None:
            st, sp = fit_calibrated_many(None, [(x, t), (x, p)], on_epoch=progress)
            metrics.update({"scratch_time_cv_mape_pct": st.cv_mape, "scratch_power_cv_mape_pct": sp.cv_mape,
                            "scratch_time_fit_mape_pct": st.fit_mape, "scratch_power_fit_mape_pct": sp.fit_mape})
        if progress is not None:
            progress.check()
        if reference is None:
            return self.repo.save("scratch", board_model, workload, "", modes, ct.net, cp.net, metrics,
                                  P.NO_DROPOUT, (ct.calibration, cp.calibration), coverage)
        return self.repo.save("transfer", board_model, workload, reference["model_id"], modes, ct.net, cp.net, metrics,
                              tuple(reference.get("dropout", P.PUBLISHED_DROPOUT)), (ct.calibration, cp.calibration),
                              coverage)

    def _transfer(self, req: operator_pb2.TransferModelRequest, progress: EpochReporter | None = None) -> dict[str, Any]:
        ref = self.repo.doc(req.reference_id, req.reference_board_model, req.reference_workload, "reference")
        return self.transfer_doc(ref, req.board_model, req.workload, req.campaign_id, progress=progress)

    async def transfer(self, req: operator_pb2.TransferModelRequest) -> operator_pb2.ModelInfo:
        """Transfer a reference to a target's profiled modes, fit the from-scratch baseline beside it, store both."""
        return self.info(await asyncio.to_thread(self._transfer, req))

    def transfer_stream(self, req: operator_pb2.TransferModelRequest) -> AsyncIterator[operator_pb2.ModelProgress]:
        """``transfer`` with progress messages and the model in the last; the caller leaving early stops it."""
        return stream_training(lambda progress: self._transfer(req, progress), self.transfer_phases(), self.info,
                               self._running)

    # --- prediction and choice -----------------------------------------------------------------------
    def _catalog(self, board_model: str, device_id: str = "") -> Catalog:
        return self.campaigns.catalog_for(device_id, board_model)

    def _known_catalog(self, board_model: str) -> Catalog | None:
        """The board model's catalog, or None when it has none (profiles imported before catalogs were stored)."""
        try:
            return self._catalog(board_model)
        except NotFound:
            return None

    def _predict(self, board_model: str, workload: str, model_id: str, grid: str, confidence: float,
                 device_id: str = "") -> tuple[dict[str, Any], Predictions]:
        doc = self.repo.doc(model_id, board_model, workload)
        if model_id and board_model and doc["board_model"] != board_model:   # its choice would mean nothing here
            raise InvalidArgument(f"model {model_id} predicts {doc['board_model']}, not {board_model}",
                                  field="model_id")
        cat = self._catalog(doc["board_model"], device_id if not model_id else "")
        return doc, self.repo.predictions(doc, cat.grid(grid or "full"), confidence)

    async def predict(self, req: operator_pb2.PredictRequest) -> operator_pb2.PredictResponse:
        """Predicted time and power of every mode of a grid (or only its Pareto front) by a stored model, with bounds."""
        confidence = req.confidence or DEFAULT_CONFIDENCE
        doc, pr = await asyncio.to_thread(self._predict, req.board_model, req.workload, req.model_id, req.grid,
                                          confidence)
        front = set(pareto_front(pr.time_ms, pr.power_w).tolist())
        out = operator_pb2.PredictResponse(model_id=doc["model_id"], pareto_size=len(front), confidence=pr.confidence)
        for i, m in enumerate(pr.modes):
            if req.pareto_only and i not in front:
                continue
            out.predictions.append(operator_pb2.Prediction(
                mode=mode_to_pb(m), time_ms=float(pr.time_ms[i]), power_w=float(pr.power_w[i]), pareto=i in front,
                time_ms_lo=float(pr.time_lo[i]), time_ms_hi=float(pr.time_hi[i]), power_w_lo=float(pr.power_lo[i]),
                power_w_hi=float(pr.power_hi[i]), outside_coverage=not pr.covered[i]))
        return out

    async def optimize(self, req: operator_pb2.OptimizeRequest) -> operator_pb2.OptimizeResponse:
        """Choose the mode that meets the goal by its calibrated bounds; with ``apply``, set it on the target
        boards, profile it and say whether the board kept the goal."""
        if bool(req.device_id) == bool(req.board_model):
            raise InvalidArgument("give exactly one target: a device or a board model", field="device_id")
        for name, value, unit in (("power_budget_w", req.power_budget_w, "W"), ("deadline_s", req.deadline_s, "s")):
            if not (math.isfinite(value) and value >= 0):
                raise InvalidArgument(f"{name} must be a positive number of {unit} (0: not this goal), got {value!r}",
                                      field=name)
        board_model = self.registry.get(req.device_id).catalog.model if req.device_id else req.board_model
        confidence = req.confidence or DEFAULT_CONFIDENCE
        doc, pr = await asyncio.to_thread(self._predict, board_model, req.workload, req.model_id, "full", confidence,
                                          req.device_id)
        c = choose(pr, power_budget_w=req.power_budget_w or None, deadline_s=req.deadline_s or None,
                   min_energy=req.min_energy, minibatches_per_epoch=req.minibatches_per_epoch or 1)
        cat = self._catalog(board_model, req.device_id)
        out = operator_pb2.OptimizeResponse(
            model_id=doc["model_id"], goal=c.goal, mode=mode_to_pb(c.mode), mode_name=cat.preset_name(c.mode) or "",
            predicted_time_ms=c.time_ms, predicted_power_w=c.power_w, epoch_s=c.epoch_s,
            energy_per_epoch_j=c.energy_per_epoch_j, confidence=pr.confidence, predicted_time_ms_lo=c.time_lo_ms,
            predicted_time_ms_hi=c.time_hi_ms, predicted_power_w_lo=c.power_lo_w, predicted_power_w_hi=c.power_hi_w,
            at_risk=c.at_risk, outside_coverage=not c.covered, coverage_note=c.coverage_note)
        if not req.apply:
            return out
        targets = [req.device_id] if req.device_id else [d.record.device_id for d in self.registry.list(board_model)
                                                         if d.online]
        if not targets:
            raise NotFound(f"no online {board_model} board to apply the choice to", field="board_model")
        results = await asyncio.gather(*(self._apply(d, c, req, doc) for d in targets))
        out.applied.extend(results)
        return out

    async def _apply(self, device: str, c: Choice, req: operator_pb2.OptimizeRequest,
                     doc: dict[str, Any]) -> operator_pb2.Applied:
        set_mode = agent_pb2.Command(set_mode=agent_pb2.SetMode(mode=mode_to_pb(c.mode)))
        set_result = await self.router.send(device, set_mode)
        confirmed = mode_from_pb(set_result.confirmed_mode)
        n = req.verify_minibatches or 20
        prof = await self.router.send(device, profile_command(req.workload, confirmed, n),
                                      timeout_s=self.campaigns.profile_timeout_s)
        times = sorted(prof.profile.minibatch_times_s)
        observed_t = float(np.median(times)) * 1e3
        power_w = profile_power_w(prof.profile)
        observed_p = float(np.mean(power_w)) if power_w else float("nan")
        t_err = (c.time_ms / observed_t - 1) * 100
        p_err = (c.power_w / observed_p - 1) * 100
        missed, note = goal_check(req, observed_t, observed_p)
        decision_id = uuid.uuid4().hex[:12]
        decision = {"decision_id": decision_id, "device_id": device, "board_model": doc["board_model"],
                    "workload": req.workload, "model_id": doc["model_id"], "goal": c.goal, "mode": str(confirmed),
                    "predicted_time_ms": c.time_ms, "predicted_power_w": c.power_w, "observed_time_ms": observed_t,
                    "observed_power_w": observed_p, "time_error_pct": t_err, "power_error_pct": p_err,
                    "predicted_power_w_hi": c.power_hi_w, "goal_missed": missed, "note": note,
                    "outside_coverage": not c.covered, "coverage_note": c.coverage_note,
                    "created_s": self.registry.wall(), "refined": req.refine}
        await asyncio.to_thread(self.store.put_doc, "decision", decision_id, decision)
        if req.refine:  # the observed point joins the target's profiles for the next transfer
            rec = ProfileRecord(f"decision-{decision_id}", str(confirmed), 0, doc["board_model"], device, req.workload,
                                observed_t, observed_p, self.registry.wall(), power_samples=len(power_w),
                                steady_state_found=prof.profile.steady_state_found)
            await asyncio.to_thread(self.store.import_profiles, [rec], {})
        for gauge, error, pred, obs in ((self.metrics.decision_time, self.metrics.decision_time_error, c.time_ms / 1e3,
                                         observed_t / 1e3),
                                        (self.metrics.decision_power, self.metrics.decision_power_error, c.power_w,
                                         observed_p)):
            gauge.labels(device, "predicted").set(pred)
            gauge.labels(device, "observed").set(obs)
            error.labels(device).set(pred / obs if obs else float("nan"))
        return operator_pb2.Applied(device_id=device, confirmed=mode_to_pb(confirmed), observed_time_ms=observed_t,
                                    observed_power_w=observed_p, time_error_pct=t_err, power_error_pct=p_err,
                                    decision_id=decision_id, goal_missed=missed, note=note)


def coverage_to_pb(c: Coverage) -> operator_pb2.ModelCoverage:
    """A model's coverage as the operator API's ModelCoverage."""
    return operator_pb2.ModelCoverage(
        knobs=[operator_pb2.KnobCoverage(knob=k.knob, seen=k.seen, grid=k.grid, catalog=k.catalog, missing=k.missing)
               for k in c.knobs],
        grid=c.grid, grid_modes=c.grid_modes, fitted_modes=c.fitted_modes, partial=c.partial,
        accepted_partial=c.accepted_partial, partial_reference=c.partial_reference)


def goal_check(req: operator_pb2.OptimizeRequest, observed_time_ms: float, observed_power_w: float) -> tuple[bool, str]:
    """Whether an applied choice's observation misses the request's budget or deadline, and a note saying so."""
    if req.power_budget_w and math.isfinite(observed_power_w):
        over = observed_power_w - req.power_budget_w
        if over > tolerance_w(req.power_budget_w):
            return True, (f"OVER BUDGET: observed {observed_power_w:.2f} W, {over:.2f} W over the "
                          f"{req.power_budget_w:g} W budget")
    if req.deadline_s:
        epoch_s = observed_time_ms / 1e3 * (req.minibatches_per_epoch or 1)
        if epoch_s > req.deadline_s:
            return True, f"LATE: observed {epoch_s:.1f} s per epoch against a {req.deadline_s:g} s deadline"
    return False, ""
