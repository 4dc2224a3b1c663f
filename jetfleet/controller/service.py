"""The operator API's logic, without gRPC: what the CLI asks of the fleet."""

from __future__ import annotations

import asyncio
import difflib
import math
import time
import uuid
from collections.abc import AsyncIterator

from jetfleet.controller import profiles_csv
from jetfleet.controller.campaigns import CampaignManager
from jetfleet.controller.commands import CommandRouter
from jetfleet.controller.fleet.caps import FleetCaps
from jetfleet.controller.fleet.queue import FleetQueue
from jetfleet.controller.jobs import JobManager
from jetfleet.controller.leases import BoardLeases, Holder
from jetfleet.controller.listing import DeviceViews
from jetfleet.controller.powertrain.service import ModelService
from jetfleet.controller.registry import LiveDevice, Registry
from jetfleet.controller.roofline import RooflineService
from jetfleet.controller.store import ProfileRecord
from jetfleet.controller.telemetry import TelemetryHub
from jetfleet.shared.bounds import check_id
from jetfleet.shared.catalog import Catalog, builtin_catalogs
from jetfleet.shared.convert import mode_from_pb, mode_to_pb
from jetfleet.shared.errors import DeadlineExceeded, InvalidArgument, NotFound, ResourceExhausted, Unavailable
from jetfleet.shared.proto import agent_pb2, common_pb2, operator_pb2
from jetfleet.shared.workloads import WORKLOADS

MAX_TIMEOUT_S = 3600.0
DEFAULT_WATCH_TIMEOUT_S = 10.0


