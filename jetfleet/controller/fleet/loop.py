"""The fleet scheduler's aggregate loop (``FleetScheduler.observe``): each window's measured board powers correct
each running job's power model, then jobs step down where the lab or a rack draws over its cap, or up where
every cap over them leaves headroom."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jetfleet.controller.fleet.scheduler import FleetJob, FleetScheduler

Step = tuple["FleetJob", str, str]   # a job moved to its current option: kind (over, headroom) and why

OVER_TOLERANCE = 0.01    # the sensors' noise: a sum this far over the cap counts as over (INA3221 ~1%)
HEADROOM = 0.04          # under the cap by more than this share: step up
RATIO_GAIN = 0.5         # how fast the observed/predicted ratio follows new windows


def _caps(s: FleetScheduler) -> list[tuple[str | None, float]]:
    """The finite caps: (None, the lab's) and (group, a rack's) for each capped rack with a board."""
    groups = {b.group for b in s.boards}
    out: list[tuple[str | None, float]] = [(None, s.cap_w)] if math.isfinite(s.cap_w) else []
    return out + [(g, c) for g, c in sorted(s.group_caps_w.items()) if g in groups and math.isfinite(c)]


def _under(s: FleetScheduler, bid: str, group: str | None) -> bool:
    return group is None or s.board(bid).group == group


def predicted_w(s: FleetScheduler, group: str | None = None) -> float:
    """The running jobs' power as the scheduler reckons it plus the other boards' draw, in the lab (None) or a
    rack group."""
    total = sum(b.idle_w for b in s.boards if b.board_id not in s.running and (group is None or b.group == group))
    for bid, j in s.running.items():
        if _under(s, bid, group):
            total += float(s.power_of(j, s.board(bid).model)[j.option])
    return total


def observe(s: FleetScheduler, board_power_w: Mapping[str, float]) -> list[Step]:
    """``FleetScheduler.observe``: correct the running jobs' ratios; step down under every cap measured over it,
    else up where every cap over a job leaves headroom. The jobs moved (each once, to where it ended), in the
    order they first moved."""
    for bid, j in s.running.items():
        if bid in board_power_w:
            c = j.candidates[s.board(bid).model]
            r = board_power_w[bid] / float(c.power_w[j.option])
            j.ratio = r if math.isnan(j.ratio) else j.ratio + RATIO_GAIN * (r - j.ratio)
            s.board_ratio[bid] = j.ratio
    seen: dict[str, float] = {}
    for b in s.boards:
        job = s.running.get(b.board_id)
        fallback = b.idle_w if job is None else float(s.power_of(job, b.model)[job.option])
        seen[b.board_id] = board_power_w.get(b.board_id, fallback)
    caps = _caps(s)
    measured = {g: sum(w for bid, w in seen.items() if g is None or s.board(bid).group == g) for g, _ in caps}
    changes: list[Step] = []
    over = [(g, cap) for g, cap in caps if measured[g] > cap]   # any excess: a window's mean is good to ~0.3%
    for g, cap in over:
        est = measured[g]
        where = "lab" if g is None else f"rack {g}"
        while est > cap * (1 - OVER_TOLERANCE / 2):
            step = _cheapest_down(s, g)
            if step is None:
                break
            job, dp = step
            job.ceiling = min(job.ceiling, job.option)   # it was over here: no step back up to it until re-chosen
            job.option -= 1
            est -= dp
            changes.append((job, "over", f"{where} {measured[g]:.1f} W over the {cap:g} W cap"))
    if not over:
        roomy = {g for g, cap in caps if measured[g] < cap * (1 - HEADROOM)}
        if roomy:
            changes += _step_up(s, caps, roomy, measured)
    final: dict[str, Step] = {}    # several steps of one job in a window: one move (to the last), in first order
    for ch in changes:
        final[ch[0].job_id] = ch
    return list(final.values())


def _step_up(s: FleetScheduler, caps: list[tuple[str | None, float]], roomy: set[str | None],
             measured: dict[str | None, float]) -> list[Step]:
    """Jobs whose every cap has headroom step up, most throughput gained per watt first, while the corrected
    sums stay inside the noise band of each of those caps."""
    limit = dict(caps)
    est = {g: predicted_w(s, g) for g, _ in caps}
    out: list[Step] = []
    while True:
        best: tuple[float, FleetJob, float, list[str | None]] | None = None
        for bid, j in s.running.items():
            m = s.board(bid).model
            over_it = [g for g, _ in caps if _under(s, bid, g)]
            if not over_it or any(g not in roomy for g in over_it):
                continue
            if j.option >= min(len(j.candidates[m].modes), j.ceiling) - 1:
                continue
            p, v = s.power_of(j, m), s.value_of(j, m)
            dp = float(p[j.option + 1] - p[j.option])
            if any(dp > limit[g] * (1 - OVER_TOLERANCE) - est[g] for g in over_it):   # land inside the noise band
                continue
            gain = float(v[j.option + 1] - v[j.option]) / max(dp, 1e-9)
            if gain > 0 and (best is None or gain > best[0]):
                best = (gain, j, dp, over_it)
        if best is None:
            return out
        _, job, dp, over_it = best
        job.option += 1
        for g in over_it:
            est[g] += dp
        out.append((job, "headroom", ", ".join(f"{'lab' if g is None else 'rack ' + g} {measured[g]:.1f} W under "
                                                f"the {limit[g]:g} W cap" for g in over_it)))


def _cheapest_down(s: FleetScheduler, group: str | None) -> tuple[FleetJob, float] | None:
    best: tuple[float, FleetJob, float] | None = None
    for bid, j in s.running.items():
        if j.option <= 0 or not _under(s, bid, group):
            continue
        m = s.board(bid).model
        p, v = s.power_of(j, m), s.value_of(j, m)
        dp = float(p[j.option] - p[j.option - 1])
        cost = float(v[j.option] - v[j.option - 1]) / max(dp, 1e-9)
        if best is None or cost < best[0]:
            best = (cost, j, dp)
    return None if best is None else (best[1], best[2])
