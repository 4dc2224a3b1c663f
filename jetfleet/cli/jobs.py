"""Training jobs under a goal: `jetfleet job submit|ls|show|cancel`."""

from __future__ import annotations

import sys
from typing import Any

import click

from jetfleet.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_WORK_FAILED,
    Connection,
    connection_options,
    duration,
    emit,
    handle_errors,
    output_option,
    say,
    table,
)
from jetfleet.cli.complete import complete_board_models, complete_devices, complete_workloads
from jetfleet.shared.quantity import parse_deadline, parse_power_budget

ACTIVE = ("queued", "profiling", "modelling", "applying", "running")


def job_dict(job: Any) -> dict[str, Any]:
    """A Job (``jetfleet.client.Job``) as `--output json` prints it."""
    return job.to_dict()  # type: ignore[no-any-return]


def job_text(d: dict[str, Any]) -> str:
    """A job dict as text: goal, state, progress, the choice with its bounds, the last window, steps, segments."""
    waiting = d.get("waiting_for") or ""
    lines = [f"job {d['job_id']}: {d['workload']} on {d['target']}, {d['goal']} — {d['state']}"
             + (f", waiting for {waiting}" if waiting else ""),
             f"  {d['detail']}" if d["detail"] else "",
             f"  {d['minibatches_done']}/{d['minibatches']} minibatches ({d['progress']:.0%}), {duration(d['elapsed_s'])} "
             f"board time, {d['energy_j'] / 1e3:.2f} kJ"
             + (f", mean {d['mean_power_w']:.2f} W" if d["mean_power_w"] else "") + f", ETA {duration(d['eta_s'])}"]
    c = d["choice"]
    if d["mode"]:
        lines.append(f"  mode {d['mode']} on {d['device_id'] or '-'}; chosen at {c['predicted_time_ms']:.1f} ms "
                     f"(<= {c['predicted_time_ms_hi']:.1f}), {c['predicted_power_w']:.2f} W (<= "
                     f"{c['predicted_power_w_hi']:.2f} at {c['confidence']:.0%})" + (" AT RISK" if c["at_risk"] else "")
                     + f"; model {d['model_id']}" + ("" if d.get("covered", True) else " (OUTSIDE its coverage)"))
    for cf in d.get("confirms", []):
        lines.append(f"  confirming: {cf['mode']} measured {cf['power_w']:.2f} W (bound {cf['predicted_power_w_hi']:.2f})"
                     f", {cf['time_ms']:.1f} ms" + (" — over the budget" if cf["over"] else ""))
    if d.get("choice_note"):
        lines.append(f"  choice: {d['choice_note']}")
    if d["observed"]:
        o = d["observed"]
        budget = d["power_budget_w"]
        over = budget is not None and o["power_w"] > budget
        lines.append(f"  last window: {o['power_w']:.2f} W, {o['time_ms']:.1f} ms/minibatch"
                     + (f" — OVER the {budget:g} W budget" if over else ""))
    for i, s in enumerate(d["steps"], 1):
        lines.append(f"  step {i}/{d['max_steps']} at minibatch {s['at_minibatch']}: {s['from']} -> {s['to']}: "
                     f"{s['reason']} (predicted {s['predicted_power_w']:.2f} W, <= {s['predicted_power_w_hi']:.2f})")
    if d.get("campaigns"):
        lines.append(f"  profiled in {', '.join(d['campaigns'])} (seed {d['seed']}: --seed replays its modes)")
    for s in d["segments"]:
        lines.append(f"  ran {s['mode']} on {s['device_id']}: {s['minibatches']} minibatches, {s['seconds']:.0f} s, "
                     f"{s['energy_j'] / 1e3:.2f} kJ")
    inf = d.get("inference")
    if inf:
        ms = lambda x: "-" if x is None else f"{x:.1f}"  # noqa: E731
        lines.append(f"  inference {inf['workload']} at {inf['arrival_rate']:g} req/s" + (" (trace)" if inf["trace"] else "")
                     + f", batches of up to {inf['batch_size']} ({inf['choice']}"
                     + (f"; simulated p95 {inf['predicted_p95_ms']:.1f} ms" if inf["predicted_p95_ms"] else "") + ")")
        lines.append(f"    {inf['served']} served, {inf['late']} late, {inf['dropped']} dropped; last window p50 "
                     f"{ms(inf['p50_ms'])} / p95 {ms(inf['p95_ms'])} / p99 {ms(inf['p99_ms'])} ms, budget "
                     f"{inf['latency_budget_ms']:g} ms on p95" + ("" if inf["latency_kept"] else " — OVER"))
    for r in d.get("runs", []) if len(d.get("runs", [])) > 1 else []:
        lines.append(f"  command {r['run_id']} on {r['device_id']} from minibatch {r['from_minibatch']}: the board "
                     f"trained {r['trained']}" + (f" ({r['ended']})" if r["ended"] else " (running)"))
    tail = d.get("output_tail") or []
    if tail:
        lines.append(f"  output of the launched {d['template']!r} (last {len(tail)} lines):")
        lines.extend(f"    | {line}" for line in tail)
    verdict = d.get("verdict")
    if verdict:
        lines.append(f"  {verdict['text']}")
    elif d["steps"] or d["observed"]:
        lines.append(f"  goal {'kept' if d['goal_kept'] else 'MISSED'} so far (its last window)")
    return "\n".join(x for x in lines if x)


