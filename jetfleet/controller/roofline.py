"""Pagoda's time and energy rooflines per power mode on the controller (issue 16, ARCHITECTURE §8).

``Roofline``: the stored rooflines of a board model's modes; with ``measure``, the modes not stored yet are
measured first on a board of that model (the agent runs the ERT kernels: ``jetfleet.agent.roofline``), the
energy constants fitted from the three windows' power and the record stored per (board model, mode). With a
workload, each point also carries its FLOPs W and bytes Q per minibatch (the characterisation's analytical
model) and T = max(W / peak, Q / BW), E = eps_flop W + eps_byte Q + pi0 T. With ``profile_fit``, each mode's
eps and pi0 are also fitted from the stored training profiles of every workload profiled there (>= 3; computed
on demand from the store, nothing stored), with both fits' MAPE of E over those workloads.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import uuid
from typing import Any

from jetfleet.controller.campaigns import CampaignManager
from jetfleet.controller.commands import CommandRouter
from jetfleet.controller.leases import BoardLeases, Holder
from jetfleet.controller.registry import Registry
from jetfleet.controller.store import RooflineRecord
from jetfleet.shared import defaults
from jetfleet.shared.bounds import check_id
from jetfleet.shared.catalog import Catalog, PowerMode
from jetfleet.shared.convert import mode_from_pb, mode_to_pb
from jetfleet.shared.errors import FailedPrecondition, InvalidArgument, NotFound
from jetfleet.shared.proto import agent_pb2, operator_pb2
from jetfleet.shared.roofline import (
    DEFAULT_KERNEL_S,
    MAX_KERNEL_S,
    MIN_PROFILED_WORKLOADS,
    EnergyFit,
    ProfiledCost,
    check_phase,
    energy_mape,
    fit_energy,
    fit_energy_from_profiles,
    profile_energy_j,
    roofline_energy_j,
    roofline_time_s,
    workload_cost,
)
from jetfleet.shared.workloads import MAX_MINIBATCH_SIZE, WORKLOADS, characterisation
from jetfleet.shared.workloads.inference import check_batch_size, inference_characterisation

MAX_MODES = 500    # modes one call may name (each measured one costs 3 x seconds of board time)


def record_from_result(board_model: str, device_id: str, r: agent_pb2.RooflineResult, now_s: float,
                       catalog: Catalog) -> RooflineRecord:
    """A store record from an agent's measurement, with the energy constants fitted."""
    fit = fit_energy(idle_w=r.idle_w, compute_w=r.compute_w, memory_w=r.memory_w, peak_flops=r.peak_flops,
                     compute_bytes_per_s=r.compute_bytes_per_s, peak_bytes_per_s=r.peak_bytes_per_s,
                     memory_flops=r.memory_flops)
    mode = catalog.validate(mode_from_pb(r.mode))
    return RooflineRecord(board_model=board_model, mode=str(mode), peak_flops=r.peak_flops,
                          peak_bytes_per_s=r.peak_bytes_per_s, idle_w=r.idle_w, compute_w=r.compute_w,
                          memory_w=r.memory_w, compute_bytes_per_s=r.compute_bytes_per_s, memory_flops=r.memory_flops,
                          eps_flop_j=fit.eps_flop_j, eps_byte_j=fit.eps_byte_j, pi0_w=fit.pi0_w, device_id=device_id,
                          method=r.method, measured_s=now_s, samples=r.samples).check()


def point_pb(rec: RooflineRecord, catalog: Catalog, cost: tuple[float, float] | None) -> operator_pb2.RooflinePoint:
    """A stored roofline as the API's point, with the workload placed on it when ``cost`` = (W, Q) is given."""
    mode = catalog.parse_mode(rec.mode)
    p = operator_pb2.RooflinePoint(
        mode=mode_to_pb(mode), mode_name=catalog.preset_name(mode) or "", peak_flops=rec.peak_flops,
        peak_bytes_per_s=rec.peak_bytes_per_s, eps_flop_j=rec.eps_flop_j, eps_byte_j=rec.eps_byte_j, pi0_w=rec.pi0_w,
        idle_w=rec.idle_w, measured_s=rec.measured_s, device_id=rec.device_id, method=rec.method)
    if cost is not None:
        w, q = cost
        t = roofline_time_s(w, q, rec.peak_flops, rec.peak_bytes_per_s)
        p.workload_flops, p.workload_bytes, p.time_s = w, q, t
        p.energy_j = roofline_energy_j(w, q, t, EnergyFit(rec.eps_flop_j, rec.eps_byte_j, rec.pi0_w))
        p.memory_bound = q / rec.peak_bytes_per_s > w / rec.peak_flops
    return p


def workload_cost_of(workload: str, minibatch_size: int, phase: str) -> tuple[float, float]:
    """(W, Q) per minibatch of a built-in workload; NotFound for any other (plugins' costs live on their boards)."""
    if workload not in WORKLOADS:
        raise NotFound(f"no analytical cost model for workload {workload[:64]!r}; built in: "
                       f"{', '.join(sorted(WORKLOADS))}", field="workload")
    if phase == "inference":
        check_batch_size(minibatch_size, "minibatch_size")
        return workload_cost(characterisation(workload), minibatch_size, phase, inference_characterisation(workload))
    return workload_cost(characterisation(workload), minibatch_size, phase)


