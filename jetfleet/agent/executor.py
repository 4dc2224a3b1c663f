"""Runs commands from the controller on the device, without gRPC. The agent trusts nothing it is
sent: modes must be in the board's own catalog, workloads in the registry, sizes within bounds.
Idempotent by command id: a repeated id gets the remembered result, or waits for the run in
flight, and never executes twice."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable

from jetfleet.agent.device.base import Device
from jetfleet.agent.metrics import AgentMetrics
from jetfleet.agent.profiler import ProfileRequest, profile
from jetfleet.agent.workloads.registry import check_run_args, get_workload
from jetfleet.shared.convert import check_name, mode_from_pb, mode_to_pb, sample_to_pb
from jetfleet.shared.errors import InvalidArgument, JetfleetError
from jetfleet.shared.grpc_errors import error_pb
from jetfleet.shared.proto import agent_pb2

log = logging.getLogger(__name__)


class Cancelled(JetfleetError):
    code = "CANCELLED"


class CommandExecutor:
    def __init__(self, device: Device, *, remembered: int = 512, metrics: AgentMetrics | None = None) -> None:
        self.device = device
        self.metrics = metrics
        self.catalog = device.describe().catalog
        self._results: OrderedDict[str, agent_pb2.CommandResult] = OrderedDict()
        self._running: dict[str, asyncio.Task[agent_pb2.CommandResult]] = {}
        self._cancel: dict[str, threading.Event] = {}
        self._remembered = remembered
        self._device_lock = asyncio.Lock()  # one board, one thing at a time (cancel excepted)

    @property
    def busy(self) -> str:
        return next(iter(self._running), "")

    def check(self, cmd: agent_pb2.Command) -> None:
        """Refuse a malformed command before acknowledging it."""
        check_name(cmd.command_id, "command_id")
        kind = cmd.WhichOneof("kind")
        if kind == "set_mode":
            self.catalog.validate(mode_from_pb(cmd.set_mode.mode))
        elif kind == "run_training":
            r = cmd.run_training
            get_workload(r.workload)
            check_run_args(r.minibatches, r.minibatch_size or 16, r.workers)
        elif kind == "cancel":
            check_name(cmd.cancel.target_command_id, "cancel.target_command_id")
        elif kind == "run_profile":
            self._profile_request(cmd).check()
        else:
            raise InvalidArgument("command has no kind", field="kind")

    async def execute(self, cmd: agent_pb2.Command) -> agent_pb2.CommandResult:
        cid = cmd.command_id
        if cid in self._results:
            return self._results[cid]
        if cid in self._running:
            return await asyncio.shield(self._running[cid])
        task = asyncio.create_task(self._run(cmd))
        self._running[cid] = task
        try:
            result = await asyncio.shield(task)
        finally:
            self._running.pop(cid, None)
        self._results[cid] = result
        while len(self._results) > self._remembered:
            self._results.popitem(last=False)
        return result

    async def _run(self, cmd: agent_pb2.Command) -> agent_pb2.CommandResult:
        out = agent_pb2.CommandResult(command_id=cmd.command_id, ok=True)
        kind = cmd.WhichOneof("kind")
        try:
            self.check(cmd)
            if kind == "cancel":
                ev = self._cancel.get(cmd.cancel.target_command_id)
                if ev is not None:
                    ev.set()
                out.cancelled = ev is not None
                return out
            async with self._device_lock:
                if kind == "set_mode":
                    mode = mode_from_pb(cmd.set_mode.mode)
                    confirmed = await asyncio.to_thread(self.device.apply_mode, mode)
                    out.confirmed_mode.CopyFrom(mode_to_pb(confirmed))
                    if self.metrics:
                        self.metrics.set_mode(confirmed)
                elif kind == "run_training":
                    out.training.CopyFrom(await self._train(cmd))
                elif kind == "run_profile":
                    out.profile.CopyFrom(await self._profile(cmd))
        except JetfleetError as e:
            out.ok = False
            out.error.CopyFrom(error_pb(e))
        except Exception as e:  # a device failure we did not foresee: report, keep the agent alive
            log.exception("command %s failed", cmd.command_id)
            out.ok = False
            out.error.CopyFrom(error_pb(e))
        return out

    def _profile_request(self, cmd: agent_pb2.Command) -> ProfileRequest:
        r = cmd.run_profile
        mode = self.catalog.validate(mode_from_pb(r.mode))
        return ProfileRequest(r.workload, mode, r.minibatches, r.minibatch_size or 16, r.workers,
                              r.warmup_s if r.HasField("warmup_s") else None, r.sample_interval_s or 0.1)

    async def _profile(self, cmd: agent_pb2.Command) -> agent_pb2.ProfileResult:
        req = self._profile_request(cmd)
        p = await asyncio.to_thread(profile, self.device, req, self._observer(req.workload))
        if self.metrics:
            self.metrics.set_mode(p.mode)
        return agent_pb2.ProfileResult(workload=p.workload, mode=mode_to_pb(p.mode),
                                       minibatch_times_s=p.minibatch_times_s,
                                       power=[sample_to_pb(s) for s in p.power],
                                       steady_state_found=p.steady_state_found,
                                       window_start_s=p.window_start_s, window_end_s=p.window_end_s)

    def _observer(self, workload: str) -> Callable[[int, float], None] | None:
        metrics = self.metrics
        if metrics is None:
            return None
        return lambda i, t: metrics.observe_minibatch(workload, t)

    async def _train(self, cmd: agent_pb2.Command) -> agent_pb2.TrainingResult:
        r = cmd.run_training
        ev = self._cancel[cmd.command_id] = threading.Event()

        observe = self._observer(r.workload)

        def on_minibatch(i: int, t: float) -> None:
            if observe:
                observe(i, t)
            if ev.is_set():
                raise Cancelled(f"training cancelled after {i + 1} minibatches", field="command_id")

        try:
            run = await asyncio.to_thread(self.device.run_minibatches, r.workload, r.minibatches,
                                          minibatch_size=r.minibatch_size or 16, workers=r.workers,
                                          on_minibatch=on_minibatch)
        finally:
            self._cancel.pop(cmd.command_id, None)
        return agent_pb2.TrainingResult(workload=run.workload, minibatch_times_s=run.minibatch_times_s,
                                        start_s=run.start_s, end_s=run.end_s)
