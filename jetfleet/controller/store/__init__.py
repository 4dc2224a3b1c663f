"""``open_store``: a data directory path means SQLite (the embedded default), redis:// means Redis."""

from __future__ import annotations

from pathlib import Path

from jetfleet.controller.store.base import CommandRecord, DeviceRecord, Event, Store

__all__ = ["CommandRecord", "DeviceRecord", "Event", "Store", "open_store"]


def open_store(spec: str | Path) -> Store:
    text = str(spec)
    if text.startswith("redis://"):
        from jetfleet.controller.store.redis import RedisStore

        return RedisStore(text)
    from jetfleet.controller.store.sqlite import SqliteStore

    return SqliteStore(Path(text).expanduser())
