"""A job's model stage: the calibrated model of (board model, workload) if there is one; otherwise profile k modes
with the job's strategy (a campaign of its own, whose modes take the boards' leases one at a time) and transfer
the best reference to them with 5-fold calibration — or, on a lab with no reference at all, fit the same networks
from scratch on them, calibrated the same way (a model of kind ``scratch``; the job's k is then twice the default
unless given: ``submit.SCRATCH_FACTOR``). The active strategy chooses its second half while the first half's last
modes are still on the boards (with no reference, all k are the balanced strategy's)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import Any

from jetfleet.controller.campaigns.run import Run
from jetfleet.controller.jobs.context import JobContext
from jetfleet.controller.jobs.models import first_batch, second_batch
from jetfleet.controller.jobs.state import JobState
from jetfleet.controller.store import JobRecord
from jetfleet.shared import defaults
from jetfleet.shared.catalog import Catalog, PowerMode
from jetfleet.shared.errors import FailedPrecondition
from jetfleet.shared.proto import operator_pb2

ACTIVE_MIN_DONE = 5     # the active strategy's second batch needs a model of at least this many profiled modes
ACTIVE_FIT_S = 3.0      # wall seconds to choose that batch (a transfer on the first half, on a loaded 2-core machine)

Move = Callable[..., Awaitable[None]]


class Profiler:
    """Finds or builds the job's model (module docstring)."""

    def __init__(self, ctx: JobContext, rec: JobRecord, catalog: Catalog, move: Move, save: Callable[[], Awaitable[None]],
                 pause: Callable[[], Awaitable[None]]) -> None:
        self.ctx, self.rec, self.catalog = ctx, rec, catalog
        self.move, self.save, self.pause = move, save, pause

    async def ensure_model(self, targets: Callable[[], list[str]]) -> None:
        """Set the job's model id: an existing calibrated model, or one transferred from k profiled modes."""
        rec, ctx = self.rec, self.ctx
        doc = await asyncio.to_thread(ctx.models.repo.find, rec.target_model, rec.workload)
        if doc is not None:
            rec.model_id = doc["model_id"]
            await self.save()
            return
        reference = await asyncio.to_thread(ctx.models.repo.reference_for, rec.target_model, rec.workload)
        k, strategy = rec.options.profile_modes, rec.options.strategy
        if reference is None and strategy == "active":   # its second half is chosen by a transferred model
            strategy = "balanced"
        if not rec.campaign_ids:
            await self._campaign(first_batch(strategy, self.catalog, k, seed=rec.seed))
        while True:
            runs = [ctx.campaigns.get(c) for c in rec.campaign_ids]
            done = sum(r.count("done") for r in runs)
            total = sum(len(r.modes) for r in runs)
            for r in runs:
                if r.rec.status == "cancelled":
                    raise FailedPrecondition(f"its profiling campaign {r.rec.campaign_id} was cancelled", field="job")
            left = total - done - sum(r.count("failed") for r in runs)
            second_due = done >= ACTIVE_MIN_DONE and left <= self._lookahead(runs[0], len(targets()))
            if strategy == "active" and reference is not None and len(rec.campaign_ids) == 1 and second_due:
                planned = [self.catalog.parse_mode(m) for m in runs[0].modes]
                picked = await asyncio.to_thread(second_batch, ctx.models.repo, reference, self.catalog,
                                                 rec.target_model, rec.workload, k, rec.seed, planned)
                await self._campaign(picked, f"second half, chosen with {left} of the first to measure")
                continue
            if all(r.rec.status == "done" for r in runs):
                break
            waiting = next((ctx.campaigns.campaign_pb(r).waiting for r in runs if ctx.campaigns.campaign_pb(r).waiting),
                           "")
            await self.move(JobState.PROFILING, f"profiling {done}/{total} modes of {rec.workload} on "
                                                f"{rec.target_device or rec.target_model} ({strategy})"
                                                + (f": {waiting}" if waiting else ""),
                            waiting_for="a board" if waiting else "")
            await self.pause()
        await self.move(JobState.MODELLING, f"transferring {reference['model_id']} to {done} profiled modes"
                        if reference is not None else
                        f"fitting from scratch on {done} profiled modes (no reference model to transfer from)")
        doc = await asyncio.to_thread(ctx.models.transfer_doc, reference, rec.target_model, rec.workload,
                                      baseline=False)
        rec.model_id = doc["model_id"]
        await self.save()

    @staticmethod
    def _lookahead(run: Run, boards: int) -> int:
        """Modes still to measure when the active strategy's second batch is chosen: one per board, or as many as
        the boards measure while it is chosen (a few seconds of fitting), so that no board waits for the model."""
        per_mode_s = sum(run.durations) / len(run.durations) if run.durations else math.inf
        return max(boards, math.ceil(ACTIVE_FIT_S / per_mode_s) if per_mode_s > 0 else 1)

    async def _campaign(self, modes: list[PowerMode] | list[Any], why: str = "") -> None:
        rec = self.rec
        camp = await self.ctx.campaigns.create(operator_pb2.CreateCampaignRequest(
            workload=rec.workload, device_id=rec.target_device, board_model="" if rec.target_device else rec.target_model,
            modes=f"job:{rec.job_id}" + (f" ({why})" if why else ""), mode_list=[str(m) for m in modes],
            minibatches=defaults.MINIBATCHES))
        rec.campaign_ids.append(camp.campaign_id)
        await self.save()
