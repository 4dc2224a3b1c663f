"""An attached job's model stage (``--attach``): its k modes profiled on the operator's own training while it
trains, on the board the job holds. For each mode: apply it, let ``WARMUP_STEPS`` of the user's steps pass (the
warm-up, counted in the user's steps), then time the plan's timed steps with the board's energy over exactly
those (two attach commands, so the window holds no warm-up); the mode's profile (median time per step, mean power)
is stored like a campaign's, under the source ``job:ID``. Then the best reference is transferred to them with 5-fold
calibration — or, on a lab with no reference at all, the same networks are fitted from scratch on them, calibrated
the same way (``ModelService.transfer_doc`` with no reference) — and the job goes on as any other: choice, apply,
closed loop.

The profiling is bounded by the job's length (``plan``): at most ``PROFILE_SHARE`` of its steps, so a short job
profiles fewer modes (never fewer than a 5-fold cross-validation needs) with fewer timed steps each (never fewer
than ``MIN_TIMED_STEPS``); a job too short for that is refused at submission.

Nothing is wasted: the profiled steps are the job's own training and count toward its length, board time and
energy. ``profiled_steps``/``profiled_s`` keep what the phase cost, so the summary can say how much longer the job
took than running in the chosen mode throughout. A mode profiled before a restart is not profiled again."""

from __future__ import annotations

import asyncio
import math
import statistics
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from jetfleet.controller.jobs.context import JobContext
from jetfleet.controller.jobs.launch import keep_tail, launch_pb
from jetfleet.controller.jobs.models import first_batch
from jetfleet.controller.jobs.state import JobState
from jetfleet.controller.powertrain.calibrate import DEFAULT_FOLDS
from jetfleet.controller.powertrain.nn import MIN_MODES
from jetfleet.controller.store import JobRecord
from jetfleet.controller.store.base import ProfileRecord
from jetfleet.shared import defaults
from jetfleet.shared.catalog import Catalog, PowerMode
from jetfleet.shared.convert import mode_from_pb, mode_to_pb
from jetfleet.shared.errors import InvalidArgument
from jetfleet.shared.proto import agent_pb2

WARMUP_STEPS = 10    # the user's steps let pass after a mode change before the timed ones
PROFILE_SHARE = 0.25          # online profiling takes at most this share of an attached job's steps
MIN_TIMED_STEPS = 10          # timed steps per mode below which a mode's median is not an honest profile
MIN_PROFILE_MODES = DEFAULT_FOLDS + MIN_MODES   # the fewest modes a calibrated fit cross-validates on


@dataclass(frozen=True)
class ProfilePlan:
    """An attached job's online profiling: k modes, each ``WARMUP_STEPS`` then ``timed_steps`` of its steps."""

    modes: int
    timed_steps: int

    @property
    def steps(self) -> int:
        """The job's steps the profiling takes."""
        return self.modes * (WARMUP_STEPS + self.timed_steps)


