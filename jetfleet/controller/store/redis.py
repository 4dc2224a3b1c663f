"""Redis backend, shared by several controller replicas. Keys under a prefix:
``{p}:device:{id}`` (JSON), ``{p}:devices`` (set), ``{p}:command:{id}`` (JSON, written with NX),
``{p}:events:{device}`` (list, newest first, capped)."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from typing import Any
from urllib.parse import urlparse

import redis

from jetfleet.controller.store.base import (
    CampaignRecord,
    CommandRecord,
    DeviceRecord,
    Event,
    ModeState,
    ProfileRecord,
    Store,
)
from jetfleet.shared.errors import InvalidArgument, Unavailable

log = logging.getLogger(__name__)
MAX_EVENTS_PER_DEVICE = 10_000

# Store a result and mark its campaign mode done, atomically; refuse a duplicate.
# KEYS: profile, raw, campaign modes hash, index sets (model, workload, device, source)
# ARGV: profile json, raw json ('' = none), mode, mode state json, member
_RECORD = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
if ARGV[2] ~= '' then redis.call('SET', KEYS[2], ARGV[2]) end
if redis.call('HEXISTS', KEYS[3], ARGV[3]) == 1 then redis.call('HSET', KEYS[3], ARGV[3], ARGV[4]) end
for i = 4, #KEYS do redis.call('SADD', KEYS[i], ARGV[5]) end
return 1
"""


