"""Calibrated uncertainty and honest accuracy for a model trained on k profiled modes.

K-fold cross-validation on the k modes (default 5 folds): each fold's network is trained on the
other modes and predicts the held-out ones, so every profiled mode gets an out-of-fold prediction.
From those:
- the held-out MAPE (what the model's accuracy on modes it has not seen looks like; the fit on its
  own training modes is in-sample and reported as such), and
- the out-of-fold log residuals log(observed / predicted), kept sorted: conformal prediction turns
  them into bounds at any level. The upper bound at level a is the prediction times exp(r_(j)),
  j = ceil((k + 1) a): with exchangeable modes it holds for at least a of unseen modes. The
  bound's width is the same in log space for every mode (a relative margin).

The final network is trained on all k modes; the fold networks are trained beside it in the same
stacked pass (``nn.transfer_many``), so calibration costs about one extra transfer, not five.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from jetfleet.controller.powertrain import nn as P
from jetfleet.controller.powertrain.stack import EpochCallback
from jetfleet.shared.errors import InvalidArgument

DEFAULT_FOLDS = 5
DEFAULT_CONFIDENCE = 0.9


@dataclass(frozen=True)
class Calibration:
    """Sorted out-of-fold log residuals log(observed / predicted) of a model's profiled modes."""

    residuals: tuple[float, ...]

    @property
    def n(self) -> int:
        """How many out-of-fold residuals there are (the profiled modes)."""
        return len(self.residuals)

    @property
    def max_confidence(self) -> float:
        """The highest level a finite conformal bound exists for: n / (n + 1)."""
        return self.n / (self.n + 1) if self.n else 0.0

    def check(self, confidence: float) -> None:
        """InvalidArgument unless 0.5 <= confidence <= max_confidence."""
        if not 0.5 <= confidence <= self.max_confidence:
            raise InvalidArgument(f"confidence {confidence:g} is out of range: 0.5..{self.max_confidence:.3f} for a "
                                  f"model calibrated on {self.n} held-out modes", field="confidence")

    def upper_log(self, confidence: float) -> float:
        """log of the factor that lifts a prediction to its upper bound at ``confidence``."""
        self.check(confidence)
        return self.residuals[math.ceil((self.n + 1) * confidence) - 1]

    def lower_log(self, confidence: float) -> float:
        """log of the factor that lowers a prediction to its lower bound at ``confidence`` (-inf if none)."""
        self.check(confidence)
        j = math.floor((self.n + 1) * (1 - confidence))
        return self.residuals[j - 1] if j >= 1 else -math.inf

    def to_list(self) -> list[float]:
        """The residuals as a plain list, for a model document."""
        return list(self.residuals)

    @classmethod
    def from_list(cls, values: list[float]) -> Calibration:
        """The calibration ``to_list`` stored."""
        return cls(tuple(sorted(float(v) for v in values)))


@dataclass
class Calibrated:
    """A network trained on all k modes, its calibration, and its held-out and in-sample MAPE (%)."""

    net: P.Net
    calibration: Calibration
    cv_mape: float
    fit_mape: float


def folds_of(k: int, folds: int, seed: int) -> list[np.ndarray]:
    """A seeded split of k rows into ``folds`` folds of near-equal size."""
    return np.array_split(np.random.default_rng([seed, 31]).permutation(k), folds)


def fit_calibrated_many(reference: P.Net | None, sets: list[tuple[np.ndarray, np.ndarray]], *,
                        folds: int = DEFAULT_FOLDS, seed: int = 0, epochs: int = 300,
                        on_epoch: EpochCallback | None = None) -> list[Calibrated]:
    """For each (modes, targets) set: transfer ``reference`` (or train from scratch when None) on all of
    it and on each fold's complement, all in one stacked pass; calibrate from the out-of-fold residuals.
    ``on_epoch`` hears of every epoch of each pass (``calibrated_passes`` of them)."""
    if not 2 <= folds <= 20:
        raise InvalidArgument("folds must be 2..20", field="folds")
    jobs: list[tuple[np.ndarray, np.ndarray]] = []
    splits: list[list[np.ndarray]] = []
    for i, (x, y) in enumerate(sets):
        if len(x) < folds + P.MIN_MODES:
            raise InvalidArgument(f"{len(x)} profiled modes are too few to cross-validate in {folds} folds; at least "
                                  f"{folds + P.MIN_MODES} needed", field="modes")
        split = folds_of(len(x), folds, seed + i)
        splits.append(split)
        jobs.append((x, y))
        for f in split:
            keep = np.setdiff1d(np.arange(len(x)), f)
            jobs.append((x[keep], y[keep]))
    if reference is None:
        nets = P.scratch_many(jobs, epochs=epochs, seed=seed, dropout=P.NO_DROPOUT, on_epoch=on_epoch)
    else:
        nets = P.transfer_many(reference, jobs, epochs=epochs, seed=seed, on_epoch=on_epoch)
    out: list[Calibrated] = []
    step = folds + 1
    for i, ((x, y), split) in enumerate(zip(sets, splits, strict=True)):
        final, fold_nets = nets[i * step], nets[i * step + 1:(i + 1) * step]
        oof = np.empty(len(x))
        for f, net in zip(split, fold_nets, strict=True):
            oof[f] = net.predict(x[f])
        residuals = np.log(y) - np.log(oof)
        out.append(Calibrated(final, Calibration(tuple(np.sort(residuals).tolist())), P.mape(oof, y),
                              P.mape(final.predict(x), y)))
    return out


def calibrated_passes(sets: int, folds: int = DEFAULT_FOLDS) -> int:
    """How many stacked training passes ``fit_calibrated_many`` makes for ``sets`` sets."""
    return P.passes(sets * (folds + 1))


def fit_calibrated(reference: P.Net | None, x: np.ndarray, y: np.ndarray, *, folds: int = DEFAULT_FOLDS,
                   seed: int = 0, epochs: int = 300) -> Calibrated:
    """``fit_calibrated_many`` for one set of profiled modes."""
    return fit_calibrated_many(reference, [(x, y)], folds=folds, seed=seed, epochs=epochs)[0]


def validation_calibration(net: P.Net, x: np.ndarray, y: np.ndarray) -> Calibration:
    """A reference's calibration from its held-out validation modes (it was not trained on them)."""
    return Calibration(tuple(np.sort(np.log(y) - np.log(net.predict(x))).tolist()))
