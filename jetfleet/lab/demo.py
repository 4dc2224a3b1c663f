"""`make demo`: the main job end to end against emulated boards, narrated. Grows as capabilities land."""

from __future__ import annotations

import asyncio
import importlib.util
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from jetfleet.client import Campaign, Job, OperatorClient
from jetfleet.controller.config import ControllerConfig
from jetfleet.lab import Lab
from jetfleet.shared import defaults
from jetfleet.shared.errors import JetfleetError

BOARDS = ["agx-orin", "agx-xavier", "orin-nano"]
XAVIER_SPEED = 200.0   # the job's board: fast enough for a demo, slow enough for the closed loop to act mid-run
XAVIER_SEED = 1        # agx-xavier-1: the lab's boards get seeds in the order they are added (BOARDS)
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "own-training" / "train.py"   # in a source checkout
OWN_STEPS = 800        # the shortest attached job (docs/jobs.md): 10 modes profiled online on 200 of its steps


def _client_story(address: str, say: Callable[[str], None]) -> None:
    with OperatorClient(address) as c:
        say("\n== 2. The fleet as the controller sees it (jetfleet devices ls)")
        for d in c.list_devices():
            power = f"{d.power_w:5.1f} W" if d.power_w is not None else "   - "
            say(f"   {d.device_id:<14} {d.model:<11} {'online' if d.online else 'offline':<8} "
                f"{str(d.current_mode or '?'):<24} {d.current_mode_name or '':<9} {power}  {d.speed_text}")
        say("\n== 3. Push power modes to boards (jetfleet mode set); each board confirms what it runs")
        for device, mode in (("agx-xavier-1", "MODE_15W"), ("agx-orin-0", "8/1728/624.75/3199"),
                             ("orin-nano-2", "7W")):
            r = c.set_mode(device, mode)
            say(f"   {device:<14} asked {mode:<20} confirms {str(r.confirmed):<24} in {r.latency_s * 1e3:.0f} ms")
        say("\n== 4. Bad input is refused before anything reaches a board")
        for device, mode in (("agx-orin-0", "12/2200/1300.5/3199"), ("agx-xavier-1", "9/2265.6/1377/2133"),
                             ("tx2-9", "MAXN")):
            try:
                c.set_mode(device, mode)
            except JetfleetError as e:
                say(f"   {device} {mode}: {e.code}: {e.message}")
        say("\n== 5. Live telemetry from agx-orin-0 (jetfleet telemetry watch), 5 samples at 10 Hz")
        for s in c.watch_telemetry("agx-orin-0", 5):
            rails = "  ".join(f"{k} {v:5.2f}" for k, v in sorted(s.rails_w.items()))
            say(f"   total {s.total_w:6.2f} W  {rails}")


def _campaign_story(address: str, say: Callable[[str], None]) -> None:
    with OperatorClient(address) as c:
        say("\n== 6. Reference campaign: resnet18 on the emulated AGX Orin, PowerTrain's 4,368-mode grid "
            "(jetfleet profile start --workload resnet18 --device agx-orin-0 --modes powertrain)")
        camp = c.create_campaign("resnet18", device_id="agx-orin-0", modes="powertrain", minibatches=defaults.MINIBATCHES)
        t0 = time.monotonic()
        last = [0.0]

        def show(camp: Campaign) -> None:
            if time.monotonic() - last[0] > 5:
                last[0] = time.monotonic()
                eta = f"{camp.eta_s:.0f} s" if camp.eta_s is not None else "?"
                say(f"   {camp.done:5d}/{camp.total} modes measured, ETA {eta}")

        camp = c.wait_campaign(camp.campaign_id, on_update=show, poll_s=0.5)
        say(f"   campaign {camp.campaign_id} {camp.status}: {camp.done} measured, {camp.failed} failed in "
            f"{time.monotonic() - t0:.1f} s (each mode: apply, warm up, steady state, {defaults.MINIBATCHES} minibatches, power)")
        csv_text = c.export_profiles(campaign_id=camp.campaign_id).csv
    rows = [line.split(",") for line in csv_text.splitlines()[1:]]
    fastest = min(rows, key=lambda r: float(r[6]))
    frugal = min(rows, key=lambda r: float(r[6]) * float(r[7]))
    say(f"   fastest mode     {'/'.join(fastest[2:6]):<24} {float(fastest[6]):6.1f} ms  {float(fastest[7]):5.1f} W")
    say(f"   least energy     {'/'.join(frugal[2:6]):<24} {float(frugal[6]):6.1f} ms  {float(frugal[7]):5.1f} W  "
        f"({float(frugal[6]) * float(frugal[7]) / 1e3:.2f} J/minibatch)")
    say("   every raw sample is stored; export with: jetfleet profiles export --board-model agx-orin")


