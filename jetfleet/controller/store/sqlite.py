"""SQLite backend: one file in the data directory, WAL journal, synchronous=FULL."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from jetfleet.controller.store.base import CommandRecord, DeviceRecord, Event, Store

SCHEMA = """
CREATE TABLE IF NOT EXISTS devices (
  device_id TEXT PRIMARY KEY, model TEXT NOT NULL, serial TEXT NOT NULL, software TEXT NOT NULL,
  catalog TEXT NOT NULL, emulated INTEGER NOT NULL, current_mode TEXT NOT NULL,
  first_seen_s REAL NOT NULL, last_seen_s REAL NOT NULL);
CREATE TABLE IF NOT EXISTS commands (
  command_id TEXT PRIMARY KEY, device_id TEXT NOT NULL, kind TEXT NOT NULL, payload TEXT NOT NULL,
  created_s REAL NOT NULL, status TEXT NOT NULL, result TEXT NOT NULL, error TEXT NOT NULL,
  finished_s REAL NOT NULL);
CREATE TABLE IF NOT EXISTS events (
  id INTEGER PRIMARY KEY AUTOINCREMENT, device_id TEXT NOT NULL, t_s REAL NOT NULL, kind TEXT NOT NULL,
  detail TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS events_by_device ON events (device_id, id);
"""


class SqliteStore(Store):
    def __init__(self, data_dir: Path | str) -> None:
        self.path = Path(data_dir) / "jetfleet.db"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(SCHEMA)

    @property
    def url(self) -> str:
        return str(self.path)

    def _exec(self, sql: str, args: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        with self._lock:
            return self._db.execute(sql, args)

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def upsert_device(self, rec: DeviceRecord) -> None:
        self._exec("INSERT INTO devices VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT(device_id) DO UPDATE SET "
                   "model=excluded.model, serial=excluded.serial, software=excluded.software, "
                   "catalog=excluded.catalog, emulated=excluded.emulated, current_mode=excluded.current_mode, "
                   "last_seen_s=excluded.last_seen_s",
                   (rec.device_id, rec.model, rec.serial, json.dumps(rec.software), json.dumps(rec.catalog),
                    int(rec.emulated), rec.current_mode, rec.first_seen_s, rec.last_seen_s))

    @staticmethod
    def _device(row: tuple[Any, ...]) -> DeviceRecord:
        return DeviceRecord(row[0], row[1], row[2], json.loads(row[3]), json.loads(row[4]), bool(row[5]),
                            row[6], row[7], row[8])

    def get_device(self, device_id: str) -> DeviceRecord | None:
        rows = self._rows("SELECT * FROM devices WHERE device_id=?", (device_id,))
        return self._device(rows[0]) if rows else None

    def list_devices(self) -> list[DeviceRecord]:
        return [self._device(r) for r in self._rows("SELECT * FROM devices ORDER BY device_id")]

    def insert_command(self, cmd: CommandRecord) -> bool:
        cur = self._exec("INSERT OR IGNORE INTO commands VALUES (?,?,?,?,?,?,?,?,?)",
                         (cmd.command_id, cmd.device_id, cmd.kind, json.dumps(cmd.payload), cmd.created_s,
                          cmd.status, json.dumps(cmd.result), json.dumps(cmd.error), cmd.finished_s))
        return cur.rowcount == 1

    def finish_command(self, command_id: str, status: str, result: dict[str, Any], error: dict[str, str],
                       finished_s: float) -> None:
        self._exec("UPDATE commands SET status=?, result=?, error=?, finished_s=? WHERE command_id=?",
                   (status, json.dumps(result), json.dumps(error), finished_s, command_id))

    def get_command(self, command_id: str) -> CommandRecord | None:
        rows = self._rows("SELECT * FROM commands WHERE command_id=?", (command_id,))
        if not rows:
            return None
        r = rows[0]
        return CommandRecord(r[0], r[1], r[2], json.loads(r[3]), r[4], r[5], json.loads(r[6]), json.loads(r[7]), r[8])

    def append_event(self, event: Event) -> None:
        self._exec("INSERT INTO events (device_id, t_s, kind, detail) VALUES (?,?,?,?)",
                   (event.device_id, event.t_s, event.kind, event.detail))

    def list_events(self, device_id: str, limit: int = 100) -> list[Event]:
        rows = self._rows("SELECT device_id, t_s, kind, detail FROM events WHERE device_id=? ORDER BY id DESC LIMIT ?",
                          (device_id, limit))
        return [Event(*r) for r in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()