@click.group("job")
def job_group() -> None:
    """Training jobs under a goal: profile, transfer, choose, run, keep the goal, summarise."""


@job_group.command("submit")
@click.option("--workload", default="", shell_complete=complete_workloads, help="a registered workload, or")
@click.option("--attach", "attach", default="", metavar="NAME",
              help="the operator's own training process on --device, whose jetfleet.session is named NAME (it may "
                   "start before or after the job)")
@click.option("--template", default="", metavar="NAME",
              help="... or a job template of --device's agent configuration, which the agent launches")
@click.option("--arg", "template_args", multiple=True, metavar="KEY=VALUE",
              help="a value the template takes (repeatable; `jetfleet devices show` lists each template's args and "
                   "what each allows)")
@click.option("--attach-timeout", "attach_timeout_s", default=0.0, type=click.FloatRange(0, 86400),
              help="seconds for that process to join and between its steps (default 60)")
@click.option("--device", "device_id", default="", help="one board ...", shell_complete=complete_devices)
@click.option("--board-model", default="", help="... or any online board of a model", shell_complete=complete_board_models)
@click.option("--power-budget", default=None, help="fastest mode under this power, e.g. 30W")
@click.option("--deadline", default=None, help="lowest-power mode finishing the job within, e.g. 2h, 90m, 45s (board "
              "time; the unit is required)")
@click.option("--min-energy", is_flag=True, help="least energy")
@click.option("--minibatches", default=0, type=click.IntRange(0), help="the job's length ...")
@click.option("--epochs", default=0, type=click.IntRange(0), help="... or --epochs x --minibatches-per-epoch")
@click.option("--minibatches-per-epoch", default=0, type=click.IntRange(0), help="required with --epochs")
@click.option("--profile-modes", default=0, type=click.IntRange(0), help="modes to profile when there is no model "
              "(default 50; an attached job's: sized to its length, docs/jobs.md)")
@click.option("--strategy", default="", help="which modes: balanced (default), active, random, spread")
@click.option("--seed", default=None, type=click.IntRange(0, 2**63 - 1),
              help="picks the profiled modes (and an inference stream's arrivals): a job's `job show` prints the one "
                   "it used, so a replay passes it (default: the job's creation time)")
@click.option("--confidence", default=0.0, type=float, help="of the upper bound the choice must keep (default 0.9)")
@click.option("--max-steps", default=0, type=click.IntRange(0), help="closed-loop steps (default 3)")
@click.option("--confirm-profiles", default=0, type=click.IntRange(0),
              help="a power budget's choice: modes measured on the board before committing (default 3; an "
                   "attached job's on its own steps, as many as fit in a quarter of them)")