def _job_story(address: str, say: Callable[[str], None], plot: Path) -> None:
    from jetfleet.cli.jobs import job_text
    from jetfleet.research.plots import plot_front

    with OperatorClient(address, timeout_s=600) as c:
        say("\n== 7. Reference models from that campaign (jetfleet model train-reference --board-model agx-orin "
            "--workload resnet18): the published MLP, without its dropout (better on the twin: docs/jobs.md)")
        ref = c.train_reference("agx-orin", "resnet18")
        say(f"   {ref.model_id}: {ref.training_modes} modes; held-out validation MAPE time "
            f"{ref.metrics['time_val_mape_pct']:.1f}%, power {ref.metrics['power_val_mape_pct']:.1f}%; "
            f"{ref.metrics['fit_s']:.0f} s")
        say("\n== 8. The question of the day: this MobileNet training job on the Xavier must stay under 30 W "
            "(jetfleet job submit --workload mobilenet_v3 --device agx-xavier-1 --power-budget 30W --epochs 4 "
            "--minibatches-per-epoch 1000). The Xavier has no model for MobileNet: the job profiles 50 of its 29,232 "
            f"modes, transfers the reference, chooses with calibrated bounds, runs, and keeps the budget (the board's "
            f"clock runs {XAVIER_SPEED:.0f}x faster here)")
        job = c.submit_job("mobilenet_v3", device_id="agx-xavier-1", power_budget_w=30, epochs=4,
                           minibatches_per_epoch=1000)
        job = c.wait_job(job.job_id, on_update=_narrator(say), poll_s=0.2)
        model = c.get_model(job.model_id or "")
        say(f"   model {model.model_id}: held-out MAPE (5-fold cross-validation on its 50 modes) time "
            f"{model.metrics['time_cv_mape_pct']:.1f}%, power {model.metrics['power_cv_mape_pct']:.1f}% (its in-sample "
            f"fit, {model.metrics['time_fit_mape_pct']:.1f}% / {model.metrics['power_fit_mape_pct']:.1f}%, says little)")
        say("   " + job_text(job.to_dict()).replace("\n", "\n   "))
        pred = c.predict("agx-xavier", "mobilenet_v3")
        rows = [{"time_ms": p.time_ms, "power_w": p.power_w, "pareto": p.pareto} for p in pred.predictions]
        plot_front(rows, plot, f"mobilenet_v3 on agx-xavier, predicted ({pred.model_id})")
        say(f"   predicted all {len(rows)} modes with bounds; Pareto front of {pred.pareto_size} modes plotted to {plot}")
        mean_w = job.energy_j / job.elapsed_s if job.elapsed_s else float("nan")
        say(f"\n   Summary: {job.minibatches_done} minibatches in {job.elapsed_s / 60:.1f} board minutes, "
            f"{job.energy_j / 1e3:.1f} kJ, mean {mean_w:.2f} W under a 30 W budget; {len(job.steps)} closed-loop "
            f"step(s); goal {'kept' if job.goal_kept else 'MISSED'}.")
    baseline_story(say, job.minibatches_done, job.elapsed_s, job.energy_j, budget_w=30.0)


def _narrator(say: Callable[[str], None]) -> Callable[[Job], None]:
    """A job's progress told once per fifth of its profiled modes crossed (a poll may skip a count), and each other
    stage once."""
    seen: set[str] = set()
    fifths = [-1]   # the last fifth of the profiled modes narrated

    def narrate(job: Job) -> None:
        m = re.match(r"profiling (\d+)/(\d+) ", job.detail)
        if job.state == "profiling" and m:
            fifth = int(m.group(1)) * 5 // max(1, int(m.group(2)))
            if fifth > fifths[0]:
                fifths[0] = fifth
                say(f"   {job.detail}")
        elif job.state not in seen and job.detail:
            seen.add(job.state)
            # a detail that starts with its state is not prefixed twice
            say(f"   {job.detail}" if job.detail.startswith(job.state) else f"   {job.state:<9} {job.detail}")

    return narrate


