"""The digital twin: emulated Jetson boards that behave like real ones (docs/twin.md).

- ``physics``: steady-state time per minibatch and power per rail of a workload in a mode, from
  first principles (no state, no noise);
- ``board``: ``EmulatedBoard``, a board of a model with a mode, a clock (accelerated or instant),
  warm-up, jitter, sensor noise and board-to-board variation, seeded so a run can be replayed;
- ``measure``: measure a workload in a mode on an emulated board directly.

The agent's device layer offers ``EmulatedBoard`` as its emulated backend, and evaluations use
the very same object, so one (board model, seed) is one board everywhere.
"""

from __future__ import annotations

from jetfleet.twin.board import EmulatedBoard

__all__ = ["EmulatedBoard"]
