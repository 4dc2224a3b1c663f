"""Calibrated predictions of a catalog by (model, confidence), shared by the jobs and the fleet queue that use one
model: a catalog of 29,232 modes is predicted once, not per job."""

from __future__ import annotations

from typing import Any

from jetfleet.controller.powertrain.artifacts import ModelRepo
from jetfleet.controller.powertrain.optimize import Predictions
from jetfleet.shared.catalog import Catalog


class PredictionCache:
    """Calibrated predictions of a catalog by (model, confidence): the jobs of one model share them."""

    def __init__(self, repo: ModelRepo, size: int = 16) -> None:
        self.repo, self.size = repo, size
        self._cache: dict[tuple[str, float, str], Predictions] = {}

    def get(self, doc: dict[str, Any], catalog: Catalog, confidence: float) -> Predictions:
        """The predictions of every mode of ``catalog`` (blocking on a miss)."""
        key = (doc["model_id"], confidence, catalog.model)
        hit = self._cache.get(key)
        if hit is None:
            if len(self._cache) >= self.size:
                self._cache.pop(next(iter(self._cache)))
            hit = self._cache[key] = self.repo.predictions(doc, catalog.grid("full"), confidence)
        return hit
