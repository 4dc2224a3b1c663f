"""Store writes that must not be lost: retried with jittered exponential backoff while the store is
unavailable (a Redis outage, a locked SQLite file), never in a hot loop, until they succeed or the
caller is cancelled (the controller stops). The sleep is injected, so tests need not wait."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from jetfleet.shared.errors import StoreUnavailable

log = logging.getLogger(__name__)
T = TypeVar("T")


class StoreBackoff:
    """Delays after consecutive store failures: base_s, 2 x base_s, ... up to max_s, each with half of it jittered."""

    def __init__(self, *, base_s: float = 0.2, max_s: float = 2.0, rng: random.Random | None = None) -> None:
        self.base_s, self.max_s = base_s, max_s
        self.rng = rng or random.Random()
        self.failures = 0

    def next_delay_s(self) -> float:
        """The delay before the next try after one more failure (at least half the capped exponential)."""
        d = min(self.max_s, self.base_s * 2 ** min(self.failures, 30))
        self.failures += 1
        return d / 2 + self.rng.uniform(0.0, d / 2)

    def reset(self) -> None:
        """The store answered: the next failure starts from base_s again."""
        self.failures = 0


class StoreRetry:
    """Runs blocking store calls off the event loop and retries those that raise StoreUnavailable."""

    def __init__(self, *, sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep, base_s: float = 0.2,
                 max_s: float = 2.0, rng: random.Random | None = None,
                 on_retry: Callable[[], None] | None = None) -> None:
        self.sleep = sleep
        self.base_s, self.max_s, self.rng = base_s, max_s, rng or random.Random()
        self.on_retry = on_retry
        self.retries = 0

    async def run(self, fn: Callable[..., T], *args: Any, what: str = "store write") -> T:
        """``fn(*args)`` in a worker thread, again after a backoff delay for as long as the store is unavailable."""
        return await self.run_async(asyncio.to_thread, fn, *args, what=what)

    async def run_async(self, fn: Callable[..., Awaitable[T]], *args: Any, what: str = "store write") -> T:
        """``await fn(*args)``, again after a backoff delay for as long as it raises StoreUnavailable."""
        backoff = StoreBackoff(base_s=self.base_s, max_s=self.max_s, rng=self.rng)
        while True:
            try:
                result = await fn(*args)
            except StoreUnavailable as e:
                if backoff.failures == 0:
                    log.warning("%s: %s; keeping it and retrying with backoff", what, e.message)
                self.retries += 1
                if self.on_retry is not None:
                    self.on_retry()
                await self.sleep(backoff.next_delay_s())
                continue
            if backoff.failures:
                log.info("%s: stored after %d retries", what, backoff.failures)
            return result
