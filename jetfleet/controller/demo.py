"""`make demo`: the main job end to end against emulated boards, narrated. Grows as capabilities land."""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from jetfleet.controller.client import OperatorClient
from jetfleet.controller.config import ControllerConfig
from jetfleet.controller.lab import Lab
from jetfleet.shared.convert import mode_text
from jetfleet.shared.errors import JetfleetError

BOARDS = ["agx-orin", "agx-xavier", "orin-nano"]


def _client_story(address: str, say: Callable[[str], None]) -> None:
    with OperatorClient(address) as c:
        say("\n== 2. The fleet as the controller sees it (jetfleet devices ls)")
        for d in c.list_devices():
            power = f"{d.last_telemetry.total_w:5.1f} W" if d.HasField("last_telemetry") else "   - "
            say(f"   {d.device_id:<14} {d.model:<11} {'online' if d.online else 'offline':<8} "
                f"{mode_text(d.current_mode):<24} {d.current_mode_name:<9} {power}")
        say("\n== 3. Push power modes to boards (jetfleet mode set); each board confirms what it runs")
        for device, mode in (("agx-xavier-1", "MODE_15W"), ("agx-orin-0", "8/1728/624.75/3199"),
                             ("orin-nano-2", "7W")):
            r = c.set_mode(device, mode)
            say(f"   {device:<14} asked {mode:<20} confirms {mode_text(r.confirmed):<24} in {r.latency_s * 1e3:.0f} ms")
        say("\n== 4. Bad input is refused before anything reaches a board")
        for device, mode in (("agx-orin-0", "12/2200/1300.5/3199"), ("agx-xavier-1", "9/2265.6/1377/2133"),
                             ("tx2-9", "MAXN")):
            try:
                c.set_mode(device, mode)
            except JetfleetError as e:
                say(f"   {device} {mode}: {e.code}: {e.message}")
        say("\n== 5. Live telemetry from agx-orin-0 (jetfleet telemetry watch), 5 samples at 10 Hz")
        for s in c.watch("agx-orin-0", 5):
            rails = "  ".join(f"{k} {v:5.2f}" for k, v in sorted(s.rails_w.items()))
            say(f"   total {s.total_w:6.2f} W  {rails}")


def _campaign_story(address: str, say: Callable[[str], None]) -> None:
    with OperatorClient(address) as c:
        say("\n== 6. Reference campaign: resnet18 on the emulated AGX Orin, PowerTrain's 4,368-mode grid "
            "(jetfleet profile start --workload resnet18 --device agx-orin-0 --modes powertrain)")
        camp = c.create_campaign(workload="resnet18", device_id="agx-orin-0", modes="powertrain", minibatches=40)
        t0 = time.monotonic()
        last = 0.0
        while camp.status == "running":
            time.sleep(0.5)
            camp = c.get_campaign(camp.campaign_id)
            if time.monotonic() - last > 5:
                last = time.monotonic()
                eta = f"{camp.eta_s:.0f} s" if camp.eta_s >= 0 else "?"
                say(f"   {camp.done:5d}/{camp.total} modes measured, ETA {eta}")
        say(f"   campaign {camp.campaign_id} {camp.status}: {camp.done} measured, {camp.failed} failed in "
            f"{time.monotonic() - t0:.1f} s (each mode: apply, warm up, steady state, 40 minibatches, power)")
        csv_text = c.export_profiles(campaign_id=camp.campaign_id).csv
    rows = [line.split(",") for line in csv_text.splitlines()[1:]]
    fastest = min(rows, key=lambda r: float(r[6]))
    frugal = min(rows, key=lambda r: float(r[6]) * float(r[7]))
    say(f"   fastest mode     {'/'.join(fastest[2:6]):<24} {float(fastest[6]):6.1f} ms  {float(fastest[7]):5.1f} W")
    say(f"   least energy     {'/'.join(frugal[2:6]):<24} {float(frugal[6]):6.1f} ms  {float(frugal[7]):5.1f} W  "
        f"({float(frugal[6]) * float(frugal[7]) / 1e3:.2f} J/minibatch)")
    say("   every raw sample is stored; export with: jetfleet profiles export --board-model agx-orin")


