"""PowerTrain on the controller: train references from stored profiles, transfer them, predict a
catalog, choose a mode, apply it and check the choice. Training runs in a worker thread, off the
event loop. Models are versioned artifacts (weights, scalers, training modes, metrics) in the store."""

from __future__ import annotations

import asyncio
import base64
import time
import uuid
from typing import TYPE_CHECKING, Any

import numpy as np

from jetfleet.controller.campaigns import CampaignManager
from jetfleet.controller.commands import CommandRouter
from jetfleet.controller.metrics import ControllerMetrics
from jetfleet.controller.powertrain.optimize import Predictions, choose, pareto_front
from jetfleet.controller.registry import Fleet
from jetfleet.controller.store import ProfileRecord
from jetfleet.shared.catalog import Catalog, PowerMode
from jetfleet.shared.convert import mode_from_pb, mode_to_pb
from jetfleet.shared.errors import InvalidArgument, NotFound
from jetfleet.shared.proto import agent_pb2, operator_pb2

if TYPE_CHECKING:
    from jetfleet.controller.powertrain.nn import Net


def _torch() -> Any:
    """torch loads with the first model operation, not with the controller (it costs ~150 MiB)."""
    from jetfleet.controller.powertrain import nn

    return nn


def _net_doc(net: Net) -> dict[str, Any]:
    return {"weights": base64.b64encode(net.state_bytes()).decode(), "x_scaler": net.x_scaler.to_list(),
            "y_scaler": net.y_scaler.to_list()}


def _net(doc: dict[str, Any], dropout: list[float] | None = None) -> Net:
    P = _torch()  # noqa: N806
    return P.Net.from_state(base64.b64decode(doc["weights"]), P.Scaler.from_list(doc["x_scaler"]),  # type: ignore[no-any-return]
                            P.Scaler.from_list(doc["y_scaler"]),
                            tuple(dropout) if dropout is not None else P.DEFAULT_DROPOUT)


def _nets(doc: dict[str, Any]) -> tuple[Net, Net]:
    """The time and power networks of a model document, built with the architecture they were trained with."""
    dropout = doc.get("dropout")
    return _net(doc["time"], dropout), _net(doc["power"], dropout)


