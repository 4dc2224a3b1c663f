"""``open_store``: a data directory path means SQLite (the embedded default), redis:// means Redis."""

from __future__ import annotations

from pathlib import Path

from jetfleet.controller.store.base import (
    CampaignRecord,
    CommandRecord,
    DeviceRecord,
    Event,
    ModeState,
    ProfileRecord,
    Store,
)

__all__ = ["CampaignRecord", "CommandRecord", "DeviceRecord", "Event", "ModeState", "ProfileRecord", "Store",
           "open_store"]


def open_store(spec: str | Path) -> Store:
    text = str(spec)
    if text.startswith("redis://"):
        from jetfleet.controller.store.redis import RedisStore

        return RedisStore(text)
    from jetfleet.controller.store.sqlite import SqliteStore

    return SqliteStore(Path(text).expanduser())
