"""Taking what is queued together off an asyncio queue without waiting: the agent's results and the controller's
commands that are ready at once go as one message (ResultBatch, CommandBatch)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
NOTHING = object()   # no item was taken beyond those returned


def take_queued(queue: asyncio.Queue[T], accept: Callable[[T], bool], limit: int) -> tuple[list[T], object]:
    """The items queued now, in order, while ``accept`` takes them, at most ``limit``; and the first item taken that
    ``accept`` refused (the caller sends it next), or NOTHING."""
    taken: list[T] = []
    while not queue.empty() and len(taken) < limit:
        item = queue.get_nowait()
        if not accept(item):
            return taken, item
        taken.append(item)
    return taken, NOTHING