class ModelService:
    def __init__(self, fleet: Fleet, router: CommandRouter, campaigns: CampaignManager,
                 metrics: ControllerMetrics) -> None:
        self.fleet, self.router, self.campaigns, self.metrics = fleet, router, campaigns, metrics
        self.store = fleet.store

    # --- data -------------------------------------------------------------------------------------
    def _profiles(self, board_model: str, workload: str, source: str = "") -> tuple[list[PowerMode], np.ndarray,
                                                                                   np.ndarray]:
        rows = self.store.query_profiles(board_model=board_model, workload=workload, source=source)
        acc: dict[str, list[ProfileRecord]] = {}
        for r in rows:
            acc.setdefault(r.mode, []).append(r)
        if not acc:
            raise NotFound(f"no profiles of {workload} on {board_model}" + (f" in campaign {source}" if source else "")
                           + "; run `jetfleet profile start` or import a CSV first", field="workload")
        modes = [PowerMode(*rs[0].knobs) for rs in acc.values()]
        t = np.array([np.mean([r.minibatch_time_ms for r in rs]) for rs in acc.values()])
        p = np.array([np.mean([r.power_w for r in rs]) for rs in acc.values()])
        return modes, t, p

    def _save(self, kind: str, board_model: str, workload: str, parent: str, modes: list[PowerMode],
              time_net: Net, power_net: Net, metrics: dict[str, float], dropout: list[float]) -> dict[str, Any]:
        version = 1 + sum(1 for d in self.store.list_docs("model")
                          if d["board_model"] == board_model and d["workload"] == workload)
        model_id = f"{kind[:3]}-{board_model}-{workload}-v{version}-{uuid.uuid4().hex[:6]}"
        doc = {"model_id": model_id, "kind": kind,
               "board_model": board_model, "workload": workload, "parent_id": parent, "version": version,
               "created_s": time.time(), "training_modes": [str(m) for m in modes], "metrics": metrics,
               "time": _net_doc(time_net), "power": _net_doc(power_net), "dropout": dropout}
        self.store.put_doc("model", model_id, doc)
        return doc

    @staticmethod
    def info(doc: dict[str, Any]) -> operator_pb2.ModelInfo:
        return operator_pb2.ModelInfo(model_id=doc["model_id"], kind=doc["kind"], board_model=doc["board_model"],
                                      workload=doc["workload"], parent_id=doc["parent_id"], version=doc["version"],
                                      created_s=doc["created_s"], training_modes=len(doc["training_modes"]),
                                      metrics={k: float(v) for k, v in doc["metrics"].items()})

    def model_doc(self, model_id: str = "", board_model: str = "", workload: str = "",
                  kind: str = "") -> dict[str, Any]:
        if model_id:
            doc = self.store.get_doc("model", model_id)
            if doc is None:
                raise NotFound(f"unknown model {model_id!r}", field="model_id")
            return doc
        docs = [d for d in self.store.list_docs("model") if d["board_model"] == board_model
                and d["workload"] == workload and (not kind or d["kind"] == kind)]
        if not docs:
            what = f"{kind or 'model'} for {workload} on {board_model}"
            raise NotFound(f"no {what}; train one with `jetfleet model train-reference` or `jetfleet model transfer`",
                           field="model_id")
        return docs[-1]

    # --- training ----------------------------------------------------------------------------------
    def _train_reference(self, req: operator_pb2.TrainReferenceRequest) -> dict[str, Any]:
        modes, t, p = self._profiles(req.board_model, req.workload, req.campaign_id)
        x = np.array([m.as_tuple() for m in modes], float)
        P = _torch()  # noqa: N806
        start = time.perf_counter()
        epochs = req.epochs or 100
        if not 1 <= epochs <= 10_000:
            raise InvalidArgument("epochs must be 1..10000", field="epochs")
        dropout = (0.0, 0.0, 0.0) if req.no_dropout else P.DEFAULT_DROPOUT
        tn = P.train_reference(x, t, epochs=epochs, dropout=dropout)
        pn = P.train_reference(x, p, epochs=epochs, dropout=dropout)
        fit_s = time.perf_counter() - start
        self.metrics.model_seconds.labels("reference").observe(fit_s)
        return self._save("reference", req.board_model, req.workload, "", modes, tn, pn,
                          {"time_val_mape_pct": tn.val_mape, "power_val_mape_pct": pn.val_mape, "fit_s": fit_s,
                           "epochs": float(epochs)}, list(dropout))

    async def train_reference(self, req: operator_pb2.TrainReferenceRequest) -> operator_pb2.ModelInfo:
        return self.info(await asyncio.to_thread(self._train_reference, req))

    def _transfer(self, req: operator_pb2.TransferModelRequest) -> dict[str, Any]:
        ref = self.model_doc(req.reference_id, req.reference_board_model, req.reference_workload, "reference")
        modes, t, p = self._profiles(req.board_model, req.workload, req.campaign_id)
        x = np.array([m.as_tuple() for m in modes], float)
        P = _torch()  # noqa: N806
        start = time.perf_counter()
        ref_time, ref_power = _nets(ref)
        tn, pn = P.transfer(ref_time, x, t), P.transfer(ref_power, x, p)
        fit_s = time.perf_counter() - start
        ts, ps = P.from_scratch(x, t), P.from_scratch(x, p)
        self.metrics.model_seconds.labels("transfer").observe(fit_s)
        metrics = {"time_fit_mape_pct": P.mape(tn.predict(x), t), "power_fit_mape_pct": P.mape(pn.predict(x), p),
                   "scratch_time_fit_mape_pct": P.mape(ts.predict(x), t),
                   "scratch_power_fit_mape_pct": P.mape(ps.predict(x), p), "fit_s": fit_s}
        return self._save("transfer", req.board_model, req.workload, ref["model_id"], modes, tn, pn, metrics,
                          list(ref.get("dropout", P.DEFAULT_DROPOUT)))

    async def transfer(self, req: operator_pb2.TransferModelRequest) -> operator_pb2.ModelInfo:
        return self.info(await asyncio.to_thread(self._transfer, req))

    # --- prediction and choice -----------------------------------------------------------------------
    def _catalog(self, board_model: str, device_id: str = "") -> Catalog:
        return self.campaigns.catalog_for(device_id, board_model)

    def _predict(self, board_model: str, workload: str, model_id: str, grid: str,
                 device_id: str = "") -> tuple[dict[str, Any], Predictions]:
        doc = self.model_doc(model_id, board_model, workload)
        cat = self._catalog(doc["board_model"] if model_id else board_model, device_id)
        modes = cat.grid(grid or "full")
        x = np.array([m.as_tuple() for m in modes], float)
        time_net, power_net = _nets(doc)
        return doc, Predictions(modes, time_net.predict(x), power_net.predict(x))

    async def predict(self, req: operator_pb2.PredictRequest) -> operator_pb2.PredictResponse:
        doc, pr = await asyncio.to_thread(self._predict, req.board_model, req.workload, req.model_id, req.grid)
        front = set(pareto_front(pr.time_ms, pr.power_w).tolist())
        out = operator_pb2.PredictResponse(model_id=doc["model_id"], pareto_size=len(front))
        for i, m in enumerate(pr.modes):
            if req.pareto_only and i not in front:
                continue
            out.predictions.append(operator_pb2.Prediction(mode=mode_to_pb(m), time_ms=float(pr.time_ms[i]),
                                                           power_w=float(pr.power_w[i]), pareto=i in front))
        return out

    async def optimize(self, req: operator_pb2.OptimizeRequest) -> operator_pb2.OptimizeResponse:
        if bool(req.device_id) == bool(req.board_model):
            raise InvalidArgument("give exactly one target: a device or a board model", field="device_id")
        board_model = self.fleet.get(req.device_id).catalog.model if req.device_id else req.board_model
        doc, pr = await asyncio.to_thread(self._predict, board_model, req.workload, req.model_id, "full",
                                          req.device_id)
        c = choose(pr, power_budget_w=req.power_budget_w or None, deadline_s=req.deadline_s or None,
                   min_energy=req.min_energy, minibatches_per_epoch=req.minibatches_per_epoch or 1)
        cat = self._catalog(board_model, req.device_id)
        out = operator_pb2.OptimizeResponse(model_id=doc["model_id"], goal=c.goal, mode=mode_to_pb(c.mode),
                                            mode_name=cat.preset_name(c.mode) or "", predicted_time_ms=c.time_ms,
                                            predicted_power_w=c.power_w, epoch_s=c.epoch_s,
                                            energy_per_epoch_j=c.energy_per_epoch_j)
        if not req.apply:
            return out
        targets = [req.device_id] if req.device_id else [d.record.device_id for d in self.fleet.list(board_model)
                                                         if d.online]
        if not targets:
            raise NotFound(f"no online {board_model} board to apply the choice to", field="board_model")
        results = await asyncio.gather(*(self._apply(d, c, req, doc) for d in targets))
        out.applied.extend(results)
        return out

    async def _apply(self, device: str, c: Any, req: operator_pb2.OptimizeRequest,
                     doc: dict[str, Any]) -> operator_pb2.Applied:
        set_mode = agent_pb2.Command(set_mode=agent_pb2.SetMode(mode=mode_to_pb(c.mode)))
        set_result = await self.router.send(device, set_mode)
        confirmed = mode_from_pb(set_result.confirmed_mode)
        n = req.verify_minibatches or 20
        prof = await self.router.send(device, agent_pb2.Command(run_profile=agent_pb2.RunProfile(
            workload=req.workload, mode=mode_to_pb(confirmed), minibatches=n, minibatch_size=16, workers=4,
            sample_interval_s=0.1)), timeout_s=self.campaigns.profile_timeout_s)
        times = sorted(prof.profile.minibatch_times_s)
        observed_t = float(np.median(times)) * 1e3
        observed_p = float(np.mean([s.total_w for s in prof.profile.power])) if prof.profile.power else float("nan")
        t_err = (c.time_ms / observed_t - 1) * 100
        p_err = (c.power_w / observed_p - 1) * 100
        decision_id = uuid.uuid4().hex[:12]
        decision = {"decision_id": decision_id, "device_id": device, "board_model": doc["board_model"],
                    "workload": req.workload, "model_id": doc["model_id"], "goal": c.goal, "mode": str(confirmed),
                    "predicted_time_ms": c.time_ms, "predicted_power_w": c.power_w, "observed_time_ms": observed_t,
                    "observed_power_w": observed_p, "time_error_pct": t_err, "power_error_pct": p_err,
                    "created_s": time.time(), "refined": req.refine}
        await asyncio.to_thread(self.store.put_doc, "decision", decision_id, decision)
        if req.refine:  # the observed point joins the target's profiles for the next transfer
            rec = ProfileRecord(f"decision-{decision_id}", str(confirmed), 0, doc["board_model"], device, req.workload,
                                observed_t, observed_p, time.time(), power_samples=len(prof.profile.power),
                                steady_state_found=prof.profile.steady_state_found)
            await asyncio.to_thread(self.store.import_profiles, [rec], {})
        for what, pred, obs in (("time", c.time_ms / 1e3, observed_t / 1e3), ("power", c.power_w, observed_p)):
            self.metrics.decision.labels(device, what, "predicted").set(pred)
            self.metrics.decision.labels(device, what, "observed").set(obs)
            self.metrics.decision_error.labels(device, what).set(pred / obs if obs else float("nan"))
        return operator_pb2.Applied(device_id=device, confirmed=mode_to_pb(confirmed), observed_time_ms=observed_t,
                                    observed_power_w=observed_p, time_error_pct=t_err, power_error_pct=p_err,
                                    decision_id=decision_id)
