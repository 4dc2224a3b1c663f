"""Training jobs under a goal: the controller's pipeline from a submitted workload to a verdict.

``state.py`` the lifecycle (one state type, its transition table), ``goals.py`` the goals as objects (choice,
windows over or under, steps, undo, verdict), ``manager.py`` the operator API's side (``submit.py`` checks a
request, ``serde.py`` makes the API's messages), ``runner.py`` one job's lifecycle with its stages in
``profiling.py`` (find or build the model) and ``running.py`` (train on a held board), ``loop.py`` the closed
loop on the windows of ``windows.py``, ``models.py`` the modes a job profiles, ``inference.py`` a stream served
beside it, ``context.py`` what a runner is given."""

from __future__ import annotations

from jetfleet.controller.jobs.context import JobsConfig
from jetfleet.controller.jobs.manager import JobManager

__all__ = ["JobManager", "JobsConfig"]
