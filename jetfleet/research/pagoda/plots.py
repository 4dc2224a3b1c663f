"""The two roofline figures a paper would print: the time roofline (attainable FLOP/s against arithmetic
intensity, log-log, one roof per power mode, workloads as points at their intensity and achieved FLOP/s) and
the energy roofline (energy per FLOP against intensity, one curve per mode, workloads as points).

Inputs are plain dicts (``RooflinePoint.to_dict()`` rows and workload rows), so the CLI, the client and the
evaluation share them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

MARKERS = "osD^v<>pP*Xh"


def _pyplot() -> Any:
    from jetfleet.research.plots import pyplot

    return pyplot()


def _label(mode: dict[str, Any]) -> str:
    name = mode.get("mode_name") or ""
    return f"{name.split(' (')[0]} ({mode['mode']})" if name else str(mode["mode"])


def _intensity_range(modes: Sequence[dict[str, Any]], workloads: Sequence[dict[str, Any]]) -> tuple[float, float]:
    ridges = [m["peak_flops"] / m["peak_bytes_per_s"] for m in modes]
    pts = [w["intensity"] for w in workloads if w.get("intensity", 0) > 0]
    lo = min(ridges + pts) / 30.0
    hi = max(ridges + pts) * 30.0
    return lo, hi


def time_roofline_figure(modes: Sequence[dict[str, Any]], workloads: Sequence[dict[str, Any]], title: str) -> Any:
    """Attainable GFLOP/s = min(peak, I x BW) per mode against I (FLOPs/byte), log-log. ``workloads``: rows with
    ``label``, ``intensity``, ``mode`` (which roof they sit under) and ``achieved_flops`` (W / T, FLOP/s)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.0, 4.6))
    lo, hi = _intensity_range(modes, workloads)
    x = np.logspace(np.log10(lo), np.log10(hi), 200)
    colours = plt.cm.viridis(np.linspace(0.0, 0.9, max(1, len(modes))))
    by_mode = {}
    for c, m in zip(colours, modes):
        y = np.minimum(m["peak_flops"], x * m["peak_bytes_per_s"]) / 1e9
        ax.plot(x, y, "-", c=c, lw=1.6, label=f"{_label(m)}: {m['peak_flops'] / 1e9:.0f} GFLOP/s, "
                f"{m['peak_bytes_per_s'] / 1e9:.1f} GB/s")
        by_mode[m["mode"]] = c
    for i, w in enumerate(workloads):
        ax.scatter([w["intensity"]], [w["achieved_flops"] / 1e9], marker=MARKERS[i % len(MARKERS)], s=46,
                   c=[by_mode.get(w.get("mode"), "k")], edgecolors="k", linewidths=0.7, zorder=3,
                   label=f"{w['label']} (I = {w['intensity']:.1f} FLOP/B)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity I (FLOP/byte of DRAM traffic, log)")
    ax.set_ylabel("attainable performance (GFLOP/s, log)")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="major", ls=":", lw=0.6)
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    return fig


FITS = {"bench": ("micro-benchmark fit", "", "-"), "profiles": ("profile fit", "profile_", "--")}


