"""Where a model is valid: the levels of each knob it was fitted on, beside the levels of the grid its
profiles came from and of the target catalog.

A model covers a mode when every knob of the mode lies within the span of the levels the model was
fitted on (lowest to highest seen level of that knob). Between seen levels a network interpolates, and
a PowerTrain reference does so by design (its 4,368-mode grid skips odd core counts and every other
CPU clock of the 18,096-mode catalog); beyond them it extrapolates: a network fitted on 2-core modes
only has never seen the cores knob move, and its prediction at 12 cores is whatever its initial weights
make of it. ``bench/coverage.py`` measures both on the twin (docs/models.md: the figures).

A fit is *partial* when the grid its profiles came from has knob levels the fit never saw (a campaign
cancelled part-way: its grid runs in order, so its first 5% are all at 2 cores). A partial reference
is refused unless the operator accepts it (``accept_partial``), and then says so wherever it is shown.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from jetfleet.shared.catalog import KNOBS, PowerMode, format_mhz

_EPS = 1e-6


def levels(modes: Iterable[PowerMode], knob: str) -> tuple[float, ...]:
    """The distinct values of one knob over ``modes``, ascending."""
    return tuple(sorted({round(float(getattr(m, knob)), 6) for m in modes}))


def _text(values: Sequence[float]) -> str:
    return ", ".join(format_mhz(v) for v in values)


@dataclass(frozen=True)
class KnobCoverage:
    """One knob: the levels a model was fitted on, those of the grid its profiles came from, and those of
    the target catalog (empty when unknown), each ascending."""

    knob: str
    seen: tuple[float, ...]
    grid: tuple[float, ...]
    catalog: tuple[float, ...] = ()

    @property
    def missing(self) -> tuple[float, ...]:
        """The grid's levels the fit never saw."""
        return tuple(v for v in self.grid if not any(abs(v - s) < _EPS for s in self.seen))

    @property
    def span(self) -> tuple[float, float]:
        """(lowest, highest) level seen."""
        return self.seen[0], self.seen[-1]

    def inside(self, values: np.ndarray) -> np.ndarray:
        """Per value: within the span of the levels seen."""
        lo, hi = self.span
        result: np.ndarray = (values >= lo - _EPS) & (values <= hi + _EPS)
        return result

    def outside_reason(self, value: float) -> str:
        """'cores 12 beyond the 2..2 it was fitted on' for a value outside the span, else ''."""
        lo, hi = self.span
        if lo - _EPS <= value <= hi + _EPS:
            return ""
        fitted = format_mhz(lo) if hi - lo < _EPS else f"{format_mhz(lo)}..{format_mhz(hi)}"
        return f"{self.knob} {format_mhz(value)} {'below' if value < lo else 'above'} the {fitted} it was fitted on"

    def text(self) -> str:
        """'cpu_mhz: 5 of 14 grid levels (268.8..883.2; missing 1036.8, ...), catalog 29 levels'."""
        lo, hi = self.span
        span = format_mhz(lo) if hi - lo < _EPS else f"{format_mhz(lo)}..{format_mhz(hi)}"
        out = f"{self.knob}: {len(self.seen)} of {len(self.grid)} grid levels ({span}"
        missing = self.missing
        out += f"; missing {_text(missing)})" if missing else ")"
        if self.catalog:
            out += f", catalog {len(self.catalog)} levels ({format_mhz(self.catalog[0])}..{format_mhz(self.catalog[-1])})"
        return out


