"""The one place tests wait: on a condition, with a deadline, never for a fixed time. No imports beyond the standard
library: the board tests use it on the boards' Pythons (3.8, 3.10)."""

from __future__ import annotations

import time
from typing import Callable


def wait_until(predicate: Callable[[], bool], timeout_s: float = 10.0, what: str = "condition") -> None:
    """Poll ``predicate`` every 20 ms until it holds; AssertionError naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