def plan(minibatches: int, asked_modes: int, default_modes: int) -> ProfilePlan:
    """The online profiling of an attached job of ``minibatches`` steps, within ``PROFILE_SHARE`` of them: k is the
    k asked for (``asked_modes``, 0: none) or the default shrunk to what fits with ``defaults.MINIBATCHES`` timed
    steps per mode (never below ``MIN_PROFILE_MODES``); the timed steps per mode are ``defaults.MINIBATCHES``, or
    fewer when k modes of them do not fit (never below ``MIN_TIMED_STEPS``). InvalidArgument naming the field when
    the job is too short for any honest profile, or the k asked for does not fit."""
    share = int(PROFILE_SHARE * minibatches)
    least = MIN_PROFILE_MODES * (WARMUP_STEPS + MIN_TIMED_STEPS)
    if share < least:
        raise InvalidArgument(
            f"an attached job without a model profiles its modes on its own steps, at most {PROFILE_SHARE:.0%} of "
            f"them: at least {MIN_PROFILE_MODES} modes x ({WARMUP_STEPS} warm-up + {MIN_TIMED_STEPS} timed) = {least} "
            f"steps, so the job needs at least {math.ceil(least / PROFILE_SHARE)} steps; got {minibatches}",
            field="minibatches")
    k = asked_modes or max(MIN_PROFILE_MODES, min(default_modes, share // (WARMUP_STEPS + defaults.MINIBATCHES)))
    most = share // (WARMUP_STEPS + MIN_TIMED_STEPS)
    if k > most:
        raise InvalidArgument(
            f"profile_modes={k}: a job of {minibatches} steps profiles at most {most} modes online ({PROFILE_SHARE:.0%} "
            f"of its steps, {WARMUP_STEPS} warm-up + at least {MIN_TIMED_STEPS} timed steps each); give fewer "
            "--profile-modes (or none: it is then sized to the job) or a longer job", field="profile_modes")
    return ProfilePlan(k, min(defaults.MINIBATCHES, share // k - WARMUP_STEPS))


def confirm_fit(minibatches: int, timed_steps: int, asked: int, default: int) -> int:
    """How many modes an attached job's power budget measures on its own steps before committing (``confirming.py``):
    each takes ``WARMUP_STEPS`` + ``timed_steps`` of the job's steps, all of them at most ``PROFILE_SHARE`` of the
    job. The number asked for (``asked``, 0: none) if it fits, else InvalidArgument naming ``confirm_profiles`` and
    the most that fit; the default shrunk to what fits (0: the job commits to the model's choice)."""
    most = int(PROFILE_SHARE * minibatches) // (WARMUP_STEPS + timed_steps)
    if asked > most:
        raise InvalidArgument(
            f"confirm_profiles={asked}: an attached job of {minibatches} steps measures at most {most} modes on its "
            f"own steps before committing ({PROFILE_SHARE:.0%} of them, {WARMUP_STEPS} warm-up + {timed_steps} timed "
            "steps each); give fewer or a longer job", field="confirm_profiles")
    return asked or min(default, most)

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
        return first_batch(strategy, self.catalog, o.profile_modes, seed=self.rec.seed)

    async def profile(self, device: str) -> None:
        """Profile every mode not profiled yet on ``device`` (held by the job), then transfer the reference (or fit
        from scratch when the lab has none)."""
        rec, ctx = self.rec, self.ctx
        reference = await asyncio.to_thread(ctx.models.repo.reference_for, rec.target_model, rec.workload)
        modes = self.modes()
        done = {p.mode for p in await asyncio.to_thread(ctx.store.query_profiles, board_model=rec.target_model,
                                                          workload=rec.workload) if p.source == source_of(rec.job_id)}
        for i, mode in enumerate(modes):
            if str(mode) in done:
                continue
            self.check_cancel()
            await self.move(JobState.PROFILING, f"profiling {i}/{len(modes)} modes of {rec.workload} online on its "
                                                f"own steps on {device}: {mode}")
            await self._mode_profile(device, mode, f"p{i}", profiling=True)
            await self.save()
        self.check_cancel()
        if reference is None:
            await self.move(JobState.MODELLING, f"fitting from scratch on {len(modes)} modes profiled online (no "
                                                "reference model to transfer from)")
        else:
            await self.move(JobState.MODELLING, f"transferring {reference['model_id']} to {len(modes)} modes "
                                                "profiled online")
        doc = await asyncio.to_thread(ctx.models.transfer_doc, reference, rec.target_model, rec.workload,
                                      baseline=False)
        rec.model_id = doc["model_id"]
        await self.save()

    async def measure(self, device: str, mode: str) -> tuple[float, float, float]:
        """Confirm a choice on the user's steps (``confirming.py``): apply ``mode``, let the warm-up pass, time the
        plan's timed steps with their energy; (mean W, mean ms per step, board seconds of the timed steps). The
        steps are the job's training (counted toward its length, not as online profiling); the profile is stored
        under the job's source like the online profiles, for later models of the workload."""
        self.check_cancel()
        t = await self._mode_profile(device, self.catalog.parse_mode(mode), f"c{len(self.rec.confirms)}",
                                     profiling=False)
        # the mean step, as the closed loop's windows and the verdict observe a mode (a median of a few steps reads
        # short where the board's steps are uneven: the promise would then be missed by the job that keeps it)
        return t.energy_j / t.elapsed_s, t.elapsed_s / len(t.minibatch_times_s) * 1e3, t.elapsed_s

    async def _mode_profile(self, device: str, mode: PowerMode, tag: str, *, profiling: bool) -> agent_pb2.TrainingResult:
        """Apply ``mode``, let ``WARMUP_STEPS`` of the user's steps pass (command JOB-{tag}w), time the plan's
        timed steps with their energy (JOB-{tag}) and store the mode's profile under the job's source; the timed
        command's TrainingResult."""
        rec, ctx = self.rec, self.ctx
        result = await ctx.router.send(device, agent_pb2.Command(set_mode=agent_pb2.SetMode(mode=mode_to_pb(mode))))
        confirmed = str(mode_from_pb(result.confirmed_mode))
        rec.mode = confirmed
        await self._steps(device, f"{rec.job_id}-{tag}w", WARMUP_STEPS, profiling)
        t = (await self._steps(device, f"{rec.job_id}-{tag}", rec.options.profile_steps or defaults.MINIBATCHES,
                               profiling)).training
        n = len(t.minibatch_times_s)
        await asyncio.to_thread(ctx.store.record_result, ProfileRecord(
            source_of(rec.job_id), confirmed, 0, rec.target_model, device, rec.workload,
            statistics.median(t.minibatch_times_s) * 1e3, t.energy_j / t.elapsed_s, ctx.wall(),
            minibatch_time_mean_ms=statistics.fmean(t.minibatch_times_s) * 1e3, energy_j=t.energy_j / n,
            steady_state_found=True))
        return t

    async def _steps(self, device: str, cid: str, steps: int, profiling: bool = True) -> agent_pb2.CommandResult:
        """``steps`` of the user's training in the board's current mode, counted into the job's progress, and into
        the online profiling's cost (or, ``profiling`` False, the confirmation's steps)."""
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
        if profiling:
            rec.profiled_steps += n
            rec.profiled_s += t.elapsed_s
        else:
            rec.confirmed_steps += n
        return result