class OperatorService:
    """The operator API without gRPC: boards, modes, telemetry, campaigns and profiles; PowerTrain is ``models``,
    training jobs ``jobs``."""

    def __init__(self, registry: Registry, telemetry: TelemetryHub, router: CommandRouter, campaigns: CampaignManager,
                 models: ModelService, jobs: JobManager, leases: BoardLeases, fleet: FleetCaps,
                 fleet_queue: FleetQueue, *, max_message_bytes: int = 4 * 1024 * 1024) -> None:
        self.registry, self.telemetry, self.router = registry, telemetry, router
        self.campaigns, self.models, self.jobs, self.leases = campaigns, models, jobs, leases
        self.fleet, self.fleet_queue = fleet, fleet_queue   # caps and labels, and the fleet jobs' queue (issue 17)
        self.rooflines = RooflineService(registry, router, campaigns, leases)
        self.max_message_bytes = max_message_bytes
        self.views = DeviceViews(registry, telemetry, fleet, leases)

    def device_pb(self, d: LiveDevice, *, with_catalog: bool = False) -> operator_pb2.Device:
        """A board as the operator API's Device: record, online state, mode, last sample (catalog if asked)."""
        return self.views.device_pb(d, with_catalog=with_catalog)

    def list_devices(self, model: str = "") -> operator_pb2.ListDevicesResponse:
        """Every known board (of ``model`` if given) as Device messages (each board's kept bytes: listing.py)."""
        return self.views.list_devices(model)

    def get_device(self, device_id: str) -> operator_pb2.Device:
        """One board with its catalog; NotFound if it is unknown."""
        return self.device_pb(self.registry.get(device_id), with_catalog=True)

    async def set_mode(self, req: operator_pb2.SetModeRequest) -> operator_pb2.SetModeResponse:
        """Check a mode against the board's catalog, send it, and return what the board confirmed and when."""
        live = self.registry.get(req.device_id)
        mode = live.catalog.parse_mode(req.mode)  # INVALID_ARGUMENT naming the knob, before anything is sent
        if not (math.isfinite(req.timeout_s) and 0 <= req.timeout_s <= MAX_TIMEOUT_S):
            raise InvalidArgument(f"timeout_s must be 0..{MAX_TIMEOUT_S:.0f} s (0: the controller's default)",
                                  field="timeout_s")
        if req.request_id:
            check_id(req.request_id, "request_id")
        start = time.perf_counter()
        # A preset asked for by name travels with its values, so a board can enter NVIDIA's own preset.
        preset = live.catalog.preset_named(req.mode) or ""
        cmd = agent_pb2.Command(set_mode=agent_pb2.SetMode(mode=mode_to_pb(mode), preset=preset))
        # The board's lease for the change: refused at once, naming the holder, while a job, a campaign or a roofline
        # measurement holds it (a mode queued behind their work would be applied later, by surprise).
        holder = Holder("mode", req.request_id or uuid.uuid4().hex, f"a mode change to {mode}")
        self.leases.take(req.device_id, holder)
        try:
            result = await self.router.send(req.device_id, cmd, timeout_s=req.timeout_s or None,
                                            command_id=req.request_id)
        finally:
            self.leases.release(req.device_id, holder)
        confirmed = live.catalog.validate(mode_from_pb(result.confirmed_mode))
        return operator_pb2.SetModeResponse(device_id=req.device_id, requested=mode_to_pb(mode),
                                            confirmed=mode_to_pb(confirmed), command_id=result.command_id,
                                            latency_s=time.perf_counter() - start)

    async def watch(self, device_id: str, max_samples: int = 0,
                    timeout_s: float = 0.0) -> AsyncIterator[common_pb2.TelemetrySample]:
        """A board's samples as they arrive, until ``max_samples`` are sent (0: until the caller stops).

        UNAVAILABLE when the board is offline or goes offline; DEADLINE_EXCEEDED when no sample arrives
        for ``timeout_s`` (0: 10 s)."""
        live = self.registry.get(device_id)
        if not (math.isfinite(timeout_s) and 0 <= timeout_s <= MAX_TIMEOUT_S):
            raise InvalidArgument(f"timeout_s must be 0..{MAX_TIMEOUT_S:.0f} s (0: {DEFAULT_WATCH_TIMEOUT_S:.0f} s)",
                                  field="timeout_s")
        if not live.online:
            raise Unavailable(f"device {device_id} is offline (last seen {time.ctime(live.record.last_seen_s)})",
                              field="device_id")
        wait_s = timeout_s or DEFAULT_WATCH_TIMEOUT_S
        q = self.telemetry.watch(device_id)
        sent = 0
        try:
            while not max_samples or sent < max_samples:
                try:
                    sample = await asyncio.wait_for(q.get(), wait_s)
                except asyncio.TimeoutError:
                    raise DeadlineExceeded(f"no telemetry from {device_id} for {wait_s:g} s", field="timeout_s") from None
                if sample is None:
                    raise Unavailable(f"device {device_id} went offline", field="device_id")
                yield sample
                sent += 1
        finally:
            self.telemetry.unwatch(device_id, q)

    async def forget_device(self, device_id: str) -> operator_pb2.ForgetDeviceResponse:
        """Remove an offline board and its history (FAILED_PRECONDITION while it is online)."""
        await self.registry.forget(device_id)
        self.telemetry.forget(device_id)
        return operator_pb2.ForgetDeviceResponse(device_id=device_id)

    # --- campaigns and profiles -----------------------------------------------------------------
    def list_campaigns(self) -> operator_pb2.ListCampaignsResponse:
        """Every campaign this controller has loaded or created, with its progress."""
        return operator_pb2.ListCampaignsResponse(
            campaigns=[self.campaigns.campaign_pb(r) for r in self.campaigns.runs.values()])

    def get_campaign(self, campaign_id: str) -> operator_pb2.Campaign:
        """One campaign's progress; NotFound if it is unknown."""
        return self.campaigns.campaign_pb(self.campaigns.get(campaign_id))

    async def _query(self, req: operator_pb2.ExportProfilesRequest) -> list[ProfileRecord]:
        return await asyncio.to_thread(self.registry.store.query_profiles, board_model=req.board_model,
                                       workload=req.workload, device_id=req.device_id, source=req.campaign_id)

    async def export_profiles(self, req: operator_pb2.ExportProfilesRequest) -> operator_pb2.ExportProfilesResponse:
        """The stored profiles that match the request's filters, as CSV in one message (RESOURCE_EXHAUSTED
        past the message limit: ``export_stream`` has no limit)."""
        rows = await self._query(req)
        text = profiles_csv.export(rows)
        if len(text) > self.max_message_bytes - 1024:
            raise ResourceExhausted(f"{len(rows)} rows ({len(text)} bytes of CSV) do not fit one message; use the "
                                    "streaming export (ExportProfilesStream, as `jetfleet profiles export` does)",
                                    field="csv")
        return operator_pb2.ExportProfilesResponse(csv=text, rows=len(rows))

    async def export_stream(self, req: operator_pb2.ExportProfilesRequest) -> AsyncIterator[operator_pb2.ProfilesChunk]:
        """The stored profiles that match the request's filters, as CSV in chunks of 10,000 rows."""
        rows = await self._query(req)
        for i, text in enumerate(profiles_csv.export_chunks(rows)):
            yield operator_pb2.ProfilesChunk(csv=text, rows=text.count("\n") - (1 if i == 0 else 0))

    def _catalog_of(self, model: str) -> Catalog | None:
        try:
            return self.campaigns.catalog_for("", model)
        except NotFound:
            return None

    async def import_profiles(self, req: operator_pb2.ImportProfilesRequest) -> operator_pb2.ImportProfilesResponse:
        """Check a profile CSV and store its rows, and catalogs for new board models, all or nothing.

        Idempotent: rows imported before (the same file again) are recognised and counted, not doubled. A board
        model or workload the controller does not know is refused unless the request allows it (a typo would
        start a new one)."""
        return await self.import_csv(req.csv, req.name, allow_new=list(req.allow_new), allow_any_new=req.allow_any_new)

    def _known_board_model(self, model: str) -> bool:
        return (model in builtin_catalogs() or any(d.catalog.model == model for d in self.registry.devices.values())
                or self.registry.store.get_catalog(model) is not None)

    def _known_workload(self, workload: str) -> bool:
        return (workload in WORKLOADS or any(workload in d.workloads for d in self.registry.devices.values())
                or self.registry.store.has_profiles(workload=workload))

    def _check_new_names(self, rows: list[profiles_csv.Row], label: str, allow_new: list[str],
                         allow_any_new: bool) -> tuple[list[str], list[str]]:
        """The board models and workloads of ``rows`` the controller does not know yet, each allowed by name or by
        ``allow_any_new``; InvalidArgument naming the first line of the first one that is not (blocking)."""
        firsts: dict[tuple[str, str], int] = {}
        for r in rows:
            firsts.setdefault(("board_model", r.board_model), r.line)
            firsts.setdefault(("workload", r.workload), r.line)
        new: dict[str, list[str]] = {"board_model": [], "workload": []}
        for (kind, name), line in firsts.items():
            known = self._known_board_model(name) if kind == "board_model" else self._known_workload(name)
            if known:
                continue
            if not (allow_any_new or name in allow_new):
                what = "board model" if kind == "board_model" else "workload"
                pool = (set(builtin_catalogs()) | {d.catalog.model for d in self.registry.devices.values()}
                        if kind == "board_model" else
                        set(WORKLOADS) | {w for d in self.registry.devices.values() for w in d.workloads})
                close = difflib.get_close_matches(name, sorted(pool), n=1)
                raise InvalidArgument(
                    f"{label} line {line}: {what} {name!r} is unknown to the controller"
                    + (f" (did you mean {close[0]!r}?)" if close else "")
                    + f"; nothing was imported. If {name!r} is a new {what}, allow it by name (allow_new; "
                    f"`jetfleet profiles import --new {name}`)", field=kind)
            new[kind].append(name)
        return sorted(new["board_model"]), sorted(new["workload"])

    async def import_csv(self, text: str, name: str, *, allow_new: list[str] | None = None,
                         allow_any_new: bool = True) -> operator_pb2.ImportProfilesResponse:
        """Import a profile CSV (its name labels errors); see ``import_profiles``. Called directly (not through the
        operator API), every new name is allowed unless ``allow_any_new`` is False."""
        label = name[:128] or "input"
        rows = await asyncio.to_thread(profiles_csv.parse, text, label)
        records, new = await asyncio.to_thread(profiles_csv.to_records, rows, self._catalog_of)
        _, new_workloads = await asyncio.to_thread(self._check_new_names, rows, label, list(allow_new or []),
                                                   allow_any_new)
        fresh = await asyncio.to_thread(self._not_stored, records)
        added = await asyncio.to_thread(self.registry.store.import_profiles, fresh,
                                        {m: c.to_dict() for m, c in new.items()})
        return operator_pb2.ImportProfilesResponse(rows=added, source=records[0].source, already_stored=len(records) - added,
                                                   new_board_models=sorted(new), new_workloads=new_workloads)

    def _not_stored(self, records: list[ProfileRecord]) -> list[ProfileRecord]:
        """The records not stored already under any source (an exported campaign imported back adds nothing)."""
        store = self.registry.store
        pairs = sorted({(r.board_model, r.workload) for r in records})
        stored = [s for m, w in pairs for s in store.query_profiles(board_model=m, workload=w)]
        return profiles_csv.not_stored(records, stored)

    async def import_stream(self, chunks: AsyncIterator[operator_pb2.ProfilesChunk]) -> operator_pb2.ImportProfilesResponse:
        """Import a profile CSV sent in chunks (no message limit; at most MAX_IMPORT_BYTES in all)."""
        parts: list[str] = []
        size = 0
        name = ""
        allow_new: list[str] = []
        allow_any_new = False
        first = True
        async for chunk in chunks:
            if first:
                name, allow_new, allow_any_new, first = chunk.name, list(chunk.allow_new), chunk.allow_any_new, False
            size += len(chunk.csv)
            if size > profiles_csv.MAX_IMPORT_BYTES:
                raise ResourceExhausted(f"import larger than {profiles_csv.MAX_IMPORT_BYTES} bytes; split the file",
                                        field="csv")
            parts.append(chunk.csv)
        return await self.import_csv("".join(parts), name, allow_new=allow_new, allow_any_new=allow_any_new)

    # --- the lab's power (caps, labels, the fleet queue: issue 17) ---------------------------------------------------
    async def set_labels(self, device_id: str, labels: dict[str, str]) -> operator_pb2.Device:
        """Add, replace or remove a board's labels."""
        self.fleet.refresh()
        await asyncio.to_thread(self.fleet.set_labels, device_id, labels)
        await self.fleet_queue.reschedule()   # a board may have changed racks: the fleet jobs' caps are others
        return self.device_pb(self.registry.get(device_id))

    async def set_cap(self, cap_w: float, group: str) -> operator_pb2.FleetPlan:
        """Set a cap; the fleet jobs' modes are re-chosen under it and queued jobs placed."""
        self.fleet.refresh()
        await asyncio.to_thread(self.fleet.set_cap, cap_w, group)
        await self.fleet_queue.reschedule()
        return await self.plan(group)

    async def clear_cap(self, group: str) -> operator_pb2.FleetPlan:
        """Remove a cap; the fleet jobs' modes are re-chosen."""
        self.fleet.refresh()
        plan = await asyncio.to_thread(self.fleet.clear_cap, group)
        await self.fleet_queue.reschedule()
        return plan

    async def plan(self, group: str = "") -> operator_pb2.FleetPlan:
        """The caps with their boards, the jobs on them and their power."""
        self.fleet.refresh()
        return await asyncio.to_thread(self.fleet.plan, group, self.jobs.active(), dict(self.fleet_queue.rows))
