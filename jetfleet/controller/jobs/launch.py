"""A job launched from a template of its board's agent (``job submit --template NAME --arg K=V``): an attached job
(``online.py``, ``running.py``) whose process the agent starts itself (``jetfleet/agent/launcher.py``). Its commands
carry the launch (the agent starts the process with the first one and adopts it with each); its output tail is kept
in the record for ``job show``; a job that ends without being done has what it launched stopped on its board."""

from __future__ import annotations

import logging

from jetfleet.controller.commands import CommandRouter
from jetfleet.controller.registry import Registry
from jetfleet.controller.store import JobRecord
from jetfleet.shared.errors import FailedPrecondition, InvalidArgument, JetfleetError
from jetfleet.shared.proto import agent_pb2, operator_pb2
from jetfleet.shared.template_args import ArgRule, check_args

log = logging.getLogger(__name__)
MAX_TAIL_LINES = 40


def check_template(req: operator_pb2.SubmitJobRequest, registry: Registry) -> None:
    """A template job's request: one of the board's templates (as its agent's hello listed them), exactly the args
    it takes, each value allowed; InvalidArgument naming the field otherwise."""
    if req.attach:
        raise InvalidArgument("give --attach NAME (a process you started) or --template NAME (one the agent "
                              "launches), not both", field="attach")
    if req.workload != req.template:
        raise InvalidArgument(f"a template job's workload is its template's name ({req.template[:64]!r})",
                              field="workload")
    if not req.device_id:
        raise InvalidArgument("a template job is launched by one board's agent: give --device", field="device_id")
    live = registry.get(req.device_id)
    if not live.online:
        raise FailedPrecondition(f"{req.device_id} is offline: its agent launches the template", field="device_id")
    takes = live.templates.get(req.template)
    if takes is None:
        raise InvalidArgument(f"template {req.template[:64]!r} is not in {req.device_id}'s agent configuration (it "
                              f"has: {', '.join(sorted(live.templates)) or 'none; start its agent with --templates'})",
                              field="template")
    rules = live.template_rules.get(req.template, ())
    check_args(req.template, takes, dict(req.template_args),
               {a: ArgRule.parse(r, "template_args") for a, r in zip(takes, rules)})


def launch_pb(rec: JobRecord) -> agent_pb2.LaunchTemplate:
    """What each of the job's commands tells the agent to launch (once) and adopt: the job's id names the launch."""
    o = rec.options
    return agent_pb2.LaunchTemplate(template=o.template, args=o.template_args, launch_id=rec.job_id,
                                    minibatches=rec.minibatches, done=rec.minibatches_done)


def keep_tail(rec: JobRecord, lines: list[str]) -> None:
    """The launched process's output tail as the board last reported it (an empty report keeps the last one)."""
    if lines:
        rec.output_tail = [line[:400] for line in lines[-MAX_TAIL_LINES:]]


def supersede_launch(router: CommandRouter, rec: JobRecord) -> None:
    """Nobody wants the job's launch any more: whenever its board's heartbeat lists it still running (the board was
    offline when the job ended, or the cancel failed), the router tells the board to stop it."""
    router.supersede(rec.target_device, rec.job_id)


async def stop_launched(router: CommandRouter, rec: JobRecord) -> None:
    """The job ended without being done: the board stops what it launched for it (a cancel naming the launch); if
    the board cannot be told now, it is told when a heartbeat of its shows the launch still running
    (``supersede_launch``). An agent that stops kills what it launched anyway."""
    supersede_launch(router, rec)
    try:
        await router.send(rec.target_device, agent_pb2.Command(cancel=agent_pb2.Cancel(target_command_id=rec.job_id)),
                          timeout_s=660)   # its grace is at most 600 s
    except JetfleetError as e:
        log.warning("job %s: could not stop what %s launched for it: %s", rec.job_id, rec.target_device, e.message)


__all__ = ["check_template", "keep_tail", "launch_pb", "stop_launched", "supersede_launch"]