def energy_roofline_figure(modes: Sequence[dict[str, Any]], workloads: Sequence[dict[str, Any]], title: str,
                           fits: Sequence[str] = ("bench",)) -> Any:
    """Energy per FLOP (pJ/FLOP) of a kernel at intensity I running at the roof, per mode:
    e(I) = eps_flop + eps_byte / I + pi0 / min(peak, I x BW), log-log; ``workloads``: rows with ``label``,
    ``intensity``, ``mode`` and ``energy_per_flop_j`` (E / W). ``fits``: which energy constants are drawn, each
    labelled in the legend and the title: "bench" (the micro-benchmark windows: eps_flop_j, ...; solid) and/or
    "profiles" (fitted from the mode's profiled workloads: profile_eps_flop_j, ...; dashed)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7.0, 4.6))
    lo, hi = _intensity_range(modes, workloads)
    x = np.logspace(np.log10(lo), np.log10(hi), 200)
    colours = plt.cm.viridis(np.linspace(0.0, 0.9, max(1, len(modes))))
    by_mode = {}
    for c, m in zip(colours, modes):
        perf = np.minimum(m["peak_flops"], x * m["peak_bytes_per_s"])
        for fit in fits:
            name, key, style = FITS[fit]
            ef, eb, pi0 = m[f"{key}eps_flop_j"], m[f"{key}eps_byte_j"], m[f"{key}pi0_w"]
            e = ef + eb / x + pi0 / perf
            ax.plot(x, e * 1e12, style, c=c, lw=1.6, label=f"{_label(m)}, {name}: ε {ef * 1e12:.1f} pJ/FLOP, "
                    f"{eb * 1e12:.0f} pJ/B, π₀ {pi0:.1f} W")
        by_mode[m["mode"]] = c
    for i, w in enumerate(workloads):
        ax.scatter([w["intensity"]], [w["energy_per_flop_j"] * 1e12], marker=MARKERS[i % len(MARKERS)], s=46,
                   c=[by_mode.get(w.get("mode"), "k")], edgecolors="k", linewidths=0.7, zorder=3, label=w["label"])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity I (FLOP/byte of DRAM traffic, log)")
    ax.set_ylabel("energy per FLOP (pJ/FLOP, log)")
    ax.set_title(f"{title}\ndrawn: {' (solid) and '.join(FITS[f][0] for f in fits)}"
                 + (" (dashed)" if "profiles" in fits else ""), fontsize=9)
    ax.grid(True, which="major", ls=":", lw=0.6)
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    return fig


def save(fig: Any, path: Path) -> None:
    """Write a figure (PNG, PDF or SVG by the suffix) and close it."""
    plt = _pyplot()
    fig.savefig(path, dpi=130, bbox_inches="tight")   # the legend sits outside the axes
    plt.close(fig)


def energy_path(path: Path) -> Path:
    """Where the energy roofline goes beside the time roofline ``path``: NAME-energy.SUFFIX."""
    return path.with_name(f"{path.stem}-energy{path.suffix or '.png'}")


def plot_rooflines(points: Sequence[dict[str, Any]], workload_rows: Sequence[dict[str, Any]], path: Path,
                   title: str, fits: Sequence[str] = ("bench",)) -> tuple[Path, Path]:
    """The time roofline at ``path`` and the energy roofline beside it (``fits`` drawn); returns both paths."""
    save(time_roofline_figure(points, workload_rows, f"time roofline: {title}"), path)
    epath = energy_path(path)
    energy_rows = list(workload_rows) + (profiled_rows(points) if "profiles" in fits else [])
    save(energy_roofline_figure(points, energy_rows, f"energy roofline: {title}", fits), epath)
    return path, epath


def workload_rows(points: Sequence[dict[str, Any]], workload: str) -> list[dict[str, Any]]:
    """The workload as one point per mode (from ``RooflinePoint.to_dict()`` rows that carry it)."""
    rows = []
    for p in points:
        if p.get("workload_flops", 0) > 0 and p.get("time_s", 0) > 0:
            rows.append({"label": f"{workload} @ {p.get('mode_name') or p['mode']}", "mode": p["mode"],
                         "intensity": p["workload_flops"] / p["workload_bytes"],
                         "achieved_flops": p["workload_flops"] / p["time_s"],
                         "energy_per_flop_j": p["energy_j"] / p["workload_flops"]})
    return rows


def profiled_rows(points: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The workloads a profile fit used, as measured: E_profiled / W at their intensity W / Q, per mode."""
    return [{"label": f"profiled {x['workload']} @ {p.get('mode_name') or p['mode']}", "mode": p["mode"],
             "intensity": x["flops"] / x["bytes"], "energy_per_flop_j": x["energy_j"] / x["flops"]}
            for p in points for x in p.get("profiled", [])]