@click.option("--no-confirm", is_flag=True, help="commit to the model's choice without measuring it first")
@click.option("--window", "window_s", default=0.0, type=float, help="board seconds per power check (default 10)")
@click.option("--request-id", default="", help="a retried submit with this id returns the same job")
@click.option("--with-inference", "inference_workload", default="", shell_complete=complete_workloads,
              help="serve this workload's inference beside the training (needs --power-budget)")
@click.option("--arrival-rate", default=0.0, type=float, help="Poisson requests/s of the inference stream ...")
@click.option("--trace", "trace_path", default=None, help="... or a file of arrival times (s), one per line (-: stdin)")
@click.option("--latency-budget", default=None, help="on the p95 request latency, e.g. 50ms")
@click.option("--inference-batch-size", default=0, type=int, help="largest batch served at once, 1..64 (default: "
              "the controller chooses)")
@click.option("--fleet", is_flag=True, help="no board and no goal: queue it for the lab under its cap (`jetfleet fleet "
              "cap set`); the queue places it and paces it with the others (--deadline then orders the queue)")
@click.option("--priority", default=0.0, type=float, help="a fleet job's weight (default 1)")
@click.option("--wait", is_flag=True, help="follow the job until it ends (Ctrl-C stops following; the job goes on)")
@connection_options
@output_option
@handle_errors
def job_submit(conn: Connection, workload: str, device_id: str, board_model: str, power_budget: str | None,
               deadline: str | None, min_energy: bool, minibatches: int, epochs: int, minibatches_per_epoch: int,
               profile_modes: int, strategy: str, confidence: float, max_steps: int, confirm_profiles: int,
               no_confirm: bool, window_s: float, request_id: str, inference_workload: str, arrival_rate: float,
               trace_path: str | None, latency_budget: str | None,
               inference_batch_size: int, fleet: bool, priority: float, wait: bool, output: str, attach: str,
               attach_timeout_s: float, template: str, template_args: tuple[str, ...], seed: int | None) -> None:
    """Submit a training job; prints its id at once (and, with --wait, its progress and summary). With
    --with-inference it serves that inference stream beside the training, the mode and largest batch chosen to
    keep both the power budget and the latency budget (on p95)."""
    if sum(map(bool, (workload, attach, template))) != 1:
        raise click.UsageError("give one of --workload (a registered workload), --attach NAME (your own training) "
                               "or --template NAME (one the board's agent launches)")
    args: dict[str, str] = {}
    for kv in template_args:
        key, eq, value = kv.partition("=")
        if not eq or not key or key in args:
            raise click.UsageError(f"--arg {kv[:40]!r}: KEY=VALUE, each key once")
        args[key] = value
    if args and not template:
        raise click.UsageError("--arg is for --template NAME")
    if epochs and not minibatches_per_epoch:
        raise click.UsageError("--epochs needs --minibatches-per-epoch (the length of an epoch in minibatches)")
    if inference_batch_size:
        from jetfleet.shared.workloads.inference import check_batch_size

        check_batch_size(inference_batch_size, "inference_batch_size")
    times: list[float] = []
    if trace_path:
        from jetfleet.cli.common import MAX_SMALL_FILE_BYTES, read_text_file
        from jetfleet.shared.concurrency import read_trace

        times = [float(t) for t in read_trace(read_text_file(trace_path, "trace", MAX_SMALL_FILE_BYTES))]
    budget_s = 0.0
    if latency_budget:
        from jetfleet.shared.quantity import parse_latency

        budget_s = parse_latency(latency_budget)
    with conn.client() as c:
        job = c.submit_job(
            workload or attach or template, device_id=device_id, board_model=board_model,
            power_budget_w=parse_power_budget(power_budget) if power_budget else 0.0,
            deadline_s=parse_deadline(deadline) if deadline else 0.0, min_energy=min_energy,
            minibatches=minibatches, epochs=epochs, minibatches_per_epoch=minibatches_per_epoch,
            profile_modes=profile_modes, strategy=strategy, confidence=confidence, max_steps=max_steps,
            window_s=window_s, request_id=request_id, inference_workload=inference_workload,
            arrival_rate=arrival_rate, arrival_times_s=times, latency_budget_s=budget_s,
            inference_batch_size=inference_batch_size, fleet=fleet, priority=priority, attach=bool(attach),
            attach_timeout_s=attach_timeout_s, confirm_profiles=confirm_profiles, no_confirm=no_confirm,
            template=template, template_args=args, seed=seed)
        say(output, f"job {job.job_id} submitted: {job.goal} for {workload or attach or template} on {job.target} — {job.state}"
            + (f": {job.detail}" if job.detail else "")
            + ("" if wait else f" (follow it: jetfleet job show {job.job_id})"), job_id=job.job_id)
        if wait:
            job = _follow(c, job.job_id, output)
    emit(output, job.to_dict(), job_text)
    if wait and job.state in ("failed", "cancelled"):
        sys.exit(EXIT_WORK_FAILED)


