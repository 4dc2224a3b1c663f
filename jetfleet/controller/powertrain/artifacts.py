"""Model documents in the store: versioned artifacts holding the time and power networks (weights and
scalers), the modes they were trained on and their coverage (``coverage.py``), their calibration
(out-of-fold or validation log residuals) and their metrics. Everything here is blocking; the services
call it from worker threads."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from jetfleet.controller.powertrain.calibrate import DEFAULT_CONFIDENCE, Calibration
from jetfleet.controller.powertrain.coverage import Coverage
from jetfleet.controller.powertrain.optimize import Predictions
from jetfleet.controller.store import ProfileRecord, Store
from jetfleet.shared.catalog import KNOBS, Catalog, PowerMode
from jetfleet.shared.errors import NotFound

if TYPE_CHECKING:
    from jetfleet.controller.powertrain.nn import Net

# Dropout of documents written before the layout was stored: the published one.
LEGACY_DROPOUT = (0.4, 0.3, 0.0)


def torch_nn() -> Any:
    """torch loads with the first model operation, not with the controller (it costs ~150 MiB)."""
    from jetfleet.controller.powertrain import nn

    return nn


def _means(acc: dict[str, list[ProfileRecord]]) -> tuple[list[PowerMode], np.ndarray, np.ndarray]:
    modes = [PowerMode(*rs[0].knobs) for rs in acc.values()]
    t = np.array([np.mean([r.minibatch_time_ms for r in rs]) for rs in acc.values()])
    p = np.array([np.mean([r.power_w for r in rs]) for rs in acc.values()])
    return modes, t, p


def _mode(text: str) -> PowerMode:
    c, f, g, m = text.split("/")
    return PowerMode(int(c), float(f), float(g), float(m))


def _smallest_grid(catalog: Catalog | None, modes: list[PowerMode]) -> tuple[str, list[PowerMode]]:
    """The smallest of the catalog's grids whose levels hold every knob level of ``modes`` (imported rows do not
    say which grid they came from), by name; the modes themselves when there is no catalog."""
    if catalog is None:
        return "their own modes", modes
    mine = set(modes)
    for _, name in sorted((catalog.grid_size(n), n) for n in catalog.grid_names if n != "presets"):
        grid = catalog.grid(name)
        if mine <= set(grid):
            return f"{catalog.model} grid {name!r}", grid
    return "their own modes", modes


def _net_doc(net: Net) -> dict[str, Any]:
    return {"weights": base64.b64encode(net.state_bytes()).decode(), "x_scaler": net.x_scaler.to_list(),
            "y_scaler": net.y_scaler.to_list()}


def _net(doc: dict[str, Any], dropout: tuple[float, ...]) -> Net:
    P = torch_nn()  # noqa: N806
    return P.Net.from_state(base64.b64decode(doc["weights"]), P.Scaler.from_list(doc["x_scaler"]),  # type: ignore[no-any-return]
                            P.Scaler.from_list(doc["y_scaler"]), dropout)


class ModelRepo:
    """The model documents of a store: save, find, and turn into networks and calibrated predictions."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def _rows(self, board_model: str, workload: str, source: str) -> dict[str, list[ProfileRecord]]:
        rows = self.store.query_profiles(board_model=board_model, workload=workload, source=source)
        acc: dict[str, list[ProfileRecord]] = {}
        for r in rows:
            if np.isfinite(r.minibatch_time_ms) and np.isfinite(r.power_w) and r.minibatch_time_ms > 0 and r.power_w > 0:
                acc.setdefault(r.mode, []).append(r)
        if not acc:
            raise NotFound(f"no profiles of {workload} on {board_model}" + (f" in campaign {source}" if source else "")
                           + "; run `jetfleet profile start` or import a CSV first", field="workload")
        return acc

    def profiles(self, board_model: str, workload: str, source: str = "") -> tuple[list[PowerMode], np.ndarray,
                                                                                  np.ndarray]:
        """The profiled modes of (board model, workload) with their mean time (ms) and power (W); NotFound if none."""
        return _means(self._rows(board_model, workload, source))

    def profiles_covered(self, board_model: str, workload: str, source: str = "", catalog: Catalog | None = None,
                         accept_partial: bool = False) -> tuple[list[PowerMode], np.ndarray, np.ndarray, Coverage]:
        """``profiles`` and the coverage a fit on them has: their knob levels against those of the grid they came
        from (``grid_of``) and of ``catalog``."""
        acc = self._rows(board_model, workload, source)
        modes, t, p = _means(acc)
        grid, label = self.grid_of(((r.source, m) for m, rs in zip(modes, acc.values()) for r in rs), catalog)
        levels = None if catalog is None else {k: catalog.knob_values(k) for k in KNOBS}
        return modes, t, p, Coverage.of(modes, grid or modes, label, levels, accept_partial)

    def grid_of(self, rows: Iterable[tuple[str, PowerMode]], catalog: Catalog | None) -> tuple[list[PowerMode], str]:
        """The modes the grid of profiles (rows of (source, mode)) planned, and what it was: each campaign's
        planned modes; rows of no campaign (imports) by the smallest of the catalog's grids holding them;
        a decision's observed point (``optimize --refine``) by itself."""
        by_source: dict[str, set[PowerMode]] = {}
        for src, mode in rows:
            by_source.setdefault(src, set()).add(mode)
        planned: list[PowerMode] = []
        names: list[str] = []
        loose: set[PowerMode] = set()
        for src, modes in sorted(by_source.items()):
            camp = self.store.get_campaign(src)
            if camp is not None:
                planned += [_mode(s.mode) for s in self.store.campaign_modes(src)]
                names.append(f"campaign {src} ({camp.modes_spec[:40]})")
            elif src.startswith("decision-"):
                planned += modes
            else:
                loose |= modes
        if loose:
            name, grid = _smallest_grid(catalog, sorted(loose))
            planned += grid
            names.append(f"imported profiles ({name})")
        return planned, " + ".join(names) or "its profiled modes"

    def save(self, kind: str, board_model: str, workload: str, parent: str, modes: list[PowerMode], time_net: Net,
             power_net: Net, metrics: dict[str, float], dropout: tuple[float, ...],
             calibration: tuple[Calibration, Calibration] | None, coverage: Coverage | None = None) -> dict[str, Any]:
        """Store a new model document (the next version for its board model and workload) and return it; its
        ``coverage`` defaults to the levels of ``modes`` alone (the grid they came from unknown)."""
        version = 1 + sum(1 for d in self.store.list_docs("model")
                          if d["board_model"] == board_model and d["workload"] == workload)
        model_id = f"{kind[:3]}-{board_model}-{workload}-v{version}-{uuid.uuid4().hex[:6]}"
        doc = {"model_id": model_id, "kind": kind, "board_model": board_model, "workload": workload,
               "parent_id": parent, "version": version, "created_s": time.time(),
               "training_modes": [str(m) for m in modes], "metrics": metrics, "time": _net_doc(time_net),
               "power": _net_doc(power_net), "dropout": list(dropout),
               "coverage": (coverage or Coverage.of(modes, modes, "its training modes")).to_dict()}
        if calibration is not None:
            doc["calibration"] = {"time": calibration[0].to_list(), "power": calibration[1].to_list()}
        self.store.put_doc("model", model_id, doc)
        return doc

    def doc(self, model_id: str = "", board_model: str = "", workload: str = "", kind: str = "") -> dict[str, Any]:
        """A stored model by id, else the newest for (board model, workload[, kind]); NotFound if there is none."""
        if model_id:
            doc = self.store.get_doc("model", model_id)
            if doc is None:
                raise NotFound(f"unknown model {model_id[:80]!r}", field="model_id")
            return doc
        docs = [d for d in self.store.list_docs("model") if d["board_model"] == board_model
                and d["workload"] == workload and (not kind or d["kind"] == kind)]
        if not docs:
            what = f"{kind or 'model'} for {workload} on {board_model}"
            raise NotFound(f"no {what}; train one with `jetfleet model train-reference` or `jetfleet model transfer`",
                           field="model_id")
        return docs[-1]

    def find(self, board_model: str, workload: str) -> dict[str, Any] | None:
        """The newest calibrated model for (board model, workload), or None."""
        docs = [d for d in self.store.list_docs("model") if d["board_model"] == board_model
                and d["workload"] == workload and "calibration" in d]
        return docs[-1] if docs else None

    def reference_for(self, board_model: str, workload: str) -> dict[str, Any] | None:
        """The reference to transfer from: the newest one trained on the same board model (its power
        behaviour is the board's), else on the same workload, else any; None when there is none."""
        refs = [d for d in self.store.list_docs("model") if d["kind"] == "reference"]
        for pick in (lambda d: d["board_model"] == board_model, lambda d: d["workload"] == workload, lambda d: True):
            matches = [d for d in refs if pick(d)]
            if matches:
                return matches[-1]
        return None

    def best_reference(self, board_model: str, workload: str) -> dict[str, Any]:
        """``reference_for``, or NotFound when there is none."""
        ref = self.reference_for(board_model, workload)
        if ref is not None:
            return ref
        raise NotFound("no reference model to transfer from; profile one workload fully and run `jetfleet model "
                       "train-reference` (README: Transfer, optimise, apply)", field="model_id")

    @staticmethod
    def scratch_note(doc: dict[str, Any]) -> str:
        """For a model fitted from scratch (there was no reference to transfer from): what it rests on, its held-out
        error, and how to make a choice on it surer; '' for any other model."""
        if doc.get("kind") != "scratch":
            return ""
        m = doc["metrics"]
        return (f"model fitted from scratch on {len(doc['training_modes'])} profiled modes (no reference to transfer "
                f"from; 5-fold held-out error: time {m['time_cv_mape_pct']:.1f} %, power {m['power_cv_mape_pct']:.1f} "
                "%): the choice is less certain than a transferred model's; profile more modes (--profile-modes, "
                "a longer job), or profile one workload fully and run `jetfleet model train-reference` so that "
                "later jobs transfer from it")

    @staticmethod
    def nets(doc: dict[str, Any]) -> tuple[Net, Net]:
        """The time and power networks of a model document, built with the layout they were trained with."""
        dropout = tuple(doc.get("dropout", LEGACY_DROPOUT))
        return _net(doc["time"], dropout), _net(doc["power"], dropout)

    @staticmethod
    def coverage(doc: dict[str, Any]) -> Coverage:
        """Where a model document's model is valid (for a model stored before coverage was: its training modes)."""
        if "coverage" in doc:
            return Coverage.from_dict(doc["coverage"])
        return Coverage.of([_mode(m) for m in doc["training_modes"]], [], "its training modes (stored without "
                           "the grid they came from)")

    @staticmethod
    def calibration(doc: dict[str, Any]) -> tuple[Calibration, Calibration] | None:
        """The (time, power) calibration of a model document, or None for a model stored without one."""
        cal = doc.get("calibration")
        if not cal:
            return None
        return Calibration.from_list(cal["time"]), Calibration.from_list(cal["power"])

    def predictions(self, doc: dict[str, Any], modes: list[PowerMode],
                    confidence: float = DEFAULT_CONFIDENCE) -> Predictions:
        """Predicted time and power of ``modes`` with calibrated bounds at ``confidence`` (point values when the
        model has no calibration). A mode outside the model's coverage is predicted at the nearest mode inside
        (a network extrapolates a knob it never saw move arbitrarily: docs/models.md), marked, and its bounds
        widened (``Predictions.outside_coverage``)."""
        coverage = self.coverage(doc)
        x = coverage.clamp(np.array([m.as_tuple() for m in modes], float))
        time_net, power_net = self.nets(doc)
        p = Predictions(modes, time_net.predict(x), power_net.predict(x))
        cal = self.calibration(doc)
        if cal is not None:
            t, w = cal
            p = p.bounded(confidence, (t.lower_log(confidence), t.upper_log(confidence)),
                          (w.lower_log(confidence), w.upper_log(confidence)))
        return p.outside_coverage(coverage)
