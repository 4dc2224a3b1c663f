"""Boards as the operator API's Device messages, and `devices ls` without building a message per board per call.

Over 1,000 boards `devices ls` built 1,000 messages field by field on the event loop (17 ms a call under a
streaming fleet, p99 33 ms; the fields of a board that changed since the last call are few). Here each board's
Device is kept as its serialized bytes, split in two: what the board's record, session, labels and lease say
(rebuilt only when one of them changed; a tuple of those values is the check), and its newest sample (serialized
once per sample the hub makes, which it does once per batch that arrived). A call then joins bytes: a protobuf
message's fields may come in any order, and a repeated field is its elements one after another, so the joined
bytes parse as the same response the field-by-field build gave (``tests/test_operator_reads.py``)."""

from __future__ import annotations

from jetfleet.controller.fleet.caps import FleetCaps
from jetfleet.controller.leases import BoardLeases
from jetfleet.controller.registry import LiveDevice, Registry
from jetfleet.controller.telemetry import TelemetryHub
from jetfleet.shared.catalog import Catalog
from jetfleet.shared.convert import catalog_to_pb, mode_to_pb
from jetfleet.shared.proto import common_pb2, operator_pb2

_DEVICES_TAG = b"\x0a"        # ListDevicesResponse.devices: field 1, length-delimited
MAX_SHOWN_MODES = 4096        # (catalog, mode text) pairs kept parsed; more start again


def _varint(n: int) -> bytes:
    """``n`` (>= 0) as a protobuf base-128 varint."""
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# a board's kept bytes: (what its fixed part was built from, the fixed part, the sample it was joined with, the
# response's element without the call's own last-seen time)
_Kept = tuple[tuple[object, ...], bytes, "common_pb2.TelemetrySample | None", bytes]


class DeviceViews:
    """Builds the Device messages of boards (one definition for `devices ls`, `devices show` and a label change's
    answer) and keeps each board's serialized Device for `devices ls`."""

    def __init__(self, registry: Registry, telemetry: TelemetryHub, fleet: FleetCaps, leases: BoardLeases) -> None:
        self.registry, self.telemetry, self.fleet, self.leases = registry, telemetry, fleet, leases
        # a board's current mode as the Device message shows it, by (catalog, mode text): parsed once, not per call;
        # catalogs are kept in the value, so an id is never reused while its entry lives
        self._shown_modes: dict[tuple[int, str], tuple[Catalog, common_pb2.PowerMode, str]] = {}
        self._kept: dict[str, _Kept] = {}   # by board

    def device_pb(self, d: LiveDevice, *, with_catalog: bool = False) -> operator_pb2.Device:
        """A board as the operator API's Device: record, online state, mode, last sample (catalog if asked)."""
        msg = operator_pb2.Device()
        self._fill_fixed(msg, d)
        if d.online:
            msg.last_seen_s = self.registry.wall()
        last = self.telemetry.last(d.record.device_id)
        if last is not None:
            msg.last_telemetry.CopyFrom(last)
        if with_catalog:
            msg.catalog.CopyFrom(catalog_to_pb(d.catalog))
        return msg

    def list_devices(self, model: str = "") -> operator_pb2.ListDevicesResponse:
        """Every known board (of ``model`` if given), by id, as Device messages: each board's kept bytes joined.

        Per board and call: one tuple of what its fixed part is built from, compared with the kept one, and a
        look at its newest sample; bytes are built only for what changed."""
        now = operator_pb2.Device(last_seen_s=self.registry.wall()).SerializeToString()
        holders, labels, last, kept = self.leases.holders(), self.fleet.all_labels(), self.telemetry.last, self._kept
        parts: list[bytes] = []
        for d in self.registry.list(model):
            rec, session = d.record, d.session
            dev, online = rec.device_id, session is not None and not session.closed
            holder = holders.get(dev)
            key = (rec, d.catalog, rec.current_mode, online, None if online else rec.last_seen_s,
                   d.metrics_address if online else "", d.busy if online else "", d.workloads, d.broken_workloads,
                   d.speed, labels.get(dev), str(holder) if holder is not None else "", d.templates,
                   d.template_rules)
            sample = last(dev)
            hit = kept.get(dev)
            if hit is None or hit[0] != key:
                fixed = operator_pb2.Device()
                self._fill_fixed(fixed, d)
                hit = kept[dev] = self._entry(key, fixed.SerializeToString(), sample, len(now) if online else 0)
            elif hit[2] is not sample:
                hit = kept[dev] = self._entry(key, hit[1], sample, len(now) if online else 0)
            parts.append(hit[3])
            if online:
                parts.append(now)
        if len(kept) > len(self.registry.devices):   # forgotten boards: their bytes go
            for gone in set(kept) - set(self.registry.devices):
                del kept[gone]
        return operator_pb2.ListDevicesResponse.FromString(b"".join(parts))

    @staticmethod
    def _entry(key: tuple[object, ...], fixed: bytes, sample: common_pb2.TelemetrySample | None,
               after: int) -> _Kept:
        """A board's element of the response's ``devices`` but the ``after`` bytes the call appends (the online
        board's last-seen time): tag, length, fixed part, newest sample."""
        body = fixed
        if sample is not None:
            msg = operator_pb2.Device()
            msg.last_telemetry.CopyFrom(sample)
            body += msg.SerializeToString()
        return key, fixed, sample, _DEVICES_TAG + _varint(len(body) + after) + body

    def _fill_fixed(self, msg: operator_pb2.Device, d: LiveDevice) -> None:
        """Every field but the online board's last-seen time (the call's time), its sample and its catalog."""
        rec = d.record
        msg.device_id, msg.model, msg.serial, msg.online = rec.device_id, rec.model, rec.serial, d.online
        if not d.online:
            msg.last_seen_s = rec.last_seen_s
        msg.software.update(rec.software)
        msg.emulated, msg.first_seen_s = rec.emulated, rec.first_seen_s
        msg.metrics_address = d.metrics_address if d.online else ""
        msg.workloads.extend(d.workloads)
        msg.broken_workloads.update(d.broken_workloads)
        msg.templates.extend(common_pb2.TemplateInfo(name=k, args=v, arg_rules=d.template_rules.get(k, ()))
                             for k, v in sorted(d.templates.items()))
        msg.speed = d.speed
        if rec.current_mode:
            mode, name = self._shown_mode(d.catalog, rec.current_mode)
            msg.current_mode.CopyFrom(mode)
            msg.current_mode_name = name
        msg.labels.update(self.fleet.all_labels().get(rec.device_id, {}))
        holder = self.leases.holder(rec.device_id)
        msg.held_by = str(holder) if holder is not None else ""
        msg.busy_command = d.busy if d.online else ""

    def _shown_mode(self, catalog: Catalog, text: str) -> tuple[common_pb2.PowerMode, str]:
        """A board's current mode (as its record keeps it) parsed once per (catalog, text): the message and the
        preset's name ('' for none)."""
        key = (id(catalog), text)
        hit = self._shown_modes.get(key)
        if hit is None or hit[0] is not catalog:
            mode = catalog.parse_mode(text)
            if len(self._shown_modes) >= MAX_SHOWN_MODES:
                self._shown_modes.clear()
            hit = self._shown_modes[key] = (catalog, mode_to_pb(mode), catalog.preset_name(mode) or "")
        return hit[1], hit[2]
