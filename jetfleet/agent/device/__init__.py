"""Board backends behind one interface: the real Jetson (``jetson.py``) and the emulated twin."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from jetfleet.agent.device.base import BoardInfo, Device, RunResult, TelemetrySample
from jetfleet.shared.errors import InvalidArgument

if TYPE_CHECKING:
    from jetfleet.agent.device.jetson import JetsonOptions
    from jetfleet.agent.workloads.plugins import AgentWorkloads

__all__ = ["BoardInfo", "Device", "RunResult", "TelemetrySample", "open_device"]


def open_device(spec: str, *, speed: float = math.inf, sysfs_root: Path | str = "/",
                options: JetsonOptions | None = None, workloads: AgentWorkloads | None = None) -> Device:
    """``auto`` (the board this runs on) or ``emulated:MODEL[:SEED]``; either runs the built-in workloads plus
    the plugins in ``workloads``.

    A real board that a crashed agent left changed is put back as it was found before it is returned."""
    if spec == "auto":
        from jetfleet.agent.device.jetson import JetsonBoard, JetsonOptions

        board = JetsonBoard(sysfs_root, options or JetsonOptions(), plugins=workloads.plugins if workloads else None)
        board.recover()
        return board
    kind, _, rest = spec.partition(":")
    if kind == "emulated" and rest:
        from jetfleet.shared.catalog import get_catalog
        from jetfleet.twin.board import EmulatedBoard

        model, _, seed = rest.partition(":")
        get_catalog(model)
        try:
            seed_n = int(seed) if seed else 0
        except ValueError:
            raise InvalidArgument(f"seed {seed!r} in --device {spec!r} is not an integer", field="device") from None
        return EmulatedBoard(model, seed_n, speed=speed, workloads=workloads.registry if workloads else None)
    raise InvalidArgument(f"--device {spec!r}: expected 'auto' or 'emulated:MODEL[:SEED]'", field="device")
