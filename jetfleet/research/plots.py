"""Plots an operator or a researcher reads: the time-power Pareto front of a board's modes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from jetfleet.shared.errors import FailedPrecondition

PLOT_EXTRA = "pip install 'jetfleet[plot]'"


def pyplot() -> Any:
    """matplotlib's pyplot on the file-only Agg backend; FailedPrecondition naming the ``plot`` extra where
    matplotlib is not installed (only plots need it, so no other extra pulls it in)."""
    try:
        import matplotlib
    except ImportError:
        raise FailedPrecondition(f"plots need matplotlib, which is not installed: {PLOT_EXTRA}", field="plot") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def time_ticks(ax: Any, lo_ms: float, hi_ms: float) -> None:
    """Tick labels on a log time axis that never overlap, whatever its range: plain numbers (``50``, ``200``, not
    ``5x10^1``) at powers of ten over three decades or more, at 1-2-5 steps over a factor of 8 to 1000, at ~5 round
    values over less; minor ticks unlabelled (matplotlib labels them all on short log ranges, where they collide)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

    span = hi_ms / lo_ms if lo_ms > 0 else float("inf")
    if span >= 1000:
        major: Any = LogLocator(base=10, subs=(1.0,))
    elif span >= 8:
        major = LogLocator(base=10, subs=(1.0, 2.0, 5.0))
    else:
        major = MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10])
    ax.xaxis.set_major_locator(major)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def front_figure(rows: list[dict[str, Any]], title: str) -> Any:
    """Every mode as a grey point and the Pareto front as a red line, time (log) against power: a matplotlib figure
    (the caller saves and closes it)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.2))
    t = np.array([r["time_ms"] for r in rows])
    p = np.array([r["power_w"] for r in rows])
    front = np.array([r["pareto"] for r in rows], dtype=bool)
    ax.scatter(t[~front], p[~front], s=3, c="#bbbbbb", label="all modes (predicted)")
    order = np.argsort(t[front])
    ax.plot(t[front][order], p[front][order], "-o", ms=3, c="#d62728", label="Pareto front")
    ax.set_xscale("log")
    if len(t):
        time_ticks(ax, float(t.min()), float(t.max()))
    ax.set_xlabel("time per minibatch (ms, log)")
    ax.set_ylabel("power (W)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_front(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    """``front_figure`` as a PNG at ``path``."""
    plt = pyplot()
    fig = front_figure(rows, title)
    fig.savefig(path, dpi=120)
    plt.close(fig)
