"""Board backends behind one interface: the real Jetson (``jetson.py``) and the emulated twin."""

from __future__ import annotations

import math
from pathlib import Path

from jetfleet.agent.device.base import BoardInfo, Device, RunResult, TelemetrySample
from jetfleet.shared.errors import InvalidArgument

__all__ = ["BoardInfo", "Device", "RunResult", "TelemetrySample", "open_device"]


def open_device(spec: str, *, speed: float = math.inf, sysfs_root: Path | str = "/") -> Device:
    """``auto`` (the board this runs on) or ``emulated:MODEL[:SEED]``."""
    if spec == "auto":
        from jetfleet.agent.device.jetson import JetsonBoard

        return JetsonBoard(sysfs_root)
    kind, _, rest = spec.partition(":")
    if kind == "emulated" and rest:
        from jetfleet.agent.device.emulated import EmulatedBoard
        from jetfleet.shared.catalog import get_catalog

        model, _, seed = rest.partition(":")
        get_catalog(model)
        try:
            seed_n = int(seed) if seed else 0
        except ValueError:
            raise InvalidArgument(f"seed {seed!r} in --device {spec!r} is not an integer", field="device") from None
        return EmulatedBoard(model, seed_n, speed=speed)
    raise InvalidArgument(f"--device {spec!r}: expected 'auto' or 'emulated:MODEL[:SEED]'", field="device")