class RooflineService:
    """Measures, stores and serves rooflines per (board model, mode)."""

    def __init__(self, registry: Registry, router: CommandRouter, campaigns: CampaignManager,
                 leases: BoardLeases) -> None:
        self.registry, self.router, self.campaigns, self.leases = registry, router, campaigns, leases

    def _modes(self, catalog: Catalog, names: list[str]) -> list[PowerMode]:
        if len(names) > MAX_MODES:
            raise InvalidArgument(f"{len(names)} modes named; at most {MAX_MODES}", field="modes")
        out: list[PowerMode] = []
        for text in names:
            mode = catalog.parse_mode(text)
            if mode not in out:
                out.append(mode)
        return out

    def _board(self, board_model: str, device_id: str) -> str:
        if device_id:
            check_id(device_id, "device_id")
            live = self.registry.get(device_id)
            if live.catalog.model != board_model:
                raise InvalidArgument(f"device {device_id!r} is a {live.catalog.model}, not a {board_model}",
                                      field="device_id")
            if not live.online:
                raise FailedPrecondition(f"device {device_id!r} is offline", field="device_id")
            return device_id
        online = [d.record.device_id for d in self.registry.list(board_model) if d.online]
        if not online:
            raise FailedPrecondition(f"no online {board_model} board to measure rooflines on; start one or name "
                                     "--device", field="board_model")
        free = [d for d in online if self.leases.holder(d) is None]
        return (free or online)[0]   # a held board is refused with its holder's name when the lease is taken

    async def _observed(self, board_model: str, workload: str, catalog: Catalog,
                        points: list[operator_pb2.RooflinePoint]) -> None:
        """Put the stored profiles of the workload beside the roofline's T and E (campaigns profile at the default
        minibatch): the median of their minibatch times and the energy at their mean power."""
        rows = await asyncio.to_thread(self.registry.store.query_profiles, board_model=board_model, workload=workload)
        by_mode: dict[str, list[tuple[float, float]]] = {}
        for r in rows:
            try:
                key = str(catalog.parse_mode(r.mode))
            except InvalidArgument:
                continue
            if math.isfinite(r.minibatch_time_ms) and math.isfinite(r.power_w):
                by_mode.setdefault(key, []).append((r.minibatch_time_ms / 1e3, r.power_w))
        for p in points:
            obs = by_mode.get(str(mode_from_pb(p.mode)))
            if obs:
                t = statistics.median(o[0] for o in obs)
                p.observed_time_s, p.observed_energy_j = t, t * statistics.median(o[1] for o in obs)
                p.observed_profiles = len(obs)

    async def _profiled(self, board_model: str, catalog: Catalog) -> dict[str, list[tuple[ProfiledCost, int]]]:
        """Every built-in workload's stored profiles per mode (campaigns profile training at the default minibatch):
        per (mode, workload) the median of their minibatch times, the energy at the median of their mean power,
        W and Q per minibatch from the characterisation, and how many profiles went in."""
        rows = await asyncio.to_thread(self.registry.store.query_profiles, board_model=board_model)
        by: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for r in rows:
            if r.workload not in WORKLOADS or not (math.isfinite(r.minibatch_time_ms) and math.isfinite(r.power_w)):
                continue
            try:
                key = str(catalog.parse_mode(r.mode))
            except InvalidArgument:
                continue
            by.setdefault((key, r.workload), []).append((r.minibatch_time_ms / 1e3, r.power_w))
        out: dict[str, list[tuple[ProfiledCost, int]]] = {}
        for (mode, workload), obs in sorted(by.items()):
            w, q = workload_cost(characterisation(workload), defaults.MINIBATCH_SIZE)
            t = statistics.median(o[0] for o in obs)
            cost = ProfiledCost(workload, w, q, t, t * statistics.median(o[1] for o in obs))
            out.setdefault(mode, []).append((cost, len(obs)))
        return out

    async def _profile_fit(self, board_model: str, catalog: Catalog, points: list[operator_pb2.RooflinePoint]) -> None:
        """Fit each point's mode's energy constants from its profiled workloads (all modes checked first: refused,
        naming every mode short of workloads, before anything is filled in)."""
        profiled = await self._profiled(board_model, catalog)
        fits: list[tuple[operator_pb2.RooflinePoint, list[tuple[ProfiledCost, int]], EnergyFit]] = []
        short: list[str] = []
        for p in points:
            key = str(mode_from_pb(p.mode))
            got = profiled.get(key, [])
            try:
                fits.append((p, got, fit_energy_from_profiles([g[0] for g in got],
                                                              f"{board_model} {p.mode_name or key}")))
            except FailedPrecondition:
                short.append(f"{p.mode_name or key}: {len(got)}" + (f" ({', '.join(g[0].workload for g in got)})"
                                                                    if got else ""))
        if short:
            raise FailedPrecondition(
                f"the profile fit needs >= {MIN_PROFILED_WORKLOADS} workloads profiled at each mode; {board_model} "
                f"has too few at {len(short)} mode(s): {'; '.join(short[:5])}"
                + (f" and {len(short) - 5} more" if len(short) > 5 else "")
                + " (profiled workloads per mode; profile more with jetfleet profile start, or name other --mode)",
                field="modes")
        for p, got, fit in fits:
            bench = EnergyFit(p.eps_flop_j, p.eps_byte_j, p.pi0_w)
            costs = [g[0] for g in got]
            p.profile_eps_flop_j, p.profile_eps_byte_j, p.profile_pi0_w = fit.eps_flop_j, fit.eps_byte_j, fit.pi0_w
            p.profile_fit_mape, p.bench_fit_mape = energy_mape(costs, fit), energy_mape(costs, bench)
            if p.time_s:
                p.profile_energy_j = roofline_energy_j(p.workload_flops, p.workload_bytes, p.time_s, fit)
            for c, n in got:
                p.profiled.append(operator_pb2.ProfiledWorkload(
                    workload=c.workload, flops=c.flops, bytes=c.nbytes, time_s=c.time_s, energy_j=c.energy_j,
                    profiles=n, profile_fit_energy_j=profile_energy_j(c, fit),
                    bench_fit_energy_j=profile_energy_j(c, bench)))

    async def roofline(self, req: operator_pb2.RooflineRequest) -> operator_pb2.RooflineResponse:
        """Check everything, measure what is missing (if asked), then answer from the store."""
        if not req.board_model:
            raise InvalidArgument("board_model is required", field="board_model")
        catalog = self.campaigns.catalog_for("", req.board_model)
        modes = self._modes(catalog, list(req.modes))
        phase = check_phase(req.phase)
        mb = req.minibatch_size or defaults.MINIBATCH_SIZE
        if not 1 <= mb <= MAX_MINIBATCH_SIZE:
            raise InvalidArgument(f"minibatch_size={mb} is out of range; allowed 1..{MAX_MINIBATCH_SIZE}",
                                  field="minibatch_size")
        if not (math.isfinite(req.seconds) and 0 <= req.seconds <= MAX_KERNEL_S):
            raise InvalidArgument(f"seconds={req.seconds!r} is out of range; allowed 0..{MAX_KERNEL_S:g} "
                                  "(0: the agent's default)", field="seconds")
        cost = workload_cost_of(req.workload, mb, phase) if req.workload else None
        if req.remeasure and not req.measure:
            raise InvalidArgument("remeasure goes with measure", field="remeasure")
        if req.device_id and not req.measure:
            raise InvalidArgument("device_id names the board to measure on: give it with measure", field="device_id")
        named = self._board(req.board_model, req.device_id) if req.device_id else ""
        store = self.registry.store
        stored = {r.mode: r for r in await asyncio.to_thread(store.get_rooflines, req.board_model)}
        measured = 0
        if req.measure:
            if req.remeasure and not modes:
                raise InvalidArgument("remeasure needs the modes to measure again", field="modes")
            missing = [m for m in modes if req.remeasure or str(m) not in stored]
            if missing:
                device_id = named or self._board(req.board_model, "")
                holder = Holder("roofline", uuid.uuid4().hex[:12], f"a roofline measurement of {len(missing)} mode(s)")
                self.leases.take(device_id, holder)   # refused at once, naming the holder, if the board is busy
                try:
                    for mode in missing:
                        cmd = agent_pb2.Command(run_roofline=agent_pb2.RunRoofline(mode=mode_to_pb(mode),
                                                                                    seconds=req.seconds))
                        seconds = req.seconds or DEFAULT_KERNEL_S
                        result = await self.router.send(device_id, cmd, timeout_s=3 * seconds * 4 + 120)
                        rec = record_from_result(req.board_model, device_id, result.roofline, self.registry.wall(),
                                                 catalog)
                        await asyncio.to_thread(store.put_roofline, rec)
                        stored[rec.mode] = rec
                        measured += 1
                finally:
                    self.leases.release(device_id, holder)
        wanted = [str(m) for m in modes] if modes else sorted(stored)
        absent = [m for m in wanted if m not in stored]
        if absent:
            raise NotFound(f"no roofline stored for {req.board_model} mode(s) {', '.join(absent[:5])}"
                           + (f" and {len(absent) - 5} more" if len(absent) > 5 else "")
                           + "; measure them (jetfleet roofline --measure)", field="modes")
        points = [point_pb(stored[m], catalog, cost) for m in wanted]
        if req.profile_fit:
            await self._profile_fit(req.board_model, catalog, points)
        if req.workload and phase == "training" and mb == defaults.MINIBATCH_SIZE:
            await self._observed(req.board_model, req.workload, catalog, points)
        w_q: Any = cost or (0.0, 0.0)
        return operator_pb2.RooflineResponse(board_model=req.board_model, workload=req.workload, points=points,
                                             measured=measured, intensity=(w_q[0] / w_q[1]) if w_q[1] else 0.0,
                                             phase=phase, minibatch_size=mb)
