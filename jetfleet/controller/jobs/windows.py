"""What a running job learns from its board's progress reports, on the board's clock: its totals, how long it spent
in each mode (segments), and full windows of one mode's mean power and time per minibatch. No I/O here.

A window is ``window_s`` board seconds of one mode: it starts at the first report after the mode took effect
(after the run's warm-up minibatches for a fresh run), and its power is the board energy over it divided by its
length: everything the board drew while training, at the sensors' rate."""

from __future__ import annotations

from dataclasses import dataclass, field

from jetfleet.controller.store.job_record import Segment

WARMUP_MINIBATCHES = 10      # a fresh run's first minibatches (cuDNN autotuning, allocator growth) are not measured


@dataclass(frozen=True)
class Point:
    """A job's totals at one progress report: minibatches, board seconds of training, energy, the mode, board time."""

    done: int
    elapsed_s: float
    energy_j: float
    mode: str
    t_s: float


@dataclass(frozen=True)
class Window:
    """A full window of one mode: mean power (W), time per minibatch (ms), its span."""

    mode: str
    power_w: float
    time_ms: float
    start: Point
    end: Point


@dataclass
class Tracker:
    """Segments (time and energy per mode) and full windows of a job, from its progress points."""

    window_s: float
    segments: list[Segment] = field(default_factory=list)
    _last: Point | None = None
    _start: Point | None = None      # the open window's start
    _run_start_done: int = 0
    _want: str = ""                  # after a step: no window until a report shows this mode

    def new_run(self, at: Point) -> None:
        """A new training command starts at ``at`` (its warm-up is skipped before a window opens)."""
        self._last = at
        self._start = None
        self._run_start_done = at.done

    def reset_window(self, mode: str) -> None:
        """A step to ``mode`` was taken: the next window starts at the first report in it (reports the board sent
        before the step took effect, still in flight, open no window)."""
        self._start = None
        self._want = mode

    def add(self, p: Point, device_id: str) -> Window | None:
        """Account a report's progress to its mode's segment; return a window when one is full."""
        last = self._last
        self._last = p
        if last is None:
            return None
        d_done, d_s, d_j = p.done - last.done, p.elapsed_s - last.elapsed_s, p.energy_j - last.energy_j
        if d_done < 0 or d_s < 0:
            return None   # a report older than the last: nothing new
        mode = p.mode if last.mode == p.mode else last.mode  # a step: the minibatches so far ran mostly in the old mode
        seg = self.segments[-1] if self.segments else None
        if seg is None or seg.mode != mode or seg.device_id != device_id:
            seg = Segment(mode, device_id)
            self.segments.append(seg)
        seg.minibatches += d_done
        seg.seconds += d_s
        seg.energy_j += d_j
        if self._want and p.mode == self._want:
            self._want = ""
        if self._want or last.mode != p.mode or p.done - self._run_start_done < WARMUP_MINIBATCHES:
            self._start = None
            return None
        if self._start is None or self._start.mode != p.mode:
            self._start = p
            return None
        s = self._start
        if p.elapsed_s - s.elapsed_s < self.window_s or p.done <= s.done:
            return None
        self._start = p
        span = p.elapsed_s - s.elapsed_s
        return Window(p.mode, (p.energy_j - s.energy_j) / span, span / (p.done - s.done) * 1e3, s, p)
