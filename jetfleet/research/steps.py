"""Numbered steps of a long evaluation, so whoever runs it sees how far it is: each step says what it does
(``say``) and reports (step, of steps, what) to ``progress`` (the CLI draws a bar, or prints lines in a pipe)."""

from __future__ import annotations

from typing import Callable

ProgressFn = Callable[[int, int, str], None]


class Steps:
    """Count the steps of a run planned to take ``total`` of them."""

    def __init__(self, total: int, say: Callable[[str], None], progress: ProgressFn | None = None) -> None:
        self.total, self.say, self.progress = total, say, progress
        self.done = 0

    def __call__(self, what: str) -> None:
        """Starting the next step: ``what`` it does."""
        self.done += 1
        self.say(what)
        if self.progress is not None:
            self.progress(self.done, self.total, what)

    def finish(self) -> None:
        """The run is over: report it as the last step (whatever the plan counted)."""
        if self.progress is not None:
            self.progress(self.total, self.total, "report written")
