"""A job's inference stream (issue 15): the operator's request checked before anything starts, the forward-pass
latencies measured through a board (``RunInference``), the largest batch chosen by running the managed scheduler
in virtual time (``jetfleet.shared.concurrency.choose_batch_size``), and the stream's figures from the board's
progress reports. The stream's settings live in the job's options (``options.inference``, a ``StreamSpec``), the
choice in ``choice.inference``, a command's reported figures in its ``RunRecord.inference`` (the totals of earlier
commands in ``inference_base``)."""

from __future__ import annotations

import math

import numpy as np

from jetfleet.controller.commands import CommandRouter
from jetfleet.controller.registry import Registry
from jetfleet.controller.store.job_record import JobOptions, RunRecord, StreamSpec, StreamStats
from jetfleet.shared.catalog import PowerMode
from jetfleet.shared.concurrency import (
    BatchChoice,
    check_arrival_rate,
    check_latency_budget,
    check_serviceable,
    choose_batch_size,
    poisson_arrivals,
)
from jetfleet.shared.convert import mode_to_pb
from jetfleet.shared.errors import InvalidArgument, Unavailable
from jetfleet.shared.proto import agent_pb2, operator_pb2
from jetfleet.shared.workloads import WORKLOADS
from jetfleet.shared.workloads.inference import CHARACTERISED_BATCH_SIZES, check_batch_size

MAX_JOB_TRACE = 100_000      # arrival times a job's trace may hold
PLAN_S = 60.0                # board seconds of Poisson arrivals the batch size is chosen on
MEASURE_TIMEOUT_S = 120.0
MARGIN = 0.9                 # the chosen batch's simulated p95 within this share of the budget


def has_stream(req: operator_pb2.SubmitJobRequest) -> bool:
    """Whether the request asks for an inference stream (any of its fields set)."""
    return bool(req.inference_workload or req.arrival_rate or len(req.arrival_times_s) or req.latency_budget_s
                or req.inference_batch_size)


def check_stream(req: operator_pb2.SubmitJobRequest) -> StreamSpec:
    """The stream's settings, or InvalidArgument naming the field (nothing measured yet)."""
    if not req.inference_workload:
        raise InvalidArgument("an inference stream needs --with-inference WORKLOAD", field="inference_workload")
    if req.inference_workload not in WORKLOADS:
        raise InvalidArgument(f"unknown inference workload {req.inference_workload[:64]!r}; served: "
                              f"{', '.join(sorted(WORKLOADS))}", field="inference_workload")
    if not req.power_budget_w:
        raise InvalidArgument("a job serving inference needs a power budget (--power-budget)", field="power_budget_w")
    if not req.latency_budget_s:
        raise InvalidArgument("an inference stream needs --latency-budget", field="latency_budget")
    budget = check_latency_budget(req.latency_budget_s, "latency_budget")
    if req.inference_batch_size:
        check_batch_size(int(req.inference_batch_size), "inference_batch_size")
    times = list(req.arrival_times_s)
    if bool(req.arrival_rate) == bool(times):
        raise InvalidArgument("give exactly one of --arrival-rate and --trace", field="arrival_rate")
    if req.arrival_rate:
        rate = check_arrival_rate(req.arrival_rate, "arrival_rate")
    else:
        t = np.asarray(times, dtype=float)
        if len(t) > MAX_JOB_TRACE or not np.all(np.isfinite(t)) or t[0] < 0 or np.any(np.diff(t) < 0):
            raise InvalidArgument(f"the trace must hold at most {MAX_JOB_TRACE} finite arrival times >= 0, "
                                  "non-decreasing", field="trace")
        if len(t) < 2 or t[-1] <= 0:
            raise InvalidArgument("the trace needs at least two arrivals over a positive span", field="trace")
        rate = check_arrival_rate(len(t) / float(t[-1]), "trace")
    return StreamSpec(req.inference_workload, float(req.arrival_rate), times, rate, budget, int(req.inference_batch_size))


async def measure(router: CommandRouter, device: str, workload: str, mode: PowerMode,
                  sizes: tuple[int, ...] = CHARACTERISED_BATCH_SIZES) -> tuple[dict[int, float], float]:
    """Forward-pass seconds by batch size in ``mode`` on ``device``, and its power while serving."""
    result = await router.send(device, agent_pb2.Command(run_inference=agent_pb2.RunInference(
        workload=workload, mode=mode_to_pb(mode), batch_sizes=list(sizes))), timeout_s=MEASURE_TIMEOUT_S)
    inf = result.inference
    return {int(b): float(t) for b, t in zip(inf.batch_sizes, inf.latency_s)}, float(inf.power_w)