def _follow(c: Any, job_id: str, output: str) -> Any:
    """A job's state changes as lines and its minibatches as a progress bar, until it ends; Ctrl-C says the job
    goes on and how to follow or cancel it, and exits 130."""
    from jetfleet.cli.progress import Progress

    progress = Progress.for_output(f"job {job_id}", output)
    last = [""]

    def show(job: Any) -> None:
        state = f"{job.state}: {job.detail}" if job.detail else job.state
        if state != last[0]:
            progress.note(state)
            last[0] = state
        if job.state == "running" and job.minibatches:
            power = f"{job.observed_power_w:.1f} W" if job.observed_power_w else ""
            inf = job.inference
            if inf is not None and inf.p95_ms is not None:
                power = ", ".join(x for x in (power, f"p95 {inf.p95_ms:.0f} ms") if x)
            progress.update(job.minibatches_done, job.minibatches, power, job.eta_s)

    try:
        return c.wait_job(job_id, on_update=show)
    except KeyboardInterrupt:
        progress.close()
        say(output, f"interrupted: job {job_id} goes on on the controller; follow it with `jetfleet job show "
            f"{job_id}`, stop it with `jetfleet job cancel {job_id}`", job_id=job_id, interrupted=True)
        sys.exit(EXIT_INTERRUPTED)
    finally:
        progress.close()


@job_group.command("ls")
@connection_options
@output_option
@handle_errors
def job_ls(conn: Connection, output: str) -> None:
    """Every job: state, progress, mode, power against the goal."""
    with conn.client() as c:
        rows = [j.to_dict() for j in c.list_jobs()]
    emit(output, rows, lambda rs: table(
        [[r["job_id"], r["workload"], r["target"], r["goal"], r["state"], f"{r['progress']:.0%}", r["mode"] or "-",
          f"{r['observed']['power_w']:.1f} W" if r["observed"] else "-", len(r["steps"]), duration(r["eta_s"])]
         for r in rs], ["JOB", "WORKLOAD", "TARGET", "GOAL", "STATE", "DONE", "MODE", "POWER", "STEPS", "ETA"]))


@job_group.command("show")
@click.argument("job_id")
@connection_options
@output_option
@handle_errors
def job_show(conn: Connection, job_id: str, output: str) -> None:
    """One job: progress, the choice and its bounds, the last window, every step, time per mode, the summary."""
    with conn.client() as c:
        emit(output, c.get_job(job_id).to_dict(), job_text)


@job_group.command("cancel")
@click.argument("job_id")
@connection_options
@output_option
@handle_errors
def job_cancel(conn: Connection, job_id: str, output: str) -> None:
    """Cancel a queued or running job (its training stops after the current minibatch)."""
    with conn.client() as c:
        emit(output, c.cancel_job(job_id).to_dict(), job_text)
