"""Blocking calls run off the event loop in shared hops: every call that arrives while a hop runs goes in the
next one, so results that arrive together cost one hand-off to a worker thread, not one each.

A campaign on a fast board answers a mode every few milliseconds; each answer was checked and stored in a hop of
its own (``asyncio.to_thread``: a submit to the pool, a wake-up of a worker, a wake-up of the loop), a tenth of the
event loop's time in a campaign on an instant twin (py-spy). Each call still runs on its own and answers on its own
(its result, or its exception), in the order the calls came: a store write keeps its own transaction, so exactly
once is what the store's write says it is."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
_Call = tuple[Callable[[], Any], "asyncio.Future[Any]"]


def _run_each(calls: list[Callable[[], Any]]) -> list[tuple[bool, Any]]:
    """Each call in turn: (True, its result) or (False, the exception it raised)."""
    out: list[tuple[bool, Any]] = []
    for fn in calls:
        try:
            out.append((True, fn()))
        except Exception as e:   # handed to that call's caller, as to_thread would
            out.append((False, e))
    return out


class SharedHops:
    """``await hops.run(fn, *args)``: ``fn(*args)`` in a worker thread, in one hop with the calls beside it."""

    def __init__(self) -> None:
        self._waiting: list[_Call] = []
        self._hop: asyncio.Task[None] | None = None
        self.hops = 0        # hand-offs made (fewer than calls when calls came together)
        self.calls = 0

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` off the event loop; its result, or what it raised."""
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._waiting.append(((lambda: fn(*args)), fut))
        self.calls += 1
        if self._hop is None or self._hop.done():
            self._hop = asyncio.create_task(self._drain())
        return await fut

    async def _drain(self) -> None:
        """Hops while calls wait: each takes every call waiting when it starts."""
        batch: list[_Call] = []
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                self.hops += 1
                outcomes = await asyncio.to_thread(_run_each, [fn for fn, _ in batch])
                for (_, fut), (ok, value) in zip(batch, outcomes):
                    if fut.done():   # its caller was cancelled meanwhile
                        continue
                    if ok:
                        fut.set_result(value)
                    else:
                        fut.set_exception(value)
                batch = []
        finally:   # cancelled (the controller stops): no caller is left waiting on a hop that will not come
            for _, fut in batch + self._waiting:
                if not fut.done():
                    fut.cancel()
            self._waiting = []

    async def close(self) -> None:
        """Cancel the hop in progress (its callers are cancelled)."""
        if self._hop is not None:
            self._hop.cancel()
            await asyncio.gather(self._hop, return_exceptions=True)
