"""The example's own training (examples/own-training) as an attached job on an emulated board: a lab with one board
and a small reference (ResNet-18 on the Orin Nano's grid, trained here), `job submit --attach digits-mlp` under a
power budget, the script started as its own process. Prints the job's online-profiling cost against running its
chosen mode throughout, its observed mean power against the budget, its time per step against the chosen mode's
bounds, and the verdict. Asserts nothing.

    python bench/own_training.py [--board agx-xavier] [--budget 12] [--modes K] [--minibatches 4000]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jetfleet.client import OperatorClient  # noqa: E402
from tests import procs  # noqa: E402
from tests.harness import FAST_CONTROLLER, LabThread  # noqa: E402
from tests.jobs_lab import wait_job  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--board", default="agx-xavier")
    ap.add_argument("--budget", type=float, default=12.0)
    ap.add_argument("--modes", type=int, default=0, help="k (default: sized to the job)")
    ap.add_argument("--minibatches", type=int, default=4000)
    ap.add_argument("--reference-epochs", type=int, default=8)
    ap.add_argument("--speed", type=float, default=300.0)
    args = ap.parse_args()
    from jetfleet.controller.powertrain import nn as P
    from jetfleet.controller.powertrain.artifacts import ModelRepo
    from jetfleet.research.powertrain.evaluate import twin_truth

    g = twin_truth("orin-nano", "resnet18", seed=5)
    tn, pn = P.train_references(g.x, [g.time_ms, g.power_w], epochs=args.reference_epochs)
    with tempfile.TemporaryDirectory() as tmp:
        # a loaded machine must not take the board offline mid-job: a lenient heartbeat
        config = replace(FAST_CONTROLLER, offline_after_missed=50)
        lab = LabThread(str(Path(tmp) / "data"), [], config=config).start()
        try:
            lab.lab.session_dir = str(Path(tmp) / "sessions")
            agent = lab.do(lambda: lab.lab.add_agent(args.board, speed=args.speed))
            lab.call(lab.lab.wait_online(1))
            lab.do(lambda: ModelRepo(lab.lab.controller.store).save("reference", "orin-nano", "resnet18", "", g.modes,
                                                                    tn, pn, {}, (0.0, 0.0, 0.0), None))
            with OperatorClient(lab.address) as c:
                job = c.submit_job("digits-mlp", device_id=agent.device_id, power_budget_w=args.budget,
                                   minibatches=args.minibatches, profile_modes=args.modes, attach=True,
                                   attach_timeout_s=120)
            child = procs.spawn([sys.executable, str(ROOT / "examples" / "own-training" / "train.py"), "--epochs",
                                 "100000", "--socket", str(Path(tmp) / "sessions" / f"{agent.device_id}.sock")],
                                stdout=procs.DEVNULL, stderr=procs.DEVNULL)
            start = time.monotonic()
            try:
                final = wait_job(lab, job.job_id, timeout_s=1800)
            finally:
                child.end()
            wall = time.monotonic() - start
        finally:
            lab.close()
    k = args.modes or "sized to the job"
    print(f"{args.board}, budget {args.budget:g} W, k={k}, {args.minibatches} steps: job {final.state} in "
          f"{wall:.0f} wall s")
    m = re.search(r"online profiling: .*?throughout", final.detail)
    print(m.group(0) if m else "online profiling: (no figure: the job did not profile)")
    m = re.search(r"goal .*$", final.detail)
    print(m.group(0) if m else final.detail)
    print(f"summary: {final.detail}")


if __name__ == "__main__":
    main()
