"""Board energy over a run, on the board's clock: what a training's progress reports carry.

On a board whose past power can be replayed (an accelerated twin: ``capabilities.power_trace``) the
energy of each interval is its samples' mean power times its length; on a real board a thread
samples the rails every interval and integrates (trapezoids), off the training loop."""

from __future__ import annotations

import statistics
import threading

from jetfleet.agent.device.base import Device
from jetfleet.shared import defaults
from jetfleet.shared.errors import DeviceError


class EnergyMeter:
    """Integrates a board's power from ``start()``: ``energy_j(t)`` is the energy from the start to board time t."""

    def __init__(self, device: Device, interval_s: float = defaults.SAMPLE_INTERVAL_S) -> None:
        self.device, self.interval_s = device, interval_s
        self._replay = device.capabilities.power_trace
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.t0 = 0.0
        self._last_t = 0.0       # board time up to which ``_energy`` is integrated
        self._last_w = 0.0
        self._energy = 0.0

    def start(self) -> float:
        """Start integrating now; returns the board time it started at."""
        self.t0 = self._last_t = self.device.now_s()
        if not self._replay:
            try:
                self._last_w = self.device.sample().total_w
            except DeviceError:
                self._last_w = 0.0
            self._thread = threading.Thread(target=self._run, name="energy-meter", daemon=True)
            self._thread.start()
        return self.t0

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                s = self.device.sample()
            except DeviceError:
                continue
            with self._lock:
                if s.t_s > self._last_t:
                    self._energy += (s.t_s - self._last_t) * (s.total_w + self._last_w) / 2
                    self._last_t, self._last_w = s.t_s, s.total_w

    def extend_back(self, t_s: float) -> None:
        """Count from board time ``t_s`` before the start too (a report the board paced as a command adopted a
        session began there, in the same mode): from the board's trace where it replays one, else at the power
        read at the start."""
        with self._lock:
            if t_s >= self.t0:
                return
            if self._replay:
                samples = self.device.trace(t_s, self.t0, self.interval_s)
                self._energy += statistics.fmean(s.total_w for s in samples) * (self.t0 - t_s)
            else:
                self._energy += self._last_w * (self.t0 - t_s)
            self.t0 = t_s

    def energy_j(self, t_s: float) -> float:
        """Energy (J) from the start to board time ``t_s`` (not before the last call's time)."""
        with self._lock:
            if t_s <= self._last_t:
                return self._energy
            if self._replay:
                samples = self.device.trace(self._last_t, t_s, self.interval_s)
                self._energy += statistics.fmean(s.total_w for s in samples) * (t_s - self._last_t)
                self._last_t = t_s
                return self._energy
            return self._energy + self._last_w * (t_s - self._last_t)   # the latest reading held until now

    def stop(self) -> None:
        """Stop the sampling thread (a real board)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