@dataclass(frozen=True)
class Coverage:
    """The modes a model was fitted on, per knob, against the grid they came from (``grid``: what it was,
    ``grid_modes``: how many modes it has) and the target catalog. ``accepted_partial``: the operator
    accepted a fit that misses some of the grid's levels."""

    knobs: tuple[KnobCoverage, ...]
    grid: str
    grid_modes: int
    fitted_modes: int
    accepted_partial: bool = False
    partial_reference: str = ""    # a transfer's reference when that one is partial: outside it, its shape is a guess

    @classmethod
    def of(cls, fitted: Sequence[PowerMode], grid_modes: Sequence[PowerMode], grid: str,
           catalog_levels: dict[str, tuple[float, ...]] | None = None, accepted_partial: bool = False) -> Coverage:
        """The coverage of a fit on ``fitted`` modes whose profiles came from ``grid_modes`` (described by
        ``grid``), for a catalog with ``catalog_levels`` per knob (None: unknown)."""
        if not fitted:
            raise ValueError("a model is fitted on at least one mode")
        knobs = tuple(KnobCoverage(k, levels(fitted, k), levels([*grid_modes, *fitted], k),
                                   tuple(sorted(float(v) for v in (catalog_levels or {}).get(k, ()))))
                      for k in KNOBS)
        return cls(knobs, grid, len(set(grid_modes) | set(fitted)), len(set(fitted)), accepted_partial)

    @property
    def partial(self) -> bool:
        """Whether the fit misses a level of the grid its profiles came from."""
        return any(k.missing for k in self.knobs)

    def missing_text(self) -> str:
        """'cores 4, 6, 8; cpu_mhz 1036.8, 1190.4' (the grid's levels the fit never saw)."""
        return "; ".join(f"{k.knob} {_text(k.missing)}" for k in self.knobs if k.missing)

    def covered(self, x: np.ndarray) -> np.ndarray:
        """Per row of ``x`` (cores, CPU MHz, GPU MHz, memory MHz): whether every knob is within the span seen."""
        x = np.asarray(x, float).reshape(-1, len(KNOBS))
        mask = np.ones(len(x), bool)
        for j, k in enumerate(self.knobs):
            mask &= k.inside(x[:, j])
        return mask

    def never_moved(self, x: np.ndarray) -> np.ndarray:
        """Per row of ``x``: outside the span of a knob the fit saw at one level only (it never saw it move)."""
        x = np.asarray(x, float).reshape(-1, len(KNOBS))
        mask = np.zeros(len(x), bool)
        for j, k in enumerate(self.knobs):
            if len(k.seen) == 1:
                mask |= ~k.inside(x[:, j])
        return mask

    def clamp(self, x: np.ndarray) -> np.ndarray:
        """``x`` with every knob moved into the span seen: a mode outside the coverage becomes the nearest
        covered point."""
        x = np.array(x, float).reshape(-1, len(KNOBS))
        for j, k in enumerate(self.knobs):
            x[:, j] = np.clip(x[:, j], *k.span)
        return x

    def reason(self, mode: PowerMode) -> str:
        """Why ``mode`` is outside the coverage ('' when it is inside)."""
        return "; ".join(r for r in (k.outside_reason(float(getattr(mode, k.knob))) for k in self.knobs) if r)

    def text(self) -> str:
        """A few lines for `model show`."""
        state = ("PARTIAL, accepted by the operator" if self.accepted_partial else "PARTIAL") if self.partial \
            else "complete"
        head = f"coverage: {state}: fitted on {self.fitted_modes} of the {self.grid_modes} modes of {self.grid}"
        lines = [head, *(f"    {k.text()}" for k in self.knobs)]
        if self.partial_reference:
            lines.append(f"    transferred from the PARTIAL reference {self.partial_reference}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, for a model document and `--output json`."""
        return {"grid": self.grid, "grid_modes": self.grid_modes, "fitted_modes": self.fitted_modes,
                "partial": self.partial, "accepted_partial": self.accepted_partial,
                "partial_reference": self.partial_reference,
                "knobs": {k.knob: {"seen": list(k.seen), "grid": list(k.grid), "catalog": list(k.catalog),
                                   "missing": list(k.missing)} for k in self.knobs}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Coverage:
        """The coverage ``to_dict`` wrote."""
        knobs = tuple(KnobCoverage(k, tuple(d["knobs"][k]["seen"]), tuple(d["knobs"][k]["grid"]),
                                   tuple(d["knobs"][k].get("catalog", ()))) for k in KNOBS)
        return cls(knobs, str(d["grid"]), int(d["grid_modes"]), int(d["fitted_modes"]),
                   bool(d.get("accepted_partial", False)), str(d.get("partial_reference", "")))
