"""Redis backend, shared by several controller replicas. Keys under a prefix:
``{p}:device:{id}`` (JSON), ``{p}:devices`` (set), ``{p}:command:{id}`` (JSON, written with NX),
``{p}:events:{device}`` (list, newest first, capped), campaigns, profiles with index sets,
catalogs and documents. A Redis that cannot be reached (down, restarting, loading its
append-only file) raises StoreUnavailable."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import asdict, fields, replace
from typing import Any

import redis

from jetfleet.controller.store.base import (
    MAX_EVENTS_PER_DEVICE,
    CampaignRecord,
    CommandRecord,
    DeviceRecord,
    Event,
    ModeState,
    ProfileRecord,
    RooflineRecord,
    Store,
)
from jetfleet.controller.store.jobs_redis import RedisJobs
from jetfleet.controller.store.raw import raw_from_text, raw_to_text
from jetfleet.controller.store.redis_connect import connect, redacted
from jetfleet.shared.errors import AlreadyExists, InvalidArgument, PermissionDenied, StoreUnavailable

log = logging.getLogger(__name__)
_UNREACHABLE = (redis.ConnectionError, redis.TimeoutError)  # BusyLoadingError is a ConnectionError

# Store a result, mark its campaign mode done (its attempt count kept) and log the command that measured
# it, atomically: one script, one append to the AOF, one fsync. A duplicate result writes only the log entry.
# KEYS: profile, raw, campaign modes hash, command, index sets (model, workload, device, source, all)
# ARGV: profile json, raw text ('' = none), mode, device id, member, command json ('' = none)
_RECORD = """
if ARGV[6] ~= '' then redis.call('SET', KEYS[4], ARGV[6]) end
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
if ARGV[2] ~= '' then redis.call('SET', KEYS[2], ARGV[2]) end
local cur = redis.call('HGET', KEYS[3], ARGV[3])
if cur then
  local state = cjson.decode(cur)
  state['status'] = 'done'
  state['device_id'] = ARGV[4]
  state['error'] = ''
  redis.call('HSET', KEYS[3], ARGV[3], cjson.encode(state))