class RedisStore(Store):
    def __init__(self, url: str, prefix: str = "jetfleet") -> None:
        parsed = urlparse(url)
        if parsed.scheme != "redis" or not parsed.hostname:
            raise InvalidArgument(f"store {url!r}: expected redis://HOST:PORT/DB", field="store")
        self._url = url
        self.p = prefix
        self.r = redis.Redis.from_url(url, decode_responses=True, socket_timeout=10)
        try:
            aof = self.r.config_get("appendonly").get("appendonly")
            fsync = self.r.config_get("appendfsync").get("appendfsync")
        except redis.ConnectionError as e:
            raise Unavailable(f"cannot reach Redis at {url}: {e}", field="store") from None
        except redis.ResponseError:
            aof = fsync = "unknown"  # CONFIG disabled (managed Redis): cannot check
        if aof != "yes" or fsync != "always":
            log.warning("Redis at %s has appendonly=%s appendfsync=%s: acknowledged writes may be lost in a "
                        "crash; run it with --appendonly yes --appendfsync always", url, aof, fsync)

    @property
    def url(self) -> str:
        return self._url

    def _call(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except redis.ConnectionError as e:
            raise Unavailable(f"Redis at {self._url} is unreachable: {e}", field="store") from None

    def upsert_device(self, rec: DeviceRecord) -> None:
        key = f"{self.p}:device:{rec.device_id}"
        old = self._call(self.r.get, key)
        if old:
            rec.first_seen_s = json.loads(old)["first_seen_s"]
        pipe = self.r.pipeline(transaction=True)
        pipe.set(key, json.dumps(asdict(rec)))
        pipe.sadd(f"{self.p}:devices", rec.device_id)
        self._call(pipe.execute)

    def get_device(self, device_id: str) -> DeviceRecord | None:
        raw = self._call(self.r.get, f"{self.p}:device:{device_id}")
        return DeviceRecord(**json.loads(raw)) if raw else None

    def list_devices(self) -> list[DeviceRecord]:
        ids = sorted(self._call(self.r.smembers, f"{self.p}:devices"))
        if not ids:
            return []
        raws = self._call(self.r.mget, [f"{self.p}:device:{i}" for i in ids])
        return [DeviceRecord(**json.loads(r)) for r in raws if r]

    def insert_command(self, cmd: CommandRecord) -> bool:
        return bool(self._call(self.r.set, f"{self.p}:command:{cmd.command_id}", json.dumps(asdict(cmd)), None,
                               None, True))

    def finish_command(self, command_id: str, status: str, result: dict[str, Any], error: dict[str, str],
                       finished_s: float) -> None:
        cmd = self.get_command(command_id)
        if cmd is None:
            return
        cmd.status, cmd.result, cmd.error, cmd.finished_s = status, result, error, finished_s
        self._call(self.r.set, f"{self.p}:command:{command_id}", json.dumps(asdict(cmd)))

    def get_command(self, command_id: str) -> CommandRecord | None:
        raw = self._call(self.r.get, f"{self.p}:command:{command_id}")
        return CommandRecord(**json.loads(raw)) if raw else None

    def append_event(self, event: Event) -> None:
        key = f"{self.p}:events:{event.device_id}"
        pipe = self.r.pipeline(transaction=True)
        pipe.lpush(key, json.dumps(asdict(event)))
        pipe.ltrim(key, 0, MAX_EVENTS_PER_DEVICE - 1)
        self._call(pipe.execute)

    def list_events(self, device_id: str, limit: int = 100) -> list[Event]:
        raws = self._call(self.r.lrange, f"{self.p}:events:{device_id}", 0, limit - 1)
        return [Event(**json.loads(r)) for r in raws]

    # --- campaigns and profiles ------------------------------------------------------------------
    def create_campaign(self, rec: CampaignRecord, modes: list[str]) -> None:
        pipe = self.r.pipeline(transaction=True)
        pipe.set(f"{self.p}:campaign:{rec.campaign_id}", json.dumps(asdict(rec)))
        pipe.sadd(f"{self.p}:campaigns", rec.campaign_id)
        pipe.delete(f"{self.p}:cmodes:{rec.campaign_id}", f"{self.p}:corder:{rec.campaign_id}")
        for chunk in range(0, len(modes), 2000):
            part = modes[chunk:chunk + 2000]
            pipe.hset(f"{self.p}:cmodes:{rec.campaign_id}", mapping={m: json.dumps(asdict(ModeState(m))) for m in part})
            pipe.rpush(f"{self.p}:corder:{rec.campaign_id}", *part)
        self._call(pipe.execute)

    def get_campaign(self, campaign_id: str) -> CampaignRecord | None:
        raw = self._call(self.r.get, f"{self.p}:campaign:{campaign_id}")
        return CampaignRecord(**json.loads(raw)) if raw else None

    def list_campaigns(self) -> list[CampaignRecord]:
        ids = sorted(self._call(self.r.smembers, f"{self.p}:campaigns"))
        raws = self._call(self.r.mget, [f"{self.p}:campaign:{i}" for i in ids]) if ids else []
        return sorted((CampaignRecord(**json.loads(r)) for r in raws if r), key=lambda c: (c.created_s, c.campaign_id))

    def set_campaign_status(self, campaign_id: str, status: str, finished_s: float = 0.0) -> None:
        rec = self.get_campaign(campaign_id)
        if rec is not None:
            rec.status, rec.finished_s = status, finished_s
            self._call(self.r.set, f"{self.p}:campaign:{campaign_id}", json.dumps(asdict(rec)))

    def campaign_modes(self, campaign_id: str) -> list[ModeState]:
        order = self._call(self.r.lrange, f"{self.p}:corder:{campaign_id}", 0, -1)
        states = self._call(self.r.hgetall, f"{self.p}:cmodes:{campaign_id}")
        return [ModeState(**json.loads(states[m])) for m in order if m in states]

    def set_mode_state(self, campaign_id: str, state: ModeState) -> None:
        self._call(self.r.hset, f"{self.p}:cmodes:{campaign_id}", state.mode, json.dumps(asdict(state)))

    def _profile_keys(self, rec: ProfileRecord) -> tuple[str, str, str, list[str]]:
        member = f"{rec.source}|{rec.mode}|{rec.observation}"
        idx = [f"{self.p}:pidx:model:{rec.board_model}", f"{self.p}:pidx:workload:{rec.workload}",
               f"{self.p}:pidx:device:{rec.device_id}", f"{self.p}:pidx:source:{rec.source}", f"{self.p}:pidx:all"]
        return member, f"{self.p}:profile:{member}", f"{self.p}:profraw:{member}", idx

    @staticmethod
    def _summary_json(rec: ProfileRecord) -> str:
        d = asdict(rec)
        d.pop("raw")
        return json.dumps(d)

    def record_result(self, rec: ProfileRecord) -> bool:
        member, key, raw_key, idx = self._profile_keys(rec)
        state = json.dumps(asdict(ModeState(rec.mode, "done", 0, rec.device_id)))
        cm = self._call(self.r.hget, f"{self.p}:cmodes:{rec.source}", rec.mode)
        if cm:  # keep the attempt count
            state = json.dumps({**json.loads(cm), "status": "done", "device_id": rec.device_id, "error": ""})
        ok = self._call(self.r.eval, _RECORD, 3 + len(idx), key, raw_key, f"{self.p}:cmodes:{rec.source}", *idx,
                        self._summary_json(rec), json.dumps(rec.raw) if rec.raw is not None else "", rec.mode, state,
                        member)
        return bool(ok)

    def import_profiles(self, records: list[ProfileRecord], catalogs: dict[str, dict[str, Any]]) -> None:
        pipe = self.r.pipeline(transaction=True)  # MULTI/EXEC: all or nothing
        for model, cat in catalogs.items():
            pipe.set(f"{self.p}:catalog:{model}", json.dumps(cat))
        for rec in records:
            member, key, raw_key, idx = self._profile_keys(rec)
            pipe.set(key, self._summary_json(rec))
            if rec.raw is not None:
                pipe.set(raw_key, json.dumps(rec.raw))
            for i in idx:
                pipe.sadd(i, member)
        self._call(pipe.execute)

    def query_profiles(self, *, board_model: str = "", device_id: str = "", workload: str = "", mode: str = "",
                       source: str = "", with_raw: bool = False) -> list[ProfileRecord]:
        sets = [f"{self.p}:pidx:{k}:{v}" for k, v in (("model", board_model), ("workload", workload),
                                                     ("device", device_id), ("source", source)) if v]
        members = self._call(self.r.sinter, sets) if sets else self._call(self.r.smembers, f"{self.p}:pidx:all")
        if mode:
            members = {m for m in members if m.split("|")[1] == mode}
        ordered = sorted(members, key=lambda m: (m.split("|")[0], m.split("|")[1], int(m.split("|")[2])))
        out: list[ProfileRecord] = []
        for start in range(0, len(ordered), 5000):
            part = ordered[start:start + 5000]
            raws = self._call(self.r.mget, [f"{self.p}:profile:{m}" for m in part])
            extra = self._call(self.r.mget, [f"{self.p}:profraw:{m}" for m in part]) if with_raw else [None] * len(part)
            for r, x in zip(raws, extra, strict=True):
                if r:
                    out.append(ProfileRecord(**json.loads(r), raw=json.loads(x) if x else None))
        return out

    def put_catalog(self, model: str, catalog: dict[str, Any]) -> None:
        self._call(self.r.set, f"{self.p}:catalog:{model}", json.dumps(catalog))

    def get_catalog(self, model: str) -> dict[str, Any] | None:
        raw = self._call(self.r.get, f"{self.p}:catalog:{model}")
        return json.loads(raw) if raw else None

    def put_doc(self, kind: str, doc_id: str, doc: dict[str, Any]) -> None:
        seq = self._call(self.r.incr, f"{self.p}:docseq")  # insertion order; a replaced doc keeps its place
        pipe = self.r.pipeline(transaction=True)
        pipe.set(f"{self.p}:doc:{kind}:{doc_id}", json.dumps(doc))
        pipe.zadd(f"{self.p}:docs:{kind}", {doc_id: seq}, nx=True)
        self._call(pipe.execute)

    def get_doc(self, kind: str, doc_id: str) -> dict[str, Any] | None:
        raw = self._call(self.r.get, f"{self.p}:doc:{kind}:{doc_id}")
        return json.loads(raw) if raw else None

    def list_docs(self, kind: str) -> list[dict[str, Any]]:
        ids = self._call(self.r.zrange, f"{self.p}:docs:{kind}", 0, -1)
        raws = self._call(self.r.mget, [f"{self.p}:doc:{kind}:{i}" for i in ids]) if ids else []
        return [json.loads(r) for r in raws if r]

    def close(self) -> None:
        self.r.close()