async def check_against_board(registry: Registry, router: CommandRouter, stream: StreamSpec, device_id: str,
                              model: str, cache: dict[tuple[str, str], dict[int, float]]) -> float:
    """Refuse a stream no mode serves within its budget, or a budget below the fastest single request: the latencies
    at the board model's fastest mode (MAXN), measured once through an online board and remembered. Returns the
    fastest single-request latency (s)."""
    key = (model, stream.workload)
    lat = cache.get(key)
    if lat is None:
        boards = [registry.get(device_id)] if device_id else registry.list(model)
        live = [d for d in boards if d.online]
        if not live:
            raise Unavailable(f"no online {model} board to measure {stream.workload}'s inference latency on",
                              field="device_id")
        d = live[0]
        lat, _ = await measure(router, d.record.device_id, stream.workload, d.catalog.maxn)
        cache[key] = lat
    check_serviceable(stream.rate, stream.latency_budget_s, lat, stream.workload)
    return lat[min(lat)]


def plan_arrivals(stream: StreamSpec, seed: int) -> np.ndarray:
    """The arrivals the batch size is chosen on: PLAN_S of the Poisson stream, or the trace's first PLAN_S."""
    if stream.arrival_rate:
        return poisson_arrivals(stream.arrival_rate, PLAN_S, seed)
    t = np.asarray(stream.arrival_times_s, dtype=float)
    head = t[t <= t[0] + PLAN_S]
    return head - head[0]


def choose(stream: StreamSpec, latency_s: dict[int, float], train_s: float, seed: int) -> BatchChoice:
    """The batch size (the operator's, or the best of the characterised sizes) at the chosen mode."""
    candidates = (stream.batch_size,) if stream.batch_size else CHARACTERISED_BATCH_SIZES
    return choose_batch_size(latency_s, train_s, budget_s=stream.latency_budget_s,
                             arrivals_s=plan_arrivals(stream, seed), candidates=candidates, margin=MARGIN)


def totals(run: RunRecord | None) -> dict[str, int]:
    """Requests served/late/dropped over the job: earlier commands' plus this one's."""
    if run is None:
        return {"served": 0, "late": 0, "dropped": 0}
    now = run.inference or StreamStats()
    return {k: int(run.inference_base.get(k, 0)) + int(getattr(now, k)) for k in ("served", "late", "dropped")}


def stats_of(s: agent_pb2.InferenceStats) -> StreamStats:
    """A report's stream figures as stored."""
    return StreamStats(int(s.served), int(s.late), int(s.dropped), s.p50_ms, s.p95_ms, s.p99_ms, int(s.window_served),
                       int(s.batch_size))


def job_inference_pb(options: JobOptions, choice_batch: tuple[int, str, float] | None,
                     run: RunRecord | None) -> operator_pb2.JobInference | None:
    """The operator API's view of a job's stream (``choice_batch``: the chosen batch size, how, its predicted p95),
    or None for a job without one."""
    s = options.inference
    if s is None:
        return None
    batch, how, p95_pred = choice_batch or (s.batch_size, "", 0.0)
    now = (run.inference if run is not None else None) or StreamStats()
    t = totals(run)
    return operator_pb2.JobInference(
        workload=s.workload, arrival_rate=float(s.rate), trace=not s.arrival_rate, latency_budget_s=s.latency_budget_s,
        batch_size=int(batch), choice=how, predicted_p95_ms=float(p95_pred), served=t["served"], late=t["late"],
        dropped=t["dropped"], p50_ms=now.p50_ms, p95_ms=now.p95_ms, p99_ms=now.p99_ms, fastest_ms=s.fastest_ms,
        latency_kept=bool(not math.isfinite(now.p95_ms) or now.p95_ms <= s.latency_budget_s * 1e3))


def latency_summary(options: JobOptions, run: RunRecord | None) -> str:
    """The summary's inference part ('' without a stream)."""
    s = options.inference
    if s is None:
        return ""
    t = totals(run)
    now = (run.inference if run is not None else None) or StreamStats()
    return (f"; inference {s.workload}: {t['served']} served, {t['late']} late, {t['dropped']} dropped, last window "
            f"p50/p95/p99 {now.p50_ms:.1f}/{now.p95_ms:.1f}/{now.p99_ms:.1f} ms (budget {s.latency_budget_s * 1e3:g} "
            "ms on p95)")


__all__ = ["check_against_board", "check_stream", "choose", "has_stream", "job_inference_pb",
           "latency_summary", "measure", "stats_of", "totals"]
