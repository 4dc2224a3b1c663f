"""A job's lifecycle: one state type and its transition table. Every move is checked against the table and kept
in the record's history with why it happened; an illegal move is an error, never a silent overwrite.

    queued     -> profiling, modelling, applying, running (a resumed job), done (every minibatch was trained before
                  a restart), failed, cancelled
    profiling  -> modelling, queued, failed, cancelled
    modelling  -> applying, queued, failed, cancelled
    applying   -> running, queued (its board went away), failed, cancelled
    running    -> queued (its board went away), applying (moved to another board), done, failed, cancelled
    done, failed, cancelled: terminal

Staying in a state with a new detail ("profiling 12/50 modes") is not a move: it updates the detail only."""

from __future__ import annotations

import enum
from collections.abc import Callable

from jetfleet.controller.store.job_record import JobRecord, Transition
from jetfleet.shared.errors import FailedPrecondition


class JobState(str, enum.Enum):
    """Where a job is (its value is what the store and the operator API carry)."""

    QUEUED = "queued"
    PROFILING = "profiling"
    MODELLING = "modelling"
    APPLYING = "applying"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        """Whether the job has ended."""
        return self in (JobState.DONE, JobState.FAILED, JobState.CANCELLED)


_ENDS = {JobState.FAILED, JobState.CANCELLED}
TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.QUEUED: frozenset({JobState.PROFILING, JobState.MODELLING, JobState.APPLYING, JobState.RUNNING,
                                JobState.DONE} | _ENDS),
    JobState.PROFILING: frozenset({JobState.MODELLING, JobState.QUEUED} | _ENDS),
    JobState.MODELLING: frozenset({JobState.APPLYING, JobState.QUEUED} | _ENDS),
    JobState.APPLYING: frozenset({JobState.RUNNING, JobState.QUEUED} | _ENDS),
    JobState.RUNNING: frozenset({JobState.QUEUED, JobState.APPLYING, JobState.DONE} | _ENDS),
    JobState.DONE: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
}
STATES = tuple(s.value for s in JobState)
TERMINAL = tuple(s.value for s in JobState if s.terminal)
MAX_HISTORY = 200   # transitions kept per job (the first ones and the latest): a job that waits a long time moves often


class JobCancelled(Exception):
    """The operator cancelled the job (raised inside its runner, which ends it as cancelled)."""


class IllegalTransition(FailedPrecondition):
    """A move the transition table does not allow (a bug in the caller, or a job acted on after it ended)."""


def state_of(rec: JobRecord) -> JobState:
    """The record's state as the state type."""
    return JobState(rec.state)


def move(rec: JobRecord, to: JobState, why: str, *, waiting_for: str = "", now_s: Callable[[], float]) -> bool:
    """Move ``rec`` to ``to`` because of ``why`` (waiting for ``waiting_for``, if anything); True if the state or its
    detail changed (the caller stores it). IllegalTransition, changing nothing, if the table does not allow it."""
    current = state_of(rec)
    if to == current:
        changed = (rec.detail, rec.waiting_for) != (why, waiting_for)
        rec.detail, rec.waiting_for = why, waiting_for
        return changed
    if to not in TRANSITIONS[current]:
        raise IllegalTransition(f"job {rec.job_id} cannot go from {current.value} to {to.value} ({why})", field="state")
    rec.state, rec.detail, rec.waiting_for = to.value, why, waiting_for
    rec.history.append(Transition(to.value, why[:300], now_s()))
    if len(rec.history) > MAX_HISTORY:
        del rec.history[10:len(rec.history) - MAX_HISTORY + 10]   # keep how it started and what it did last
    return True
