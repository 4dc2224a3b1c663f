"""An attached job's model stage (``--attach``): its k modes profiled on the operator's own training while it
trains, on the board the job holds. For each mode: apply it, let ``WARMUP_STEPS`` of the user's steps pass (the
warm-up, counted in the user's steps), then time ``defaults.MINIBATCHES`` more with the board's energy over exactly
those (two attach commands, so the window holds no warm-up); the mode's profile (median time per step, mean power)
is stored like a campaign's, under the source ``job:ID``. Then the best reference is transferred to them with 5-fold
calibration, and the job goes on as any other: choice, apply, closed loop.

Nothing is wasted: the profiled steps are the job's own training and count toward its length, board time and
energy. ``profiled_steps``/``profiled_s`` keep what the phase cost, so the summary can say how much longer it took
than running in the chosen mode throughout. A mode profiled before a restart is not profiled again."""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Awaitable, Callable

from jetfleet.controller.jobs.context import JobContext
from jetfleet.controller.jobs.launch import keep_tail, launch_pb
from jetfleet.controller.jobs.models import first_batch
from jetfleet.controller.jobs.state import JobState
from jetfleet.controller.store import JobRecord
from jetfleet.controller.store.base import ProfileRecord
from jetfleet.shared import defaults
from jetfleet.shared.catalog import Catalog, PowerMode
from jetfleet.shared.convert import mode_from_pb, mode_to_pb
from jetfleet.shared.proto import agent_pb2

WARMUP_STEPS = 10    # the user's steps let pass after a mode change before the timed ones

Move = Callable[..., Awaitable[None]]


def source_of(job_id: str) -> str:
    """The profiles' source name of an attached job's online profiling."""
    return f"job:{job_id}"


class OnlineProfiler:
    """Profiles an attached job's modes on the user's training (module docstring)."""

    def __init__(self, ctx: JobContext, rec: JobRecord, catalog: Catalog, move: Move,
                 save: Callable[[], Awaitable[None]], check_cancel: Callable[[], None]) -> None:
        self.ctx, self.rec, self.catalog = ctx, rec, catalog
        self.move, self.save, self.check_cancel = move, save, check_cancel

    def modes(self) -> list[PowerMode]:
        """The k modes, seeded by the job (the active strategy's second half needs a model first: balanced here)."""
        o = self.rec.options
        strategy = "balanced" if o.strategy == "active" else o.strategy
        return first_batch(strategy, self.catalog, o.profile_modes, seed=int(self.rec.created_s))

    async def profile(self, device: str) -> None:
        """Profile every mode not profiled yet on ``device`` (held by the job), then transfer the reference."""
        rec, ctx = self.rec, self.ctx
        reference = await asyncio.to_thread(ctx.models.repo.best_reference, rec.target_model, rec.workload)
        modes = self.modes()
        done = {p.mode for p in await asyncio.to_thread(ctx.store.query_profiles, board_model=rec.target_model,
                                                          workload=rec.workload) if p.source == source_of(rec.job_id)}
        for i, mode in enumerate(modes):
            if str(mode) in done:
                continue
            self.check_cancel()
            await self.move(JobState.PROFILING, f"profiling {i}/{len(modes)} modes of {rec.workload} online on its "
                                                f"own steps on {device}: {mode}")
            result = await ctx.router.send(device, agent_pb2.Command(set_mode=agent_pb2.SetMode(mode=mode_to_pb(mode))))
            confirmed = str(mode_from_pb(result.confirmed_mode))
            rec.mode = confirmed
            await self._steps(device, f"{rec.job_id}-p{i}w", WARMUP_STEPS)
            timed = await self._steps(device, f"{rec.job_id}-p{i}", defaults.MINIBATCHES)
            t = timed.training
            n = len(t.minibatch_times_s)
            await asyncio.to_thread(ctx.store.record_result, ProfileRecord(
                source_of(rec.job_id), confirmed, 0, rec.target_model, device, rec.workload,
                statistics.median(t.minibatch_times_s) * 1e3, t.energy_j / t.elapsed_s, ctx.wall(),
                minibatch_time_mean_ms=statistics.fmean(t.minibatch_times_s) * 1e3, energy_j=t.energy_j / n,
                steady_state_found=True))
            await self.save()
        self.check_cancel()
        await self.move(JobState.MODELLING, f"transferring {reference['model_id']} to {len(modes)} modes profiled "
                                            "online")
        doc = await asyncio.to_thread(ctx.models.transfer_doc, reference, rec.target_model, rec.workload,
                                      baseline=False)
        rec.model_id = doc["model_id"]
        await self.save()

    async def _steps(self, device: str, cid: str, steps: int) -> agent_pb2.CommandResult:
        """``steps`` of the user's training in the board's current mode, counted into the job's progress."""
        rec, ctx = self.rec, self.ctx
        result = await ctx.router.send(device, agent_pb2.Command(run_training=agent_pb2.RunTraining(
            workload=rec.workload, minibatches=steps, attach=True, attach_timeout_s=rec.options.attach_timeout_s,
            launch=launch_pb(rec) if rec.options.template else None)), command_id=cid, timeout_s=ctx.config.run_timeout_s)
        t = result.training
        keep_tail(rec, list(t.output_tail))
        n = len(t.minibatch_times_s)
        rec.minibatches_done += n
        rec.energy_j += t.energy_j
        rec.elapsed_s += t.elapsed_s
        rec.profiled_steps += n
        rec.profiled_s += t.elapsed_s
        return result
