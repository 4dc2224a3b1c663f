"""The operator API's side of jobs, in one place: a stored job as the API's ``Job`` message. The rest of the job code
works on the typed record (``store/job_record.py``) and never sees a protobuf message but the request it checks."""

from __future__ import annotations

from jetfleet.controller.jobs import inference as stream_
from jetfleet.controller.jobs.goals import Goal
from jetfleet.controller.store import JobRecord
from jetfleet.shared.catalog import PowerMode
from jetfleet.shared.convert import mode_to_pb
from jetfleet.shared.proto import operator_pb2


def job_pb(rec: JobRecord, goal: Goal) -> operator_pb2.Job:
    """A job as the operator API's Job: state, why and what it waits for, progress, ETA, mode, choice, last window,
    steps, segments, the commands it ran with what the boards trained, and (once ended) its verdict."""
    o = rec.options
    msg = operator_pb2.Job(
        job_id=rec.job_id, workload=rec.workload, target_device=rec.target_device, target_model=rec.target_model,
        goal=goal.describe(), power_budget_w=rec.power_budget_w, deadline_s=rec.deadline_s,
        min_energy=rec.goal == "energy", minibatches=rec.minibatches, state=rec.state, detail=rec.detail,
        waiting_for=rec.waiting_for, device_id=rec.device_id, model_id=rec.model_id,
        campaign_id=",".join(rec.campaign_ids), minibatches_done=rec.minibatches_done, elapsed_s=rec.elapsed_s,
        energy_j=rec.energy_j, eta_s=eta_s(rec), goal_kept=rec.goal_kept, created_s=rec.created_s,
        finished_s=rec.finished_s, confidence=o.confidence, max_steps=o.max_steps, window_s=o.window_s,
        profile_modes=o.profile_modes, strategy=o.strategy, fleet=rec.goal == "fleet", priority=o.priority,
        board_minibatches=rec.board_trained, covered=rec.choice.covered if rec.choice else True,
        choice_note=rec.choice.note if rec.choice else "", confirmed=rec.confirmed, template=o.template, seed=rec.seed,
        output_tail=rec.output_tail)
    if rec.mode:
        msg.mode.CopyFrom(mode_to_pb(mode_of(rec.mode)))
    c = rec.choice
    if c is not None:
        msg.predicted_time_ms, msg.predicted_time_ms_hi = c.time_ms, c.time_hi_ms
        msg.predicted_power_w, msg.predicted_power_w_hi = c.power_w, c.power_hi_w
        msg.at_risk = c.at_risk
    if rec.observed is not None:
        msg.observed_power_w, msg.observed_time_ms = rec.observed.power_w, rec.observed.time_ms
    for s in rec.steps:
        msg.steps.append(operator_pb2.JobStep(
            t_s=s.t_s, at_minibatch=s.at_minibatch, from_mode=s.from_mode, to_mode=s.to_mode, reason=s.reason,
            observed_power_w=s.observed_power_w, observed_time_ms=s.observed_time_ms, predicted_power_w=s.predicted_power_w,
            predicted_power_w_hi=s.predicted_power_w_hi, predicted_time_ms=s.predicted_time_ms, kind=s.kind,
            predicted_time_ms_hi=s.predicted_time_ms_hi))
    inf_choice = c.inference if c is not None else None
    inf = stream_.job_inference_pb(o, (inf_choice.batch_size, inf_choice.how, inf_choice.p95_ms) if inf_choice else None,
                                   rec.run)
    if inf is not None:
        msg.inference.CopyFrom(inf)
    for seg in rec.segments:
        msg.segments.append(operator_pb2.JobSegment(mode=seg.mode, device_id=seg.device_id, minibatches=seg.minibatches,
                                                    seconds=seg.seconds, energy_j=seg.energy_j))
    for r in rec.runs:
        msg.runs.append(operator_pb2.JobRun(run_id=r.run_id, device_id=r.device_id, base_done=r.base_done,
                                            trained=r.trained, elapsed_s=r.elapsed_s, energy_j=r.energy_j,
                                            ended=r.ended))
    for cf in rec.confirms:
        msg.confirms.append(operator_pb2.JobConfirm(mode=cf.mode, device_id=cf.device_id, power_w=cf.power_w,
                                                    time_ms=cf.time_ms, predicted_power_w_hi=cf.predicted_power_hi_w,
                                                    over=cf.over, seconds=cf.seconds))
    for t in rec.history:
        msg.history.append(operator_pb2.JobTransition(state=t.state, why=t.why, at_s=t.at_s))
    if rec.verdict is not None:
        v = rec.verdict
        msg.verdict.CopyFrom(operator_pb2.JobVerdict(judged=v.judged, kept=v.kept, constraint=v.constraint,
                                                     objective=v.objective, text=v.text()))
    return msg


def eta_s(rec: JobRecord) -> float:
    """Board seconds left at the last window's pace (the choice's before one), -1 when unknown."""
    left = rec.minibatches - rec.minibatches_done
    if left <= 0:
        return 0.0
    if rec.observed is not None and rec.state == "running":
        return left * rec.observed.time_ms / 1e3
    if rec.choice is not None:
        return left * rec.choice.time_ms / 1e3
    return -1.0


def mode_of(text: str) -> PowerMode:
    """A stored mode (CORES/CPU/GPU/MEM) as a PowerMode."""
    cores, cpu, gpu, mem = text.split("/")
    return PowerMode(int(cores), float(cpu), float(gpu), float(mem))
