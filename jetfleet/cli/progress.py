"""Progress of long operations on stderr, in the form the reader can take:

- a terminal: one bar redrawn in place (``\\r``), notes printed above it;
- a pipe or a file: plain lines, never a ``\\r`` — one when the note changes, every 10% and at least every
  ``every_s`` seconds (so a log shows the work is alive without a line per poll);
- ``--output json``: one JSON object per line, ``{"progress": {...}}``, so stderr stays machine-readable."""

from __future__ import annotations

import json
import shutil
import sys
import time
from typing import IO, Callable

import click

from jetfleet.cli.common import duration

PIPE_EVERY_S = 10.0


class Progress:
    """A progress display for one operation; ``update`` as often as wanted, ``close`` at the end."""

    def __init__(self, label: str, *, mode: str = "lines", stream: IO[str] | None = None,
                 clock: Callable[[], float] = time.monotonic, every_s: float = PIPE_EVERY_S) -> None:
        if mode not in ("bar", "lines", "json"):
            raise ValueError(f"mode {mode!r}: bar, lines or json")
        self.label, self.mode, self.clock, self.every_s = label, mode, clock, every_s
        self.stream = stream
        self._last_line_s = -float("inf")
        self._last_note = ""
        self._last_decile = -1
        self._drawn = False

    @classmethod
    def for_output(cls, label: str, output: str, stream: IO[str] | None = None) -> Progress:
        """Bar on a terminal, lines in a pipe, JSON lines with --output json (stderr unless ``stream``)."""
        out = stream or sys.stderr
        if output == "json":
            return cls(label, mode="json", stream=out)
        return cls(label, mode="bar" if out.isatty() else "lines", stream=out)

    def _write(self, text: str) -> None:
        click.echo(text, file=self.stream, nl=False)
        if self.stream is not None:
            self.stream.flush()

    def note(self, text: str) -> None:
        """A line of its own (a state change, a warning), above the bar on a terminal."""
        if self.mode == "json":
            self._write(json.dumps({"progress": {"label": self.label, "note": text}}) + "\n")
            return
        if self.mode == "bar" and self._drawn:
            self._write("\r\x1b[K")
            self._drawn = False
        self._write(text + "\n")

    def update(self, done: float, total: float | None, note: str = "", eta_s: float | None = None) -> None:
        """``done`` of ``total`` (None: unknown), what happens now (``note``) and the time left (``eta_s``)."""
        frac = min(1.0, done / total) if total else None
        if self.mode == "json":
            if not self._due(frac, note):
                return
            self._write(json.dumps({"progress": {"label": self.label, "done": done, "total": total,
                                                 "fraction": None if frac is None else round(frac, 4),
                                                 "note": note or None, "eta_s": eta_s}}) + "\n")
            return
        counts = (f"{done:g}/{total:g} ({frac:.0%})" if total else f"{done:g}") if frac is not None or done else ""
        tail = "  ".join(x for x in (counts, note, f"ETA {duration(eta_s)}" if eta_s is not None else "") if x)
        if self.mode == "lines":
            if self._due(frac, note):
                self._write(f"{self.label}: {tail}\n")
            return
        width = max(20, shutil.get_terminal_size((100, 20)).columns - 1)
        bar = ""
        if frac is not None:
            cells = 24
            filled = int(round(frac * cells))
            bar = "[" + "#" * filled + "-" * (cells - filled) + "] "
        self._write("\r" + f"{self.label} {bar}{tail}"[:width] + "\x1b[K")
        self._drawn = True

    def _due(self, frac: float | None, note: str) -> bool:
        """Lines and JSON: only when something worth a line happened (a new note, a new tenth, the end) or
        ``every_s`` passed."""
        now = self.clock()
        decile = -1 if frac is None else int(frac * 10)
        due = (note != self._last_note or decile > self._last_decile or now - self._last_line_s >= self.every_s)
        if due:
            self._last_line_s, self._last_note, self._last_decile = now, note, max(decile, self._last_decile)
        return due

    def close(self) -> None:
        """End the display (a terminal's bar keeps its last state on its own line)."""
        if self.mode == "bar" and self._drawn:
            self._write("\n")
            self._drawn = False
