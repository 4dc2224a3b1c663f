"""``open_store``: a data directory path means SQLite (the embedded default), redis:// means Redis."""

from __future__ import annotations

from pathlib import Path

from jetfleet.controller.store.base import (
    MAX_EVENTS_PER_DEVICE,
    CampaignRecord,
    CommandRecord,
    DeviceRecord,
    Event,
    JobRecord,
    ModeState,
    ProfileRecord,
    RooflineRecord,
    Store,
)

__all__ = ["CampaignRecord", "CommandRecord", "DeviceRecord", "Event", "JobRecord", "ModeState", "ProfileRecord",
           "RooflineRecord", "Store", "open_store"]


def open_store(spec: str | Path, *, max_events: int = MAX_EVENTS_PER_DEVICE, prefix: str = "jetfleet") -> Store:
    """The store ``spec`` names: redis://HOST:PORT/DB opens Redis, redis+sentinel://HOST:PORT,.../MASTER the master
    Redis Sentinel names, anything else is a SQLite data directory.

    ``max_events``: events kept per board (the oldest go first). ``prefix``: Redis's key prefix (one lab each:
    controllers on one prefix elect one leader; on another prefix they are another lab)."""
    text = str(spec)
    if text.startswith(("redis://", "redis+sentinel://")):
        from jetfleet.controller.store.redis import RedisStore

        return RedisStore(text, prefix, max_events=max_events)
    from jetfleet.controller.store.sqlite import SqliteStore

    return SqliteStore(Path(text).expanduser(), max_events=max_events)
