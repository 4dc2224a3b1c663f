"""Confirm a power budget's choice before committing to it (``powertrain/confirm.py``; why: docs/jobs.md, "Real
grids"): on the board the job holds, before its first training command, profile the mode the model would choose,
let the closed loop's model learn the measurement, choose again, and stop when the choice is a mode already
measured or the profiles allowed (``JobOptions.confirm_profiles``, default 3) are spent. The job then commits to the
fastest mode measured within the budget (its board model's stored profiles of the workload count: they were
measured too), else to the model's corrected choice.

A built-in workload's choice is measured by a profile command (a measurement, not training: nothing of the job's
length is spent); an attached job's on the operator's own steps (``online.OnlineProfiler.measure``: the mode
applied, warm-up, timed steps with their energy), which are its training and count toward its length.

Every profile is stored in the job's record as it comes back (``JobRecord.confirms``), so a controller restart
replays them into the model and goes on from the next; a profile in flight at a restart is measured again (its
commands are sent again under the same ids: a board runs each once). The profiles' board seconds are the job's cost
of confirming, printed in its summary."""

from __future__ import annotations

import asyncio
import logging
import statistics
from collections.abc import Awaitable, Callable

from jetfleet.controller.campaigns.results import check_profile_result, profile_command
from jetfleet.controller.jobs.context import JobContext
from jetfleet.controller.jobs.state import JobState
from jetfleet.controller.powertrain.confirm import Confirmation
from jetfleet.controller.powertrain.feedback import Feedback, Observation
from jetfleet.controller.store import JobRecord
from jetfleet.controller.store.job_record import ChoiceRecord, Confirmed
from jetfleet.shared import defaults
from jetfleet.shared.catalog import Catalog
from jetfleet.shared.columns import profile_power_w
from jetfleet.shared.summary import summarise

log = logging.getLogger(__name__)
Move = Callable[..., Awaitable[None]]
Measure = Callable[[str, str], Awaitable[tuple[float, float, float]]]   # (device, mode) -> (W, ms per step, board s)


def needs_confirming(rec: JobRecord) -> bool:
    """Whether the job still has to confirm its choice (a power budget that asked for it, not yet committed)."""
    return rec.goal == "power" and rec.options.confirm_profiles > 0 and not rec.confirmed and rec.choice is not None


def known_profiles(ctx: JobContext, rec: JobRecord, index: dict[str, int]) -> list[Observation]:
    """The stored measurements of the job's workload on its board model (its own profiling campaign's, a
    reference campaign's, imported rows): one observation per mode, the median of its rows. Blocking."""
    rows: dict[str, list[tuple[float, float]]] = {}
    for p in ctx.store.query_profiles(board_model=rec.target_model, workload=rec.workload):
        if p.mode in index:
            rows.setdefault(p.mode, []).append((p.power_w, p.minibatch_time_ms))
    return [Observation(index[m], statistics.median(w for w, _ in v), statistics.median(t for _, t in v))
            for m, v in rows.items()]


def replay(rec: JobRecord, feedback: Feedback, index: dict[str, int]) -> None:
    """Teach the loop's model the job's confirming profiles (after a restart, as it learned them then)."""
    for c in rec.confirms:
        if c.mode in index:
            feedback.observe(Observation(index[c.mode], c.power_w, c.time_ms, c.seconds), over_budget=c.over)


class Confirmer:
    """Measures a power budget's choice on the job's board before the job commits (module docstring)."""

    def __init__(self, ctx: JobContext, rec: JobRecord, catalog: Catalog, feedback: Feedback, index: dict[str, int],
                 move: Move, save: Callable[[], Awaitable[None]], measure: Measure | None = None,
                 model_note: str = "") -> None:
        self.ctx, self.rec, self.catalog, self.feedback, self.index = ctx, rec, catalog, feedback, index
        self.move, self.save = move, save
        self.measure: Measure = measure or self._profile
        self.model_note = model_note   # what the model rests on (a fit from scratch), kept in the committed choice

    async def confirm(self, device: str) -> None:
        """Profile on ``device`` (held by the job) until the choice stands; then commit and store it."""
        rec, ctx = self.rec, self.ctx
        known = await asyncio.to_thread(known_profiles, ctx, rec, self.index)
        conf = Confirmation(self.feedback, rec.power_budget_w, profiles=rec.options.confirm_profiles, known=known)
        for c in rec.confirms:   # measured before a restart (the runner's model has learned them: ``replay``)
            if c.mode in self.index:
                conf.remember(Observation(self.index[c.mode], c.power_w, c.time_ms, c.seconds))
        while True:
            i = conf.next_mode()
            if i is None:
                break
            mode = str(self.feedback.base.modes[i])
            hi_w = float(self.feedback.predictions().power_hi[i])
            await self.move(JobState.APPLYING, f"confirming the choice on {device}: measuring {mode} "
                                               f"({conf.used + 1} of at most {conf.profiles})")
            power_w, time_ms, seconds = await self.measure(device, mode)
            over = power_w > rec.power_budget_w
            rec.confirms.append(Confirmed(mode, device, power_w, time_ms, hi_w, over, seconds))
            conf.add(Observation(i, power_w, time_ms, seconds))   # a profile is shorter than a window: noisier
            await self.save()
            log.info("job %s: confirmed %s on %s: %.2f W (budget %g W, bound %.2f W), %.1f ms", rec.job_id, mode,
                     device, power_w, rec.power_budget_w, hi_w, time_ms)
        choice = conf.commit()
        before = rec.mode
        modes = self.feedback.base.modes
        seen_w = {str(modes[i]): o.power_w for i, o in {**conf.known, **conf.measured}.items()}
        how = (f"measured {len(rec.confirms)} mode(s) before committing"
               + ("" if str(choice.mode) == before else f"; the model's choice {before} was replaced"))
        if str(choice.mode) in seen_w:   # the promise is the measurement (the model's bound there may be wider)
            how += f"; {choice.mode} measured at {seen_w[str(choice.mode)]:.2f} W"
        old = rec.choice
        assert old is not None
        rec.choice = ChoiceRecord(str(choice.mode), choice.goal, choice.time_ms, choice.time_hi_ms, choice.power_w,
                                  choice.power_hi_w, choice.power_lo_w, choice.at_risk, old.confidence,
                                  time_lo_ms=choice.time_lo_ms, covered=choice.covered,
                                  note="; ".join(n for n in (choice.coverage_note, how, self.model_note) if n))
        rec.mode = str(choice.mode)
        rec.confirmed = True
        await self.save()

    async def _profile(self, device: str, mode: str) -> tuple[float, float, float]:
        """(mean W, median ms per minibatch, board seconds of the timed minibatches) of ``mode`` on ``device``."""
        ctx, rec = self.ctx, self.rec
        cmd = profile_command(rec.workload, self.catalog.parse_mode(mode), defaults.MINIBATCHES)
        result = await ctx.router.send(device, cmd, timeout_s=ctx.campaigns.profile_timeout_s)
        check_profile_result(result.profile, self.catalog, mode, rec.workload, defaults.MINIBATCHES)
        s = summarise(result.profile.minibatch_times_s, profile_power_w(result.profile))
        return s.power_mean_w, s.minibatch_time_median_ms, float(sum(result.profile.minibatch_times_s))