end
for i = 5, #KEYS do redis.call('SADD', KEYS[i], ARGV[5]) end
return 1
"""
_SUMMARY_FIELDS = tuple(f.name for f in fields(ProfileRecord) if f.name not in ("raw", "raw_pb"))


class RedisStore(RedisJobs, Store):
    """The shared store: keys under ``prefix`` in Redis, for several controller replicas, of which only the leader
    writes (every write is fenced: ``fence``, jetfleet.controller.leader).

    It warns at start when Redis does not fsync every write (appendonly yes, appendfsync always)."""

    def __init__(self, url: str, prefix: str = "jetfleet", *, max_events: int = MAX_EVENTS_PER_DEVICE,
                 timeout_s: float = 5.0) -> None:
        self._url = redacted(url)  # the password (redis://:PASSWORD@HOST) is used to connect, never shown
        self.p = self.check_prefix(prefix)
        self.max_events = max_events
        self.r = connect(url, timeout_s)   # one server, or the master Redis Sentinel names (redis_connect.py)
        self._client_for = lambda t: connect(url, t)
        self._record_script = self.r.register_script(_RECORD)   # EVALSHA: the script is sent once
        d = self.durability()
        if d["appendonly"] != "yes" or d["appendfsync"] != "always":
            log.warning("Redis at %s has appendonly=%s appendfsync=%s: acknowledged writes may be lost in a "
                        "crash; run it with --appendonly yes --appendfsync always", self._url, d["appendonly"],
                        d["appendfsync"])

    @staticmethod
    def check_prefix(prefix: str) -> str:
        """A key prefix: 1..64 letters, digits, '_', '-' or '.' (one lab per prefix)."""
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", prefix):
            raise InvalidArgument(f"store prefix {prefix!r}: expected 1..64 letters, digits, '_', '-' or '.'",
                                  field="store_prefix")
        return prefix

    def client(self, timeout_s: float) -> Any:
        """A client of its own to the same Redis with ``timeout_s`` on every call (the leader lease's)."""
        return self._client_for(timeout_s)

    @property
    def url(self) -> str:
        """The Redis URL it was opened with, its password replaced by ``***``."""
        return self._url

    def durability(self) -> dict[str, str]:
        """appendonly and appendfsync as the server reports them ('unknown' where CONFIG is disabled)."""
        try:
            aof = self._call(self.r.config_get, "appendonly").get("appendonly", "unknown")
            fsync = self._call(self.r.config_get, "appendfsync").get("appendfsync", "unknown")
        except redis.ResponseError:
            aof = fsync = "unknown"  # CONFIG disabled (managed Redis): cannot check
        return {"appendonly": aof, "appendfsync": fsync}

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except redis.AuthenticationError as e:  # a ConnectionError too, but the operator's to fix, not an outage
            raise PermissionDenied(f"Redis at {self._url} refused the store's credentials ({e}): give the password "
                                   "in the store URL, redis://:PASSWORD@HOST:PORT/DB", field="store") from None
        except _UNREACHABLE as e:
            raise StoreUnavailable(f"store unavailable: Redis at {self._url}: {e}", field="store") from None

    def upsert_device(self, rec: DeviceRecord) -> None:
        """Write the record and index it in one MULTI/EXEC, keeping the stored first-seen time (``rec`` is not changed)."""
        key = f"{self.p}:device:{rec.device_id}"
        old = self._call(self.r.get, key)
        if old:
            rec = replace(rec, first_seen_s=json.loads(old)["first_seen_s"])
        doc = json.dumps(asdict(rec))
        self._write(lambda pipe: (pipe.set(key, doc), pipe.sadd(f"{self.p}:devices", rec.device_id)))

    def delete_device(self, device_id: str) -> bool:
        """Delete the record, its index entry and its events in one MULTI/EXEC."""
        return bool(self._write(lambda pipe: (pipe.delete(f"{self.p}:device:{device_id}"),
                                              pipe.srem(f"{self.p}:devices", device_id),
                                              pipe.delete(f"{self.p}:events:{device_id}")))[0])

    def get_device(self, device_id: str) -> DeviceRecord | None:
        """The board's record, or None."""
        raw = self._call(self.r.get, f"{self.p}:device:{device_id}")
        return DeviceRecord(**json.loads(raw)) if raw else None

    def list_devices(self) -> list[DeviceRecord]:
        """Every indexed board's record, by id."""
        ids = sorted(self._call(self.r.smembers, f"{self.p}:devices"))
        if not ids:
            return []
        raws = self._call(self.r.mget, [f"{self.p}:device:{i}" for i in ids])
        return [DeviceRecord(**json.loads(r)) for r in raws if r]

    def insert_command(self, cmd: CommandRecord) -> bool:
        """SET NX: False if the id exists."""
        doc = json.dumps(asdict(cmd))
        return bool(self._write(lambda pipe: pipe.set(f"{self.p}:command:{cmd.command_id}", doc, nx=True))[0])

    def finish_command(self, command_id: str, status: str, result: dict[str, Any], error: dict[str, str],
                       finished_s: float) -> None:
        """Read, update and rewrite the command (not atomic across replicas)."""
        cmd = self.get_command(command_id)
        if cmd is None:
            return
        cmd.status, cmd.result, cmd.error, cmd.finished_s = status, result, error, finished_s
        doc = json.dumps(asdict(cmd))
        self._write(lambda pipe: pipe.set(f"{self.p}:command:{command_id}", doc))

    def get_command(self, command_id: str) -> CommandRecord | None:
        """The command, or None."""
        raw = self._call(self.r.get, f"{self.p}:command:{command_id}")
        return CommandRecord(**json.loads(raw)) if raw else None

    def append_event(self, event: Event) -> None:
        """LPUSH onto the board's list, trimmed to the newest ``max_events`` events."""
        key = f"{self.p}:events:{event.device_id}"
        doc = json.dumps(asdict(event))
        self._write(lambda pipe: (pipe.lpush(key, doc), pipe.ltrim(key, 0, self.max_events - 1)))

    def list_events(self, device_id: str, limit: int = 100) -> list[Event]:
        """The head of the board's list, newest first (none for ``limit`` <= 0)."""
        if limit <= 0:
            return []
        raws = self._call(self.r.lrange, f"{self.p}:events:{device_id}", 0, limit - 1)
        return [Event(**json.loads(r)) for r in raws]

    # --- campaigns and profiles ------------------------------------------------------------------
    def create_campaign(self, rec: CampaignRecord, modes: list[str]) -> None:
        """The campaign, its modes' states and their order in one MULTI/EXEC (modes in chunks of 2000), under
        WATCH of the campaign's key: AlreadyExists if the id is taken (also by a replica meanwhile)."""
        key = f"{self.p}:campaign:{rec.campaign_id}"

        def write(pipe: Any) -> None:
            if pipe.exists(key):
                raise AlreadyExists(f"campaign {rec.campaign_id} exists already", field="campaign_id")
            pipe.multi()
            pipe.set(key, json.dumps(asdict(rec)))
            pipe.sadd(f"{self.p}:campaigns", rec.campaign_id)
            pipe.delete(f"{self.p}:cmodes:{rec.campaign_id}", f"{self.p}:corder:{rec.campaign_id}")
            for chunk in range(0, len(modes), 2000):
                part = modes[chunk:chunk + 2000]
                pipe.hset(f"{self.p}:cmodes:{rec.campaign_id}",
                          mapping={m: json.dumps(asdict(ModeState(m))) for m in part})
                pipe.rpush(f"{self.p}:corder:{rec.campaign_id}", *part)

        self._tx(write, key)

    def get_campaign(self, campaign_id: str) -> CampaignRecord | None:
        """The campaign, or None."""
        raw = self._call(self.r.get, f"{self.p}:campaign:{campaign_id}")
        return CampaignRecord(**json.loads(raw)) if raw else None

    def list_campaigns(self) -> list[CampaignRecord]:
        """Every indexed campaign, by creation time then id."""
        ids = sorted(self._call(self.r.smembers, f"{self.p}:campaigns"))
        raws = self._call(self.r.mget, [f"{self.p}:campaign:{i}" for i in ids]) if ids else []
        return sorted((CampaignRecord(**json.loads(r)) for r in raws if r), key=lambda c: (c.created_s, c.campaign_id))

    def set_campaign_status(self, campaign_id: str, status: str, finished_s: float = 0.0) -> None:
        """Read, update and rewrite the campaign (not atomic across replicas)."""
        rec = self.get_campaign(campaign_id)
        if rec is not None:
            rec.status, rec.finished_s = status, finished_s
            doc = json.dumps(asdict(rec))
            self._write(lambda pipe: pipe.set(f"{self.p}:campaign:{campaign_id}", doc))

    def campaign_modes(self, campaign_id: str) -> list[ModeState]:
        """The modes' states in the campaign's order list."""
        order = self._call(self.r.lrange, f"{self.p}:corder:{campaign_id}", 0, -1)
        states = self._call(self.r.hgetall, f"{self.p}:cmodes:{campaign_id}")
        return [ModeState(**json.loads(states[m])) for m in order if m in states]

    def set_mode_state(self, campaign_id: str, state: ModeState, command: CommandRecord | None = None) -> None:
        """HSET of the mode's state and SET of the command's log entry, in one MULTI/EXEC."""
        key = f"{self.p}:cmodes:{campaign_id}"
        value = json.dumps(asdict(state))
        logged = self._command_json(command) if command is not None else ""

        def queue(pipe: Any) -> None:
            if command is not None:
                pipe.set(f"{self.p}:command:{command.command_id}", logged)
            pipe.hset(key, state.mode, value)

        self._write(queue)

    def _profile_keys(self, rec: ProfileRecord) -> tuple[str, str, str, list[str]]:
        member = f"{rec.source}|{rec.mode}|{rec.observation}"
        idx = [f"{self.p}:pidx:model:{rec.board_model}", f"{self.p}:pidx:workload:{rec.workload}",
               f"{self.p}:pidx:device:{rec.device_id}", f"{self.p}:pidx:source:{rec.source}", f"{self.p}:pidx:all"]
        return member, f"{self.p}:profile:{member}", f"{self.p}:profraw:{member}", idx

    @staticmethod
    def _summary_json(rec: ProfileRecord) -> str:
        """The record without its raw samples (read field by field: ``asdict`` would deep-copy the samples)."""
        return json.dumps({name: getattr(rec, name) for name in _SUMMARY_FIELDS})

    @staticmethod
    def _command_json(cmd: CommandRecord) -> str:
        return json.dumps({"command_id": cmd.command_id, "device_id": cmd.device_id, "kind": cmd.kind,
                           "payload": cmd.payload, "created_s": cmd.created_s, "status": cmd.status,
                           "result": cmd.result, "error": cmd.error, "finished_s": cmd.finished_s})

    def record_result(self, rec: ProfileRecord, command: CommandRecord | None = None) -> bool:
        """One Lua script, so it is atomic and one write: log the command, store and index the result and mark
        its mode done (its attempt count kept), unless the result exists."""
        keys, args = self._record_call(rec.check(), command)
        return bool(self._write(lambda pipe: self._record_script(keys=keys, args=args, client=pipe))[0])

    def record_results(self, items: list[tuple[ProfileRecord, CommandRecord | None]]) -> list[bool]:
        """The Lua script of ``record_result`` once per item, all in one MULTI/EXEC: one write. Redis does not undo
        the scripts before one that fails at run time (its error is raised): the caller may store each alone again,
        a stored one then being a duplicate."""
        calls = [self._record_call(rec.check(), command) for rec, command in items]

        def queue(pipe: Any) -> None:
            for keys, args in calls:
                self._record_script(keys=keys, args=args, client=pipe)

        return [bool(x) for x in self._write(queue)] if calls else []

    def _record_call(self, rec: ProfileRecord, command: CommandRecord | None) -> tuple[list[str], list[str]]:
        """The keys and arguments of the record script for one result."""
        member, key, raw_key, idx = self._profile_keys(rec)
        command_key = f"{self.p}:command:{command.command_id}" if command is not None else key
        keys = [key, raw_key, f"{self.p}:cmodes:{rec.source}", command_key, *idx]
        args = [self._summary_json(rec), raw_to_text(rec.raw, rec.raw_pb), rec.mode, rec.device_id, member,
                self._command_json(command) if command is not None else ""]
        return keys, args

    def import_profiles(self, records: list[ProfileRecord], catalogs: dict[str, dict[str, Any]]) -> int:
        """Catalogs (SET NX: a stored one is kept), rows (SET NX: a stored row is kept) and their index entries
        in one MULTI/EXEC; returns the rows added."""
        for rec in records:
            rec.check()
        slots: list[int] = []

        def queue(pipe: Any) -> None:   # MULTI/EXEC: all or nothing
            slots.clear()                # (queued again if a watched key changed)
            for model, cat in catalogs.items():
                pipe.set(f"{self.p}:catalog:{model}", json.dumps(cat), nx=True)
            for rec in records:
                member, key, raw_key, idx = self._profile_keys(rec)
                slots.append(len(pipe.command_stack))
                pipe.set(key, self._summary_json(rec), nx=True)
                if rec.raw is not None or rec.raw_pb:
                    pipe.set(raw_key, raw_to_text(rec.raw, rec.raw_pb), nx=True)
                for i in idx:
                    pipe.sadd(i, member)

        results = self._write(queue)
        return sum(1 for i in slots if results[i])

    def query_profiles(self, *, board_model: str = "", device_id: str = "", workload: str = "", mode: str = "",
                       source: str = "", with_raw: bool = False) -> list[ProfileRecord]:
        """Intersect the filters' index sets, filter by mode, sort, and fetch in batches of 5000."""
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
                    out.append(ProfileRecord(**json.loads(r), raw=raw_from_text(x)))
        return out

    def has_profiles(self, *, workload: str) -> bool:
        """EXISTS of the workload's index set (a set with no members does not exist)."""
        return bool(self._call(self.r.exists, f"{self.p}:pidx:workload:{workload}"))

    def put_catalog(self, model: str, catalog: dict[str, Any]) -> None:
        """SET of the model's catalog."""
        doc = json.dumps(catalog)
        self._write(lambda pipe: pipe.set(f"{self.p}:catalog:{model}", doc))

    def get_catalog(self, model: str) -> dict[str, Any] | None:
        """The model's catalog, or None."""
        raw = self._call(self.r.get, f"{self.p}:catalog:{model}")
        return json.loads(raw) if raw else None

    def put_roofline(self, rec: RooflineRecord) -> None:
        """HSET of the mode's field in the board model's roofline hash."""
        rec.check()
        doc = json.dumps(asdict(rec))
        self._write(lambda pipe: pipe.hset(f"{self.p}:roofline:{rec.board_model}", rec.mode, doc))

    def get_rooflines(self, board_model: str) -> list[RooflineRecord]:
        """The board model's hash, by mode string."""
        raw = self._call(self.r.hgetall, f"{self.p}:roofline:{board_model}")
        return [RooflineRecord(**json.loads(v)) for _k, v in sorted(raw.items())]

    def put_doc(self, kind: str, doc_id: str, doc: dict[str, Any]) -> None:
        """SET of the document; the sequence number of its first insertion keeps its place in ``list_docs``."""
        text = json.dumps(doc)

        def body(pipe: Any) -> None:
            seq = pipe.incr(f"{self.p}:docseq")  # insertion order (after the fence check); a replaced doc keeps its place
            pipe.multi()
            pipe.set(f"{self.p}:doc:{kind}:{doc_id}", text)
            pipe.zadd(f"{self.p}:docs:{kind}", {doc_id: seq}, nx=True)

        self._tx(body)

    def get_doc(self, kind: str, doc_id: str) -> dict[str, Any] | None:
        """The document, or None."""
        raw = self._call(self.r.get, f"{self.p}:doc:{kind}:{doc_id}")
        return json.loads(raw) if raw else None

    def delete_doc(self, kind: str, doc_id: str) -> bool:
        """Remove a document; False if there was none."""
        removed, _ = self._write(lambda pipe: (pipe.delete(f"{self.p}:doc:{kind}:{doc_id}"),
                                               pipe.zrem(f"{self.p}:docs:{kind}", doc_id)))
        return bool(removed)

    def list_docs(self, kind: str) -> list[dict[str, Any]]:
        """The kind's documents in the order they were first inserted."""
        ids = self._call(self.r.zrange, f"{self.p}:docs:{kind}", 0, -1)
        raws = self._call(self.r.mget, [f"{self.p}:doc:{kind}:{i}" for i in ids]) if ids else []
        return [json.loads(r) for r in raws if r]

    def close(self) -> None:
        """Close the connection pool."""
        self.r.close()
