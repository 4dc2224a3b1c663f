"""The operator API's logic, without gRPC: what the CLI asks of the fleet."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from jetfleet.controller import profiles_csv
from jetfleet.controller.campaigns import CampaignManager
from jetfleet.controller.commands import CommandRouter
from jetfleet.controller.powertrain.service import ModelService
from jetfleet.controller.registry import Fleet, LiveDevice
from jetfleet.shared.catalog import Catalog
from jetfleet.shared.convert import catalog_to_pb, mode_from_pb, mode_to_pb
from jetfleet.shared.errors import InvalidArgument, NotFound
from jetfleet.shared.proto import agent_pb2, common_pb2, operator_pb2

MAX_TIMEOUT_S = 3600.0


class OperatorService:
    def __init__(self, fleet: Fleet, router: CommandRouter, campaigns: CampaignManager, models: ModelService) -> None:
        self.fleet, self.router, self.campaigns, self.models = fleet, router, campaigns, models

    def device_pb(self, d: LiveDevice, *, with_catalog: bool = False) -> operator_pb2.Device:
        msg = operator_pb2.Device(
            device_id=d.record.device_id, model=d.record.model, serial=d.record.serial, online=d.online,
            last_seen_s=self.fleet.wall() if d.online else d.record.last_seen_s, software=d.record.software,
            emulated=d.record.emulated, first_seen_s=d.record.first_seen_s,
            metrics_address=d.metrics_address if d.online else "")
        if d.record.current_mode:
            mode = d.catalog.parse_mode(d.record.current_mode)
            msg.current_mode.CopyFrom(mode_to_pb(mode))
            msg.current_mode_name = d.catalog.preset_name(mode) or ""
        if d.last_telemetry is not None:
            msg.last_telemetry.CopyFrom(d.last_telemetry)
        if with_catalog:
            msg.catalog.CopyFrom(catalog_to_pb(d.catalog))
        return msg

    def list_devices(self, model: str = "") -> operator_pb2.ListDevicesResponse:
        return operator_pb2.ListDevicesResponse(devices=[self.device_pb(d) for d in self.fleet.list(model)])

    def get_device(self, device_id: str) -> operator_pb2.Device:
        return self.device_pb(self.fleet.get(device_id), with_catalog=True)

    async def set_mode(self, req: operator_pb2.SetModeRequest) -> operator_pb2.SetModeResponse:
        live = self.fleet.get(req.device_id)
        mode = live.catalog.parse_mode(req.mode)  # INVALID_ARGUMENT naming the knob, before anything is sent
        if not 0 <= req.timeout_s <= MAX_TIMEOUT_S:
            raise InvalidArgument(f"timeout_s must be 0..{MAX_TIMEOUT_S:.0f}", field="timeout_s")
        start = time.perf_counter()
        cmd = agent_pb2.Command(set_mode=agent_pb2.SetMode(mode=mode_to_pb(mode)))
        result = await self.router.send(req.device_id, cmd, timeout_s=req.timeout_s or None,
                                        command_id=req.request_id)
        confirmed = live.catalog.validate(mode_from_pb(result.confirmed_mode))
        return operator_pb2.SetModeResponse(device_id=req.device_id, requested=mode_to_pb(mode),
                                            confirmed=mode_to_pb(confirmed), command_id=result.command_id,
                                            latency_s=time.perf_counter() - start)

    async def watch(self, device_id: str, max_samples: int = 0) -> AsyncIterator[common_pb2.TelemetrySample]:
        q = self.fleet.watch(device_id)
        sent = 0
        try:
            while not max_samples or sent < max_samples:
                sample = await q.get()
                if sample is None:
                    return
                yield sample
                sent += 1
        finally:
            self.fleet.unwatch(device_id, q)

    # --- campaigns and profiles -----------------------------------------------------------------
    def list_campaigns(self) -> operator_pb2.ListCampaignsResponse:
        return operator_pb2.ListCampaignsResponse(
            campaigns=[self.campaigns.campaign_pb(r) for r in self.campaigns.runs.values()])

    def get_campaign(self, campaign_id: str) -> operator_pb2.Campaign:
        return self.campaigns.campaign_pb(self.campaigns.get(campaign_id))

    async def export_profiles(self, req: operator_pb2.ExportProfilesRequest) -> operator_pb2.ExportProfilesResponse:
        rows = await asyncio.to_thread(self.fleet.store.query_profiles, board_model=req.board_model,
                                       workload=req.workload, device_id=req.device_id, source=req.campaign_id)
        return operator_pb2.ExportProfilesResponse(csv=profiles_csv.export(rows), rows=len(rows))

    def _catalog_of(self, model: str) -> Catalog | None:
        try:
            return self.campaigns.catalog_for("", model)
        except NotFound:
            return None

    async def import_profiles(self, req: operator_pb2.ImportProfilesRequest) -> operator_pb2.ImportProfilesResponse:
        rows = profiles_csv.parse(req.csv, req.name or "input")
        records, new = await asyncio.to_thread(profiles_csv.to_records, rows, self._catalog_of)
        await asyncio.to_thread(self.fleet.store.import_profiles, records, {m: c.to_dict() for m, c in new.items()})
        return operator_pb2.ImportProfilesResponse(rows=len(records), source=records[0].source,
                                                   new_board_models=sorted(new))
