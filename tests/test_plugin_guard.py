"""Issue 29: a workload plugin cannot stop or hang the agent. One that calls sys.exit at import, raises anything
(even a BaseException), or never finishes importing is reported broken, with why, and the agent starts without it."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import pytest

from jetfleet.agent.workloads.plugins import load_workloads

pytestmark = pytest.mark.boards


@dataclass
class EntryPoint:
    """An installed entry point as importlib.metadata gives it: ``load`` runs the plugin module's import."""

    name: str
    load: Callable[[], Any]
    value: str = "plugin_module:plugin"


class Custom(BaseException):
    pass


def test_sys_exit_or_any_exception_at_import_marks_the_plugin_broken():
    def exits():
        sys.exit(3)

    def custom():
        raise Custom("not even an Exception")

    w = load_workloads([EntryPoint("quitter", exits), EntryPoint("odd", custom)], timeout_s=30)
    assert "sys.exit(3)" in w.registry.broken["quitter"]
    assert "Custom" in w.registry.broken["odd"]
    assert "resnet18" in w.registry.names() and "quitter" not in w.registry.names()


def test_a_plugin_that_never_finishes_importing_is_broken_after_its_time_limit():
    release = threading.Event()
    try:
        t0 = time.monotonic()
        w = load_workloads([EntryPoint("sleeper", lambda: release.wait(600))], timeout_s=0.5)
        assert time.monotonic() - t0 < 10
        assert "did not finish loading within 0.5 s" in w.registry.broken["sleeper"]
        assert "resnet18" in w.registry.names()
    finally:   # let the stuck import end, and wait for its thread
        release.set()
        for t in threading.enumerate():
            if t.name == "plugin-sleeper":
                t.join(10)
                assert not t.is_alive()
