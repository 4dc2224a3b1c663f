"""A board's profile result, checked before it is believed and turned into the record the store keeps.

A result must be for the mode and workload that were asked for, hold at least the minibatches
asked for (the agent may keep more, so its window holds power samples), and every value in it must
be physically possible on the board (``jetfleet.shared.bounds``). The summary is computed here from
every sample of the window, so it is exact whatever the result's size."""

from __future__ import annotations

import math
import time

from jetfleet.controller.columns_check import check_columns
from jetfleet.controller.store import ProfileRecord
from jetfleet.shared import defaults
from jetfleet.shared.bounds import MAX_MINIBATCH_S
from jetfleet.shared.catalog import Catalog, PowerMode
from jetfleet.shared.columns import profile_power_w, profile_samples
from jetfleet.shared.convert import check_samples, mode_from_pb, mode_to_pb
from jetfleet.shared.errors import InvalidArgument, JetfleetError
from jetfleet.shared.proto import agent_pb2, common_pb2
from jetfleet.shared.summary import summarise


def profile_command(workload: str, mode: PowerMode, minibatches: int, command_id: str = "") -> agent_pb2.Command:
    """The command that profiles ``workload`` in ``mode`` for ``minibatches`` with the project's loader and sampling
    settings (a campaign's mode, a job confirming its choice, an optimize --apply verification)."""
    return agent_pb2.Command(command_id=command_id, run_profile=agent_pb2.RunProfile(
        workload=workload, mode=mode_to_pb(mode), minibatches=minibatches, minibatch_size=defaults.MINIBATCH_SIZE,
        workers=defaults.WORKERS, sample_interval_s=defaults.SAMPLE_INTERVAL_S))


class BadResult(InvalidArgument):
    """A board's result that cannot be true (wrong mode, impossible values, an empty window): the mode is
    measured again, and fails after the attempt limit with this reason."""


def check_profile_result(p: agent_pb2.ProfileResult, catalog: Catalog, mode: str, workload: str,
                         minibatches: int) -> None:
    """BadResult naming the first field of ``p`` that is not a measurement of ``workload`` in ``mode``."""
    try:
        got = str(catalog.validate(mode_from_pb(p.mode)))
    except InvalidArgument as e:
        raise BadResult(f"profile result mode: {e.message}", field="result.profile.mode") from None
    if got != mode or p.workload != workload:
        raise BadResult(f"profile result is for {p.workload[:64]!r} in {got}, not {workload} in {mode}",
                        field="result.profile.mode")
    times = p.minibatch_times_s
    if len(times) < minibatches:
        raise BadResult(f"profile result holds {len(times)} minibatches, fewer than the {minibatches} asked for",
                        field="result.profile.minibatch_times_s")
    if any(not (math.isfinite(t) and 0 < t <= MAX_MINIBATCH_S) for t in times):
        raise BadResult(f"profile result has a minibatch time outside (0, {MAX_MINIBATCH_S:g}] s",
                        field="result.profile.minibatch_times_s")
    if not profile_samples(p):
        raise BadResult("profile result has no power sample in its window", field="result.profile.power")
    try:
        check_samples(p.power, catalog, "result.profile.power")
        if p.HasField("power_columns"):
            check_columns(p.power_columns, catalog, "result.profile.power_columns")
    except InvalidArgument as e:
        raise BadResult(e.message, field=e.field) from None
    if not (math.isfinite(p.window_start_s) and math.isfinite(p.window_end_s) and p.window_start_s <= p.window_end_s):
        raise BadResult("profile result window is not an interval", field="result.profile.window_start_s")


def profile_record(campaign_id: str, workload: str, device: str, model: str, mode: str,
                   p: agent_pb2.ProfileResult, *, created_s: float | None = None) -> ProfileRecord:
    """The store's record of a checked result: the exact summary, and every raw sample of the window as the
    board sent it (the message serialized in one call, no per-sample reshaping)."""
    summary = summarise(p.minibatch_times_s, profile_power_w(p))
    return ProfileRecord(campaign_id, mode, 0, model, device, workload, summary.minibatch_time_median_ms,
                         summary.power_mean_w, time.time() if created_s is None else created_s,
                         summary.minibatch_time_mean_ms,
                         summary.energy_per_minibatch_j, summary.power_samples, p.steady_state_found,
                         raw_pb=p.SerializeToString())


def failed_result(command_id: str, e: JetfleetError) -> agent_pb2.CommandResult:
    """A board's failed answer (raised by the command router as ``e``) as the command log keeps it."""
    return agent_pb2.CommandResult(command_id=command_id, ok=False,
                                   error=common_pb2.Error(code=e.code, message=e.message, field=e.field or ""))
