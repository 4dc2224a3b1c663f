"""What an operator waits for on `jetfleet lab up`: the README's 50-mode campaign and PowerTrain's 4,368-mode
reference campaign (resnet18 on the emulated AGX Orin), at the lab's default speed (100x) and instant
(--speed inf): wall time from `profile start` to done, and the ETA the campaign showed once 5% of its modes were
measured. The 4,368 modes at 100x take tens of minutes: by default that run stops at its 5% ETA (the figure an
operator sees) and `--full` runs it to the end. The README's figures come from here.

    python bench/lab.py [--full] [--small random:50] [--large powertrain] [--speeds 100,inf]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jetfleet.cli.fleet import LAB_SPEED  # noqa: E402
from jetfleet.client import Campaign, connect  # noqa: E402
from jetfleet.controller.config import ControllerConfig  # noqa: E402
from jetfleet.lab import Lab  # noqa: E402


class Stop(Exception):
    pass


def campaign(address: str, modes: str, to_end: bool) -> tuple[float | None, float | None, int]:
    """(wall seconds to done, or None when stopped at 5%; the total time the ETA promised once 5% of the modes
    were measured; modes measured)."""
    eta: list[float | None] = [None]
    measured = [0]
    with connect(address) as c:
        t0 = time.perf_counter()
        camp = c.create_campaign("resnet18", device_id="agx-orin-0", modes=modes, seed=7)

        def seen(x: Campaign) -> None:
            measured[0] = x.done
            if eta[0] is None and x.eta_s is not None and x.done >= max(1, x.total // 20):
                eta[0] = x.eta_s + (time.perf_counter() - t0)
                if not to_end:
                    raise Stop

        try:
            done = c.wait_campaign(camp.campaign_id, on_update=seen, poll_s=0.2)
        except Stop:
            c.cancel_campaign(camp.campaign_id)
            return None, eta[0], measured[0]
        return time.perf_counter() - t0, eta[0], done.done


async def run(speed: float, specs: list[tuple[str, bool]]) -> list[tuple[str, float | None, float | None, int]]:
    with tempfile.TemporaryDirectory() as data:
        lab = Lab(ControllerConfig(listen="127.0.0.1:0", store=data), ["agx-orin"], speed=speed)
        await lab.start()
        try:
            await lab.wait_online()
            return [(spec, *await asyncio.to_thread(campaign, lab.address, spec, to_end)) for spec, to_end in specs]
        finally:
            await lab.stop()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--full", action="store_true", help="run the large campaign to its end at the lab's speed too")
    p.add_argument("--small", default="random:50", help="the README's campaign (run to its end)")
    p.add_argument("--large", default="powertrain", help="the reference campaign (stopped at its 5%% ETA at 100x)")
    p.add_argument("--speeds", default=f"{LAB_SPEED:g},inf", help="board-clock speeds, comma-separated")
    a = p.parse_args()
    full = a.full
    print("campaigns on `jetfleet lab up` (resnet18 on the emulated AGX Orin, embedded SQLite store)", flush=True)
    for speed in (float(x) for x in a.speeds.split(",")):
        label = "instant (--speed inf)" if math.isinf(speed) else f"{speed:g}x" + (" (the default)" if speed == LAB_SPEED else "")
        specs = [(a.small, True), (a.large, full or math.isinf(speed))]
        for spec, wall, eta, done in asyncio.run(run(speed, specs)):
            eta_s = f"{eta:.0f} s" if eta is not None else "-"
            ran = (f"{done:5d} modes in {wall:7.1f} s ({done / wall:6.1f} modes/s)" if wall is not None
                   else f"stopped after {done} modes (--full runs it to the end)")
            print(f"  {label:<22} {spec:<11} {ran}; the ETA shown at 5% promised {eta_s} in all", flush=True)


if __name__ == "__main__":
    main()
