"""Campaign benchmark: a full 4,368-mode PowerTrain campaign for resnet18 on emulated AGX Orins
(accelerated), through gRPC and the store, on each store backend; one board, then three sharing.
Prints wall time and store size. Needs redis-server on PATH for the Redis rows."""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jetfleet.controller.client import OperatorClient  # noqa: E402
from jetfleet.controller.config import ControllerConfig  # noqa: E402
from tests.harness import LabThread, RedisServer  # noqa: E402


def dir_size_mib(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def run(store: str, boards: int) -> tuple[float, int]:
    lab = LabThread(store, ["agx-orin"] * boards, config=ControllerConfig(listen="127.0.0.1:0")).start()
    try:
        with OperatorClient(lab.address, timeout_s=60) as c:
            t0 = time.perf_counter()
            target = {"device_id": "agx-orin-0"} if boards == 1 else {"board_model": "agx-orin"}
            camp = c.create_campaign(workload="resnet18", modes="powertrain", minibatches=40, **target)
            while camp.status == "running":
                time.sleep(0.2)
                camp = c.get_campaign(camp.campaign_id)
            return time.perf_counter() - t0, camp.done
    finally:
        lab.close()


def main() -> None:
    print("campaign benchmark: resnet18, PowerTrain grid (4,368 modes), 40 minibatches/mode, instant twin")
    for boards in (1, 3):
        with tempfile.TemporaryDirectory() as d:
            wall, done = run(str(Path(d) / "data"), boards)
            print(f"  sqlite  {boards} board(s): {wall:6.1f} s for {done} modes ({done / wall:6.1f} modes/s), "
                  f"store {dir_size_mib(Path(d)):6.1f} MiB")
        if shutil.which("redis-server"):
            with tempfile.TemporaryDirectory() as d:
                server = RedisServer(Path(d)).start()
                try:
                    wall, done = run(server.url, boards)
                    import redis

                    mem = redis.Redis.from_url(server.url).info("memory")["used_memory"] / 2**20
                    print(f"  redis   {boards} board(s): {wall:6.1f} s for {done} modes ({done / wall:6.1f} modes/s), "
                          f"memory {mem:6.1f} MiB, AOF {dir_size_mib(Path(d)):6.1f} MiB")
                finally:
                    server.kill()


if __name__ == "__main__":
    asyncio.set_event_loop_policy(None)
    main()
