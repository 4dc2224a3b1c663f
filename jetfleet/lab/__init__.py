"""A lab in one process: a controller plus emulated agents (the real agent code on the twin).

The only package that imports both the controller and the agent: `jetfleet lab up`, the demo,
the tests and the benchmarks compose a fleet here."""

from __future__ import annotations

from jetfleet.lab.lab import FakeAgent, Lab

__all__ = ["FakeAgent", "Lab"]
