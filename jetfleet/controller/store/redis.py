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

from jetfleet.controller.store.base import CommandRecord, DeviceRecord, Event, Store
from jetfleet.shared.errors import InvalidArgument, Unavailable

log = logging.getLogger(__name__)
MAX_EVENTS_PER_DEVICE = 10_000


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

    def close(self) -> None:
        self.r.close()
