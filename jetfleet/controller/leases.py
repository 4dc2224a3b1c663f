"""Who holds each board: one lease table for jobs, campaigns, roofline measurements and operator mode changes.

A board does one thing at a time. Whoever wants a board asks here; a board that is held is refused naming
its holder (``take``), or the asker queues for it (``try_take(..., queue=True)``): a queued asker gets the
board before anyone who did not queue, in the order they queued, so a job waiting for a board is not starved
by a campaign that takes the board back after each of its modes. The table lives in the controller's memory
(the event-loop thread only); after a restart every holder takes its board again as it resumes."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from jetfleet.shared.errors import FailedPrecondition

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Holder:
    """One claim on a board: its kind (job, campaign, roofline, mode), the id of what holds it, and the words an
    operator reads ("job 3f2a0c (fastest under 30 W)"). Two claims are the same when kind and id are."""

    kind: str
    id: str
    what: str = field(default="", compare=False)

    def __str__(self) -> str:
        return self.what or f"{self.kind} {self.id}"


class BoardLeases:
    """The lease table (this module's docstring)."""

    def __init__(self) -> None:
        self._held: dict[str, Holder] = {}
        self._queue: dict[str, list[Holder]] = {}
        self._on_free: list[Callable[[str], None]] = []

    def holder(self, device_id: str) -> Holder | None:
        """Who holds the board now, or None when it is free."""
        return self._held.get(device_id)

    def holders(self) -> Mapping[str, Holder]:
        """Every held board's holder, as held (not copied: `devices ls` reads it once a call). Read only."""
        return MappingProxyType(self._held)

    def held(self, kind: str | None = None) -> dict[str, Holder]:
        """Every held board (of ``kind``) and its holder."""
        return {d: h for d, h in self._held.items() if kind is None or h.kind == kind}

    def queued(self, device_id: str) -> list[Holder]:
        """Who queues for the board, first first."""
        return list(self._queue.get(device_id, ()))

    def try_take(self, device_id: str, holder: Holder, *, queue: bool = False) -> bool:
        """Take the board if it is free and nobody queues ahead of ``holder`` (True; also when ``holder`` holds it
        already). Otherwise False, and with ``queue`` the holder keeps its place in the board's queue."""
        current = self._held.get(device_id)
        if current == holder:
            return True
        waiting = self._queue.get(device_id, [])
        if current is None and (not waiting or waiting[0] == holder):
            if waiting:
                waiting.pop(0)
                if not waiting:
                    del self._queue[device_id]
            self._held[device_id] = holder
            return True
        if queue and holder not in waiting:
            self._queue.setdefault(device_id, []).append(holder)
        return False

    def take(self, device_id: str, holder: Holder) -> None:
        """Take the board now or refuse: FailedPrecondition naming who holds it (or queues for it first)."""
        if self.try_take(device_id, holder):
            return
        current = self._held.get(device_id)
        if current is not None:
            raise FailedPrecondition(f"{device_id} is busy: held by {current}; try again when it is free",
                                     field="device_id")
        first = self._queue[device_id][0]
        raise FailedPrecondition(f"{device_id} is promised to {first}, which waits for it; try again later",
                                 field="device_id")

    def release(self, device_id: str, holder: Holder) -> bool:
        """``holder`` lets go of the board (False if it did not hold it); whoever is first in its queue may take it."""
        if self._held.get(device_id) != holder:
            return False
        del self._held[device_id]
        for notify in self._on_free:
            notify(device_id)
        return True

    def withdraw(self, holder: Holder, *, keep: str = "") -> None:
        """``holder`` leaves every board's queue (but the board ``keep``'s)."""
        for device_id in list(self._queue):
            if device_id == keep:
                continue
            waiting = [h for h in self._queue[device_id] if h != holder]
            if waiting:
                self._queue[device_id] = waiting
            else:
                del self._queue[device_id]

    def release_all(self, holder: Holder) -> None:
        """``holder`` lets go of every board it holds and leaves every queue (it ended)."""
        self.withdraw(holder)
        for device_id in [d for d, h in self._held.items() if h == holder]:
            self.release(device_id, holder)

    def on_free(self, notify: Callable[[str], None]) -> None:
        """Call ``notify(device_id)`` whenever a board is let go (the event-loop thread)."""
        self._on_free.append(notify)
