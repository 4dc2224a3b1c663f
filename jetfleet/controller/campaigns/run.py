"""One campaign's live state in the controller: its modes' states, the queue of pending modes, the modes
in flight, and the dispatch tasks it owns (kept, so they can be cancelled when the controller stops)."""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from jetfleet.controller.campaigns.board_order import BoardOrder
from jetfleet.controller.store import CampaignRecord, ModeState
from jetfleet.shared.catalog import Catalog, PowerMode


@dataclass(eq=False)
class Run:
    """A campaign being driven: stored record, mode states, queue, in-flight modes, tasks, recent errors."""

    rec: CampaignRecord
    modes: list[str]
    states: dict[str, ModeState]
    position: dict[str, int]
    in_flight: dict[str, str] = field(default_factory=dict)          # mode -> device
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None                          # the driver
    tasks: set[asyncio.Task[None]] = field(default_factory=set)     # dispatches in flight
    durations: deque[float] = field(default_factory=lambda: deque(maxlen=50))
    errors: deque[str] = field(default_factory=lambda: deque(maxlen=10))
    retries: int = 0
    # (catalog id, mode) -> that catalog (held: its id is not reused meanwhile) and the mode as it has it, None if it
    # has not (parsed once a catalog)
    holds: dict[tuple[int, str], tuple[Catalog, PowerMode | None]] = field(default_factory=dict)
    rounds: dict[str, int] = field(default_factory=dict)   # mode -> failed answers from boards (command id suffix)
    on_board: dict[str, set[str]] = field(default_factory=dict)   # device -> modes sent there and not answered
    order: BoardOrder = field(default_factory=BoardOrder)   # each board's commands in the order it runs them
    uncharged: dict[str, int] = field(default_factory=dict)  # mode -> times sent again, uncharged (board_order.py)
    answered: dict[str, float] = field(default_factory=dict)      # device -> when it last answered (monotonic s)
    mode_s: dict[str, float] = field(default_factory=dict)        # device -> its seconds a mode, a moving average
    mode_n: dict[str, int] = field(default_factory=dict)          # device -> the modes that average counts
    # Kept as modes change state, so handing out a mode and reporting progress cost O(1), not O(modes).
    queue: deque[str] = field(init=False)           # pending modes not in flight, in campaign order
    tally: Counter[str] = field(init=False)         # modes per status

    def __post_init__(self) -> None:
        self.queue = deque(m for m in self.modes if self.states[m].status == "pending")
        self.tally = Counter(s.status for s in self.states.values())

    def count(self, status: str) -> int:
        """How many modes have ``status`` (pending, done, failed)."""
        return self.tally[status]

    def set_status(self, mode: str, status: str) -> None:
        """Change a mode's status, keeping the per-status counts."""
        state = self.states[mode]
        self.tally[state.status] -= 1
        self.tally[status] += 1
        state.status = status

    def take(self, runnable: Callable[[str], bool]) -> str | None:
        """Remove and return the first queued mode ``runnable`` accepts (a board's catalog holds it), or None."""
        for i, mode in enumerate(self.queue):
            if runnable(mode):
                del self.queue[i]
                return mode
        return None

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run a dispatch as a task the run keeps until it ends."""
        task = asyncio.create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
