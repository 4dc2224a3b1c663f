"""Admission of agents' hellos: a bounded number in flight, the rest turned away with a time to come back.

A hello costs the controller its check, a store write and a welcome; thousands at once (a fleet coming up, every
agent re-dialling a restarted controller) would queue on the event loop and the store thread, delay every other
agent's heartbeats past the reaper, and make the storm worse. So at most ``max_in_flight`` hellos are handled at
once; a session that finds them all taken is refused (RESOURCE_EXHAUSTED, cheap: its hello arrives but is not
looked at) with a wait before dialling again. The wait spreads the agents turned away over the time the controller
needs to admit them: the agents waiting (those refused per second times the wait they were last given: Little's law) plus those
in flight, over the hellos admitted per second, between ``min_retry_s`` and ``max_retry_s``. The agent adds its
own jitter on top (``jetfleet.agent.link``)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from jetfleet.shared.errors import InvalidArgument, ResourceExhausted

RATE_WINDOW_S = 2.0      # the rates below follow the last few seconds (an exponential average)


class _Rate:
    """Events per second, averaged exponentially over RATE_WINDOW_S."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.value = 0.0
        self.at = clock()

    def _decay(self) -> None:
        now = self.clock()
        self.value *= math.exp(-max(0.0, now - self.at) / RATE_WINDOW_S)
        self.at = now

    def add(self) -> None:
        """One event now."""
        self._decay()
        self.value += 1.0 / RATE_WINDOW_S

    def now(self) -> float:
        """The rate now (events per second)."""
        self._decay()
        return self.value


class HelloAdmission:
    """Hellos in flight, bounded (this module's docstring): ``enter`` before reading a hello, ``leave`` once the
    session is welcomed or has failed."""

    def __init__(self, max_in_flight: int, *, min_retry_s: float = 1.0, max_retry_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if max_in_flight < 1:
            raise InvalidArgument(f"max_hellos_in_flight={max_in_flight}: at least 1 (agents' hellos handled at once)",
                                  field="max_hellos_in_flight")
        self.max_in_flight, self.min_retry_s, self.max_retry_s = max_in_flight, min_retry_s, max_retry_s
        self.in_flight = 0
        self.refused = 0                       # sessions turned away since the start
        self._admitted = _Rate(clock)
        self._refusals = _Rate(clock)
        self._last_wait_s = min_retry_s

    def enter(self) -> None:
        """Take a place for a hello; ResourceExhausted with the wait before dialling again when there is none."""
        if self.in_flight < self.max_in_flight:
            self.in_flight += 1
            return
        self.refused += 1
        self._refusals.add()
        wait = self.retry_after_s()
        self._last_wait_s = wait
        raise ResourceExhausted(f"the controller is admitting {self.max_in_flight} agents at a time and all are "
                                f"taken: dial again in {wait:.1f} s", field="hello", retry_after_s=wait)

    def leave(self, welcomed: bool) -> None:
        """The hello in a place is done: its session welcomed (it counts toward the admission rate) or failed."""
        self.in_flight = max(0, self.in_flight - 1)
        if welcomed:
            self._admitted.add()

    def retry_after_s(self) -> float:
        """The wait to give an agent turned away now (this module's docstring)."""
        waiting = self._refusals.now() * self._last_wait_s + self.in_flight
        rate = max(self._admitted.now(), 1.0)
        return min(self.max_retry_s, max(self.min_retry_s, waiting / rate))