def _own_script_story(address: str, say: Callable[[str], None], socket: Path) -> None:
    from jetfleet.cli.jobs import job_text

    say("\n== 9. Your own script under 30 W: examples/own-training/train.py, a plain PyTorch loop on scikit-learn's "
        "digits, adopted by a job on the Xavier (examples/own-training/run.sh: jetfleet job submit --attach digits-mlp "
        f"--device agx-xavier-1 --power-budget 30W --minibatches {OWN_STEPS}, then the script on the board's session "
        "socket). No model of it exists: the job profiles modes online on the script's own steps (a quarter of them), "
        "transfers the reference, and runs the rest under the budget")
    if not EXAMPLE.exists():
        say(f"   skipped: {EXAMPLE} is not in this installation (a source checkout has it)")
        return
    if importlib.util.find_spec("sklearn") is None:
        say("   skipped: the example's dataset ships with scikit-learn, which is not installed (the dev extra)")
        return
    with OperatorClient(address, timeout_s=600) as c:
        job = c.submit_job("digits-mlp", device_id="agx-xavier-1", power_budget_w=30, minibatches=OWN_STEPS,
                           attach=True, attach_timeout_s=120)
        # the script trains on past the job (its steps between the job's commands are its own) and is ended after it
        proc = subprocess.Popen([sys.executable, str(EXAMPLE), "--epochs", "1000", "--socket", str(socket)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            job = c.wait_job(job.job_id, on_update=_narrator(say), poll_s=0.2)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    say("   " + job_text(job.to_dict()).replace("\n", "\n   "))


def baseline_story(say: Callable[[str], None], minibatches: int, elapsed_s: float, energy_j: float, *,
                   budget_w: float, model: str = "agx-xavier", workload: str = "mobilenet_v3",
                   seed: int = XAVIER_SEED) -> None:
    """What the operator would have run without jetfleet: the board's presets named for the budget, measured on the
    same board's twin, the job's length in each, beside what the job did."""
    from jetfleet.lab.presets import budget_presets, preset_costs

    names = budget_presets(model, budget_w)
    if not names or not minibatches:
        return
    costs = preset_costs(model, workload, names, seed)
    say(f"\n   Baseline: NVIDIA's {budget_w:g} W presets of the {model} (what an operator picks without a model), "
        f"{workload} on this board's twin, for the job's {minibatches} minibatches:")
    for c in costs:
        keeps = "keeps" if c.power_w <= budget_w else "OVER"
        say(f"     {c.name:<15} {str(c.mode):<22} {c.minibatch_ms:6.1f} ms/minibatch  {c.power_w:5.1f} W ({keeps} "
            f"the budget)  -> {c.minibatch_ms * minibatches / 6e4:6.1f} board-min, {c.energy_j * minibatches / 1e3:6.1f} kJ")
    mine_ms = elapsed_s / minibatches * 1e3
    kept = [c for c in costs if c.power_w <= budget_w]
    best = min(kept or costs, key=lambda c: c.minibatch_ms)
    say(f"     {'the job':<15} {'(its choice, closed loop)':<22} {mine_ms:6.1f} ms/minibatch  "
        f"{energy_j / elapsed_s:5.1f} W              -> {elapsed_s / 60:6.1f} board-min, {energy_j / 1e3:6.1f} kJ")
    def times(x: float, what: str) -> str:
        return f"{x:.2f}x less {what}" if x >= 1 else f"{1 / x:.2f}x MORE {what}"

    say(f"     against the fastest preset that keeps {budget_w:g} W ({best.name}), the job took "
        f"{times(best.minibatch_ms / mine_ms, 'time per minibatch')} and "
        f"{times(best.energy_j * minibatches / energy_j, 'energy')} (its time includes its closed-loop steps; profiling "
        "its 50 modes came before)")


def _twin_story(say: Callable[[str], None]) -> None:
    from jetfleet.lab.presets import inversions, preset_costs

    say("\n== 10. What a training minibatch costs in NVIDIA's presets (jetfleet twin measure), AGX Orin")
    for w in ("resnet18", "mobilenet_v3"):
        costs = preset_costs("agx-orin", w, ["MAXN", "MODE_50W", "MODE_30W", "MODE_15W"])
        for c in costs:
            say(f"   {w:<13} {c.name:<9} {c.minibatch_ms:7.1f} ms/minibatch  {c.power_w:5.1f} W  "
                f"{c.energy_j:5.2f} J/minibatch  (bound by {c.bound})")
        for note in inversions(w, costs):
            say(f"   why: {note}")


async def run_demo(say: Callable[[str], None] = print) -> None:
    """Narrate the demo on a lab of three emulated boards through ``say``; writes demo-pareto.png in the working directory."""
    with tempfile.TemporaryDirectory(prefix="jetfleet-demo-") as data_dir:
        say("== 1. A lab: controller (embedded SQLite store) + emulated agx-orin, agx-xavier, orin-nano agents")
        lab = Lab(ControllerConfig(listen="127.0.0.1:0", store=data_dir, heartbeat_interval_s=0.5), [],
                  session_dir=str(Path(data_dir) / "sessions"))
        await lab.start()
        for model in BOARDS:
            lab.add_agent(model, speed=XAVIER_SPEED if model == "agx-xavier" else None)
        try:
            await lab.wait_online()
            await asyncio.sleep(1.2)  # one telemetry batch
            say(f"   controller on {lab.address}, store {data_dir}/jetfleet.db")
            await asyncio.to_thread(_client_story, lab.address, say)
            await asyncio.to_thread(_campaign_story, lab.address, say)
            await asyncio.to_thread(_job_story, lab.address, say, Path("demo-pareto.png").resolve())
            await asyncio.to_thread(_own_script_story, lab.address, say,
                                    Path(data_dir) / "sessions" / "agx-xavier-1.sock")
        finally:
            await lab.stop()
    _twin_story(say)
    say("\nDone. Next: `jetfleet lab up` keeps a lab running; see README.md for the operator workflows.")
