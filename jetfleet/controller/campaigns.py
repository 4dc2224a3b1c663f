"""Profiling campaigns: hand modes out to boards one at a time, store each result as it arrives,
retry a mode whose board vanished, and carry on after an agent or controller restart.

Exactly once: a result is stored with its mode marked done in one store transaction keyed by
(campaign, mode), so a duplicate from a retry is recognised and dropped; the command id of a mode
on a board is deterministic, so a command resent after a reconnect is answered by the agent from
the run it already did (or is doing) instead of measuring again.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections import Counter, deque
from dataclasses import dataclass, field

from jetfleet.agent.measure import summarise
from jetfleet.controller.commands import CommandRouter
from jetfleet.controller.metrics import ControllerMetrics
from jetfleet.controller.registry import Fleet
from jetfleet.controller.store import CampaignRecord, ModeState, ProfileRecord
from jetfleet.shared.catalog import Catalog, builtin_catalogs, catalog_from_dict
from jetfleet.shared.convert import mode_to_pb
from jetfleet.shared.errors import (
    DeadlineExceeded,
    FailedPrecondition,
    InvalidArgument,
    JetfleetError,
    NotFound,
    Unavailable,
)
from jetfleet.shared.proto import agent_pb2, operator_pb2

log = logging.getLogger(__name__)
MAX_ATTEMPTS = 3            # a mode that fails on boards this often is marked failed
MAX_MODES = 100_000
DEFAULT_PROFILE_TIMEOUT_S = 3600.0


@dataclass(eq=False)
class _Run:
    rec: CampaignRecord
    modes: list[str]
    states: dict[str, ModeState]
    position: dict[str, int]
    in_flight: dict[str, str] = field(default_factory=dict)          # mode -> device
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    durations: deque[float] = field(default_factory=lambda: deque(maxlen=50))
    errors: deque[str] = field(default_factory=lambda: deque(maxlen=10))
    retries: int = 0
    # Kept as modes change state, so handing out a mode and reporting progress cost O(1), not O(modes).
    queue: deque[str] = field(init=False)           # pending modes not in flight, in campaign order
    tally: Counter[str] = field(init=False)         # modes per status

    def __post_init__(self) -> None:
        self.queue = deque(m for m in self.modes if self.states[m].status == "pending")
        self.tally = Counter(s.status for s in self.states.values())

    def count(self, status: str) -> int:
        return self.tally[status]

    def set_status(self, mode: str, status: str) -> None:
        state = self.states[mode]
        self.tally[state.status] -= 1
        self.tally[status] += 1
        state.status = status


class CampaignManager:
    def __init__(self, fleet: Fleet, router: CommandRouter, metrics: ControllerMetrics, *,
                 profile_timeout_s: float = DEFAULT_PROFILE_TIMEOUT_S) -> None:
        self.fleet, self.router, self.metrics = fleet, router, metrics
        self.store = fleet.store
        self.profile_timeout_s = profile_timeout_s
        self.runs: dict[str, _Run] = {}
        self._busy: set[str] = set()   # boards profiling now, across campaigns

    async def start(self) -> None:
        for rec in await asyncio.to_thread(self.store.list_campaigns):
            states = await asyncio.to_thread(self.store.campaign_modes, rec.campaign_id)
            run = _Run(rec, [s.mode for s in states], {s.mode: s for s in states},
                       {s.mode: i for i, s in enumerate(states)})
            self.runs[rec.campaign_id] = run
            if rec.status == "running":
                run.task = asyncio.create_task(self._drive(run))
        self._update_gauges()

    async def stop(self) -> None:
        for run in self.runs.values():
            if run.task:
                run.task.cancel()

    # --- creating ---------------------------------------------------------------------------------
    def catalog_for(self, device_id: str, board_model: str) -> Catalog:
        if device_id:
            return self.fleet.get(device_id).catalog
        if board_model in builtin_catalogs():
            return builtin_catalogs()[board_model]
        for d in self.fleet.list(board_model):
            return d.catalog
        stored = self.store.get_catalog(board_model)
        if stored:
            return catalog_from_dict(stored)
        raise NotFound(f"unknown board model {board_model!r}: no built-in catalog, no board and no imported "
                       f"profiles of it", field="board_model")

    @staticmethod
    def resolve_modes(catalog: Catalog, spec: str, mode_list: list[str], seed: int) -> list[str]:
        if mode_list:
            if len(mode_list) > MAX_MODES:
                raise InvalidArgument(f"at most {MAX_MODES} modes per campaign", field="mode_list")
            modes = [str(catalog.parse_mode(m)) for m in mode_list]
        elif spec.startswith("random:"):
            k_text = spec.split(":", 1)[1]
            if not k_text.isdigit() or not 1 <= int(k_text) <= catalog.size:
                raise InvalidArgument(f"modes {spec!r}: K must be 1..{catalog.size} for {catalog.model}",
                                      field="modes")
            modes = [str(m) for m in random.Random(seed).sample(catalog.grid("full"), int(k_text))]
        elif spec in catalog.grid_names:
            modes = [str(m) for m in catalog.grid(spec)]
        else:
            raise InvalidArgument(f"modes {spec!r}: expected one of {', '.join(catalog.grid_names)}, random:K, "
                                  "or a file of modes", field="modes")
        if len(set(modes)) != len(modes):
            raise InvalidArgument("the mode list names a mode twice", field="mode_list")
        if not modes:
            raise InvalidArgument("the campaign has no modes", field="modes")
        return modes

    async def create(self, req: operator_pb2.CreateCampaignRequest) -> operator_pb2.Campaign:
        from jetfleet.agent.workloads.registry import check_run_args, get_workload

        get_workload(req.workload)
        check_run_args(req.minibatches or 40, 16, 4)
        if bool(req.device_id) == bool(req.board_model):
            raise InvalidArgument("give exactly one target: a device or a board model", field="device_id")
        catalog = await asyncio.to_thread(self.catalog_for, req.device_id, req.board_model)
        spec = req.modes or ("file" if req.mode_list else "")
        modes = self.resolve_modes(catalog, spec, list(req.mode_list), req.seed)
        rec = CampaignRecord(uuid.uuid4().hex[:12], req.workload, req.device_id, catalog.model, spec,
                             req.minibatches or 40, time.time(), seed=req.seed)
        await asyncio.to_thread(self.store.create_campaign, rec, modes)
        run = _Run(rec, modes, {m: ModeState(m) for m in modes}, {m: i for i, m in enumerate(modes)})
        self.runs[rec.campaign_id] = run
        run.task = asyncio.create_task(self._drive(run))
        log.info("campaign %s: %s on %s, %d modes", rec.campaign_id, rec.workload,
                 rec.target_device or rec.target_model, len(modes))
        self._update_gauges(run)
        return self.campaign_pb(run)

    # --- controlling --------------------------------------------------------------------------------
    def get(self, campaign_id: str) -> _Run:
        if campaign_id not in self.runs:
            raise NotFound(f"unknown campaign {campaign_id!r}", field="campaign_id")
        return self.runs[campaign_id]

    async def control(self, campaign_id: str, action: str) -> operator_pb2.Campaign:
        run = self.get(campaign_id)
        allowed = {"pause": {"running"}, "resume": {"paused"}, "cancel": {"running", "paused"}}
        if action not in allowed:
            raise InvalidArgument(f"action {action!r}: expected pause, resume or cancel", field="action")
        if run.rec.status not in allowed[action]:
            raise FailedPrecondition(f"campaign {campaign_id} is {run.rec.status}; cannot {action} it", field="action")
        status = {"pause": "paused", "resume": "running", "cancel": "cancelled"}[action]
        run.rec.status = status
        await asyncio.to_thread(self.store.set_campaign_status, campaign_id, status,
                                time.time() if status == "cancelled" else 0.0)
        if action == "resume":
            run.task = asyncio.create_task(self._drive(run))
        if action == "cancel":
            for mode, device in list(run.in_flight.items()):
                target = self._command_id(run, mode, device)
                cancel = agent_pb2.Command(cancel=agent_pb2.Cancel(target_command_id=target))
                try:
                    await self.router.send(device, cancel, timeout_s=10)
                except JetfleetError as e:
                    log.info("cancel on %s: %s", device, e.message)
        run.wake.set()
        self._update_gauges(run)
        return self.campaign_pb(run)

    # --- driving -------------------------------------------------------------------------------------
    def _idle_boards(self, run: _Run) -> list[str]:
        if run.rec.target_device:
            candidates = [self.fleet.get(run.rec.target_device)]
        else:
            candidates = self.fleet.list(run.rec.target_model)
        return [d.record.device_id for d in candidates if d.online and d.record.device_id not in self._busy]

    async def _drive(self, run: _Run) -> None:
        while run.rec.status == "running":
            if not run.queue and not run.in_flight:
                run.rec.status = "done"
                run.rec.finished_s = time.time()
                await asyncio.to_thread(self.store.set_campaign_status, run.rec.campaign_id, "done", run.rec.finished_s)
                log.info("campaign %s done: %d measured, %d failed", run.rec.campaign_id, run.count("done"),
                         run.count("failed"))
                self._update_gauges(run)
                return
            for device in self._idle_boards(run):
                if not run.queue:
                    break
                mode = run.queue.popleft()
                run.in_flight[mode] = device
                self._busy.add(device)
                asyncio.create_task(self._dispatch(run, device, mode))
            run.wake.clear()
            try:
                await asyncio.wait_for(run.wake.wait(), 0.5)
            except TimeoutError:
                pass

    @staticmethod
    def _command_id(run: _Run, mode: str, device: str) -> str:
        return f"{run.rec.campaign_id}-{run.position[mode]}-{device}"

    async def _dispatch(self, run: _Run, device: str, mode: str) -> None:
        state = run.states[mode]
        live = self.fleet.get(device)
        started = time.monotonic()
        try:
            cmd = agent_pb2.Command(run_profile=agent_pb2.RunProfile(
                workload=run.rec.workload, mode=mode_to_pb(live.catalog.parse_mode(mode)),
                minibatches=run.rec.minibatches, minibatch_size=16, workers=4, sample_interval_s=0.1))
            result = await self.router.send(device, cmd, timeout_s=self.profile_timeout_s,
                                            command_id=self._command_id(run, mode, device))
            record = _record(run, device, live.catalog.model, mode, result.profile)
            stored = await asyncio.to_thread(self.store.record_result, record)
            run.set_status(mode, "done")
            state.device_id, state.error = device, ""
            run.durations.append(time.monotonic() - started)
            self.metrics.campaign_modes.labels(run.rec.workload, "measured" if stored else "duplicate").inc()
        except (Unavailable, DeadlineExceeded) as e:  # the board vanished: the mode goes back to the queue
            run.retries += 1
            state.attempts += 1
            state.error = f"{device}: {e.message}"
            run.errors.appendleft(state.error)
            self.metrics.campaign_modes.labels(run.rec.workload, "retried").inc()
            await asyncio.to_thread(self.store.set_mode_state, run.rec.campaign_id, state)
        except JetfleetError as e:
            state.attempts += 1
            state.error = f"{device}: {e.code}: {e.message}"
            run.errors.appendleft(f"{mode} {state.error}")
            if state.attempts >= MAX_ATTEMPTS or e.code in ("INVALID_ARGUMENT", "NOT_FOUND", "CANCELLED"):
                run.set_status(mode, "failed")
                self.metrics.campaign_modes.labels(run.rec.workload, "failed").inc()
            await asyncio.to_thread(self.store.set_mode_state, run.rec.campaign_id, state)
        except Exception as e:  # a bug or a corrupt result: count it like a board error, never loop forever
            log.exception("campaign %s mode %s on %s", run.rec.campaign_id, mode, device)
            state.attempts += 1
            state.error = f"{device}: internal error: {type(e).__name__}"
            run.errors.appendleft(f"{mode} {state.error}")
            if state.attempts >= MAX_ATTEMPTS:
                run.set_status(mode, "failed")
            await asyncio.to_thread(self.store.set_mode_state, run.rec.campaign_id, state)
        finally:
            run.in_flight.pop(mode, None)
            if state.status == "pending":  # not measured: first in line again (as its campaign order says)
                run.queue.appendleft(mode)
            self._busy.discard(device)
            run.wake.set()
            self._update_gauges(run)

    # --- reporting ---------------------------------------------------------------------------------
    def campaign_pb(self, run: _Run) -> operator_pb2.Campaign:
        done, failed = run.count("done"), run.count("failed")
        remaining = len(run.modes) - done - failed
        boards = sorted(set(run.in_flight.values()))
        eta = -1.0
        if run.durations and remaining:
            per_mode = sum(run.durations) / len(run.durations)
            eta = remaining * per_mode / max(1, len(boards) or len(self._idle_boards(run)))
        elif not remaining:
            eta = 0.0
        r = run.rec
        return operator_pb2.Campaign(
            campaign_id=r.campaign_id, workload=r.workload, target_device=r.target_device, target_model=r.target_model,
            modes=r.modes_spec, minibatches=r.minibatches, status=r.status, total=len(run.modes), done=done,
            failed=failed, in_flight=len(run.in_flight), eta_s=eta, created_s=r.created_s, finished_s=r.finished_s,
            boards=boards, errors=list(run.errors), retries=run.retries)

    def _update_gauges(self, *runs: _Run) -> None:
        """The remaining-modes gauge of ``runs`` (all campaigns when none are given)."""
        for run in runs or tuple(self.runs.values()):
            remaining = len(run.modes) - run.count("done") - run.count("failed")
            self.metrics.campaign_remaining.labels(run.rec.campaign_id, run.rec.workload).set(remaining)


def _record(run: _Run, device: str, model: str, mode: str, p: agent_pb2.ProfileResult) -> ProfileRecord:
    times = list(p.minibatch_times_s)
    summary = summarise(times, list(p.power))  # type: ignore[arg-type]  # proto samples have the same fields
    # Rounded to the sensors' resolution (ms, 0.1 mW): the store holds every sample, not float noise.
    raw = {"minibatch_times_s": [round(t, 6) for t in times], "window": [p.window_start_s, p.window_end_s],
           "power": [[round(s.t_s, 3), round(s.total_w, 4), {k: round(v, 4) for k, v in s.rails_w.items()}]
                     for s in p.power]}
    return ProfileRecord(run.rec.campaign_id, mode, 0, model, device, run.rec.workload,
                         summary.minibatch_time_median_ms, summary.power_mean_w, time.time(),
                         summary.minibatch_time_mean_ms, summary.energy_per_minibatch_j, summary.power_samples,
                         p.steady_state_found, raw)
