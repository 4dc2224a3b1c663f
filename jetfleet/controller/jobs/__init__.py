"""Training jobs under a power goal: the controller's pipeline from a submitted workload to a summary
(``manager.py`` the operator API's side, ``runner.py`` one job's stages, ``loop.py`` the closed loop on
the board's progress reports, ``models.py`` the models a job finds or builds)."""

from __future__ import annotations

from jetfleet.controller.jobs.manager import JobManager, JobsConfig

__all__ = ["JobManager", "JobsConfig"]