def _powertrain_story(address: str, say: Callable[[str], None], plot: Path) -> None:
    from jetfleet.controller.powertrain.report import plot_front
    from jetfleet.shared.proto import operator_pb2 as op

    with OperatorClient(address, timeout_s=600) as c:
        say("\n== 7. Reference models from that campaign (jetfleet model train-reference --board-model agx-orin "
            "--workload resnet18)")
        ref = c.call("TrainReference", op.TrainReferenceRequest(board_model="agx-orin", workload="resnet18"))
        say(f"   {ref.model_id}: {ref.training_modes} modes, validation MAPE time "
            f"{ref.metrics['time_val_mape_pct']:.1f}%, power {ref.metrics['power_val_mape_pct']:.1f}%, "
            f"{ref.metrics['fit_s']:.0f} s")
        say("\n== 8. A new workload on another board: 50 random modes of mobilenet_v3 on the emulated AGX Xavier "
            "(of its 29,232)")
        camp = c.create_campaign(workload="mobilenet_v3", device_id="agx-xavier-1", modes="random:50", seed=3)
        while camp.status == "running":
            time.sleep(0.3)
            camp = c.get_campaign(camp.campaign_id)
        say(f"   {camp.done} modes profiled")
        tr = c.call("TransferModel", op.TransferModelRequest(reference_id=ref.model_id, board_model="agx-xavier",
                                                             workload="mobilenet_v3"))
        say(f"   transferred: {tr.model_id} (fit on its {tr.training_modes} modes: time "
            f"{tr.metrics['time_fit_mape_pct']:.1f}%, power {tr.metrics['power_fit_mape_pct']:.1f}%; from scratch "
            f"{tr.metrics['scratch_time_fit_mape_pct']:.1f}% / {tr.metrics['scratch_power_fit_mape_pct']:.1f}%)")
        pred = c.call("Predict", op.PredictRequest(board_model="agx-xavier", workload="mobilenet_v3"))
        rows = [{"time_ms": p.time_ms, "power_w": p.power_w, "pareto": p.pareto} for p in pred.predictions]
        plot_front(rows, plot, f"mobilenet_v3 on agx-xavier, predicted ({tr.model_id})")
        say(f"   predicted all {len(rows)} modes; Pareto front of {pred.pareto_size} modes plotted to {plot}")
        say("\n== 9. Fastest mode under 30 W, applied and verified (jetfleet optimize agx-xavier-1 --workload "
            "mobilenet_v3 --power-budget 30W --apply)")
        r = c.call("Optimize", op.OptimizeRequest(device_id="agx-xavier-1", workload="mobilenet_v3",
                                                  power_budget_w=30, apply=True))
        say(f"   chosen {mode_text(r.mode)}: predicted {r.predicted_time_ms:.1f} ms/minibatch at {r.predicted_power_w:.2f} W")
        for a in r.applied:
            say(f"   {a.device_id} confirms {mode_text(a.confirmed)}; observed {a.observed_time_ms:.1f} ms at "
                f"{a.observed_power_w:.2f} W -> prediction off by {a.time_error_pct:+.1f}% time, "
                f"{a.power_error_pct:+.1f}% power")


def _twin_story(say: Callable[[str], None]) -> None:
    from jetfleet.agent.device.emulated import EmulatedBoard
    from jetfleet.agent.measure import measure_on_twin
    from jetfleet.shared.catalog import get_catalog

    say("\n== 10. What a training minibatch costs in NVIDIA's presets (jetfleet twin measure), AGX Orin")
    cat = get_catalog("agx-orin")
    board = EmulatedBoard("agx-orin", 0)
    for w in ("resnet18", "mobilenet_v3"):
        for name in ("MAXN", "50W", "30W", "15W"):
            s = measure_on_twin(board, w, cat.presets[name], 40).summary
            say(f"   {w:<13} {name:<5} {s.minibatch_time_median_ms:7.1f} ms/minibatch  {s.power_mean_w:5.1f} W  "
                f"{s.energy_per_minibatch_j:5.2f} J/minibatch")


async def run_demo(say: Callable[[str], None] = print) -> None:
    with tempfile.TemporaryDirectory(prefix="jetfleet-demo-") as data_dir:
        say("== 1. A lab: controller (embedded SQLite store) + emulated agx-orin, agx-xavier, orin-nano agents")
        lab = Lab(ControllerConfig(listen="127.0.0.1:0", store=data_dir, heartbeat_interval_s=0.5), BOARDS)
        await lab.start()
        try:
            await lab.wait_online()
            await asyncio.sleep(1.2)  # one telemetry batch
            say(f"   controller on {lab.address}, store {data_dir}/jetfleet.db")
            await asyncio.to_thread(_client_story, lab.address, say)
            await asyncio.to_thread(_campaign_story, lab.address, say)
            await asyncio.to_thread(_powertrain_story, lab.address, say, Path("demo-pareto.png").resolve())
        finally:
            await lab.stop()
    _twin_story(say)
    say("\nDone. Next: `jetfleet lab up` keeps a lab running; see README.md for the operator workflows.")
