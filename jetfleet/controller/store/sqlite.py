"""SQLite backend: one file in the data directory, WAL journal, synchronous=FULL."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

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
from jetfleet.controller.store.jobs_sqlite import JOBS_SCHEMA, SqliteJobs
from jetfleet.controller.store.raw import raw_from_column
from jetfleet.shared.errors import AlreadyExists, StoreDamaged, StoreUnavailable

ROOFLINES_SCHEMA = """
CREATE TABLE IF NOT EXISTS rooflines (
  board_model TEXT NOT NULL, mode TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (board_model, mode));
"""
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
CREATE TABLE IF NOT EXISTS campaigns (
  campaign_id TEXT PRIMARY KEY, workload TEXT NOT NULL, target_device TEXT NOT NULL, target_model TEXT NOT NULL,
  modes_spec TEXT NOT NULL, minibatches INTEGER NOT NULL, created_s REAL NOT NULL, status TEXT NOT NULL,
  finished_s REAL NOT NULL, seed INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS campaign_modes (
  campaign_id TEXT NOT NULL, position INTEGER NOT NULL, mode TEXT NOT NULL, status TEXT NOT NULL,
  attempts INTEGER NOT NULL, device_id TEXT NOT NULL, error TEXT NOT NULL,
  PRIMARY KEY (campaign_id, mode));
CREATE TABLE IF NOT EXISTS profiles (
  source TEXT NOT NULL, mode TEXT NOT NULL, observation INTEGER NOT NULL, board_model TEXT NOT NULL,
  device_id TEXT NOT NULL, workload TEXT NOT NULL, minibatch_time_ms REAL NOT NULL, power_w REAL NOT NULL,
  observed_at REAL NOT NULL, minibatch_time_mean_ms REAL, energy_j REAL, power_samples INTEGER NOT NULL,
  steady_state_found INTEGER NOT NULL, raw TEXT,
  PRIMARY KEY (source, mode, observation));
CREATE INDEX IF NOT EXISTS profiles_by_model ON profiles (board_model, workload);
CREATE TABLE IF NOT EXISTS catalogs (model TEXT PRIMARY KEY, catalog TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS docs (seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, doc_id TEXT NOT NULL,
  doc TEXT NOT NULL, UNIQUE (kind, doc_id));
"""
PROFILE_COLS = ("source, mode, observation, board_model, device_id, workload, minibatch_time_ms, power_w, observed_at, "
                "minibatch_time_mean_ms, energy_j, power_samples, steady_state_found")


class SqliteStore(SqliteJobs, Store):
    """The embedded store: one SQLite file, ``jetfleet.db``, in the data directory; one lock serialises every call."""

    def __init__(self, data_dir: Path | str, *, max_events: int = MAX_EVENTS_PER_DEVICE) -> None:
        self.path = Path(data_dir) / "jetfleet.db"
        self.max_events = max_events
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        except (OSError, sqlite3.Error) as e:
            raise StoreUnavailable(f"store unavailable: cannot open {self.path}: {e}", field="store") from None
        self._lock = threading.Lock()
        try:
            with self._locked():
                self._check_integrity()
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=FULL")
                self._db.executescript(SCHEMA + JOBS_SCHEMA + ROOFLINES_SCHEMA)
        except sqlite3.DatabaseError as e:   # not a database at all: "file is not a database"
            self._db.close()
            raise self._damaged(str(e)) from None
        except StoreDamaged:
            self._db.close()
            raise

    def _check_integrity(self) -> None:
        """SQLite's quick_check over the whole file (every page and row, not the indexes' contents), before the
        controller serves anything from it: a damaged file would otherwise start "listening" and answer every call
        with an internal error. StoreDamaged naming the file and what to do."""
        problems = [r[0] for r in self._db.execute("PRAGMA quick_check(5)").fetchall()]
        if problems != ["ok"]:
            raise self._damaged("; ".join(str(p) for p in problems))

    def _damaged(self, detail: str) -> StoreDamaged:
        p = self.path
        return StoreDamaged(f"store {p} is damaged ({detail[:300]}); the controller does not start on it. Stop "
                            f"everything using it, keep a copy, then recover what it holds (sqlite3 {p} .recover | "
                            f"sqlite3 {p.parent}/recovered.db, and move recovered.db to {p.name}) or restore a backup",
                            field="store")

    @property
    def url(self) -> str:
        """The database file's path."""
        return str(self.path)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the lock; a database that cannot be read or written (locked, disk full, I/O error) is unavailable."""
        with self._lock:
            try:
                yield
            except sqlite3.OperationalError as e:
                raise StoreUnavailable(f"store unavailable: {self.path}: {e}", field="store") from None

    def _exec(self, sql: str, args: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        with self._locked():
            return self._db.execute(sql, args)

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._locked():
            return self._db.execute(sql, args).fetchall()

    def durability(self) -> dict[str, str]:
        """The connection's journal mode and synchronous level (FULL = 2) as SQLite reports them."""
        levels = {0: "off", 1: "normal", 2: "full", 3: "extra"}
        with self._locked():
            journal = self._db.execute("PRAGMA journal_mode").fetchone()[0]
            sync = self._db.execute("PRAGMA synchronous").fetchone()[0]
        return {"journal_mode": str(journal).lower(), "synchronous": levels.get(int(sync), str(sync))}

    def upsert_device(self, rec: DeviceRecord) -> None:
        """One INSERT ... ON CONFLICT that leaves ``first_seen_s`` as stored."""
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

    def delete_device(self, device_id: str) -> bool:
        """Delete the board's row and its events in one transaction."""
        with self._locked(), self._db:
            self._db.execute("BEGIN")
            cur = self._db.execute("DELETE FROM devices WHERE device_id=?", (device_id,))
            self._db.execute("DELETE FROM events WHERE device_id=?", (device_id,))
            return cur.rowcount == 1

    def get_device(self, device_id: str) -> DeviceRecord | None:
        """The board's row, or None."""
        rows = self._rows("SELECT * FROM devices WHERE device_id=?", (device_id,))
        return self._device(rows[0]) if rows else None

    def list_devices(self) -> list[DeviceRecord]:
        """Every board's row, by id."""
        return [self._device(r) for r in self._rows("SELECT * FROM devices ORDER BY device_id")]

    @staticmethod
    def _command_row(cmd: CommandRecord) -> tuple[Any, ...]:
        return (cmd.command_id, cmd.device_id, cmd.kind, json.dumps(cmd.payload), cmd.created_s, cmd.status,
                json.dumps(cmd.result), json.dumps(cmd.error), cmd.finished_s)

    # A command logged with its outcome: the newest entry of an id replaces an older one (a resent command's).
    _LOG_COMMAND = "INSERT OR REPLACE INTO commands VALUES (?,?,?,?,?,?,?,?,?)"

    def insert_command(self, cmd: CommandRecord) -> bool:
        """INSERT OR IGNORE: False if the id exists."""
        cur = self._exec("INSERT OR IGNORE INTO commands VALUES (?,?,?,?,?,?,?,?,?)", self._command_row(cmd))
        return cur.rowcount == 1

    def finish_command(self, command_id: str, status: str, result: dict[str, Any], error: dict[str, str],
                       finished_s: float) -> None:
        """One UPDATE of the command's row."""
        self._exec("UPDATE commands SET status=?, result=?, error=?, finished_s=? WHERE command_id=?",
                   (status, json.dumps(result), json.dumps(error), finished_s, command_id))

    def get_command(self, command_id: str) -> CommandRecord | None:
        """The command's row, or None."""
        rows = self._rows("SELECT * FROM commands WHERE command_id=?", (command_id,))
        if not rows:
            return None
        r = rows[0]
        return CommandRecord(r[0], r[1], r[2], json.loads(r[3]), r[4], r[5], json.loads(r[6]), json.loads(r[7]), r[8])

    def append_event(self, event: Event) -> None:
        """Append an event row and drop the board's rows beyond the newest ``max_events``, in one transaction."""
        with self._locked(), self._db:
            self._db.execute("BEGIN")
            self._db.execute("INSERT INTO events (device_id, t_s, kind, detail) VALUES (?,?,?,?)",
                             (event.device_id, event.t_s, event.kind, event.detail))
            oldest = self._db.execute("SELECT id FROM events WHERE device_id=? ORDER BY id DESC LIMIT 1 OFFSET ?",
                                      (event.device_id, self.max_events)).fetchone()
            if oldest is not None:
                self._db.execute("DELETE FROM events WHERE device_id=? AND id<=?", (event.device_id, oldest[0]))

    def list_events(self, device_id: str, limit: int = 100) -> list[Event]:
        """The board's last ``limit`` event rows, newest first (none for ``limit`` <= 0)."""
        if limit <= 0:
            return []
        rows = self._rows("SELECT device_id, t_s, kind, detail FROM events WHERE device_id=? ORDER BY id DESC LIMIT ?",
                          (device_id, limit))
        return [Event(*r) for r in rows]

    # --- campaigns and profiles ------------------------------------------------------------------
    def create_campaign(self, rec: CampaignRecord, modes: list[str]) -> None:
        """The campaign's row and its modes' rows in one transaction; AlreadyExists if the id is taken."""
        with self._locked():
            with self._db:  # one transaction
                self._db.execute("BEGIN")
                cur = self._db.execute("INSERT INTO campaigns VALUES (?,?,?,?,?,?,?,?,?,?) "
                                       "ON CONFLICT(campaign_id) DO NOTHING",
                                       (rec.campaign_id, rec.workload, rec.target_device, rec.target_model,
                                        rec.modes_spec, rec.minibatches, rec.created_s, rec.status, rec.finished_s,
                                        rec.seed))
                if cur.rowcount != 1:
                    raise AlreadyExists(f"campaign {rec.campaign_id} exists already", field="campaign_id")
                self._db.executemany("INSERT INTO campaign_modes VALUES (?,?,?,'pending',0,'','')",
                                     [(rec.campaign_id, i, m) for i, m in enumerate(modes)])

    @staticmethod
    def _campaign(r: tuple[Any, ...]) -> CampaignRecord:
        return CampaignRecord(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9])

    def get_campaign(self, campaign_id: str) -> CampaignRecord | None:
        """The campaign's row, or None."""
        rows = self._rows("SELECT * FROM campaigns WHERE campaign_id=?", (campaign_id,))
        return self._campaign(rows[0]) if rows else None

    def list_campaigns(self) -> list[CampaignRecord]:
        """Every campaign's row, by creation time then id."""
        return [self._campaign(r) for r in self._rows("SELECT * FROM campaigns ORDER BY created_s, campaign_id")]

    def set_campaign_status(self, campaign_id: str, status: str, finished_s: float = 0.0) -> None:
        """One UPDATE of the campaign's status and finish time."""
        self._exec("UPDATE campaigns SET status=?, finished_s=? WHERE campaign_id=?", (status, finished_s, campaign_id))

    def campaign_modes(self, campaign_id: str) -> list[ModeState]:
        """The campaign's mode rows, by position."""
        rows = self._rows("SELECT mode, status, attempts, device_id, error FROM campaign_modes WHERE campaign_id=? "
                          "ORDER BY position", (campaign_id,))
        return [ModeState(*r) for r in rows]

    def set_mode_state(self, campaign_id: str, state: ModeState, command: CommandRecord | None = None) -> None:
        """One UPDATE of the mode's row (a mode the campaign does not have is ignored) and the command's log
        entry, in one transaction."""
        with self._locked(), self._db:
            self._db.execute("BEGIN")
            if command is not None:
                self._db.execute(self._LOG_COMMAND, self._command_row(command))
            self._db.execute("UPDATE campaign_modes SET status=?, attempts=?, device_id=?, error=? "
                             "WHERE campaign_id=? AND mode=?",
                             (state.status, state.attempts, state.device_id, state.error, campaign_id, state.mode))

    @staticmethod
    def _profile_row(p: ProfileRecord) -> tuple[Any, ...]:
        # A campaign's samples go in as the board's serialized result (a BLOB); imported ones as JSON text.
        raw: bytes | str | None = p.raw_pb or (json.dumps(p.raw) if p.raw is not None else None)
        return (p.source, p.mode, p.observation, p.board_model, p.device_id, p.workload, p.minibatch_time_ms,
                p.power_w, p.observed_at, p.minibatch_time_mean_ms, p.energy_j, p.power_samples,
                int(p.steady_state_found), raw)

    _INSERT_PROFILE = (f"INSERT INTO profiles ({PROFILE_COLS}, raw) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?) "
                       "ON CONFLICT(source, mode, observation) DO NOTHING")

    def record_result(self, rec: ProfileRecord, command: CommandRecord | None = None) -> bool:
        """Log the command, insert the profile (a key conflict only is a duplicate; any other failure raises)
        and mark its mode done, in one transaction: one commit, one fsync."""
        row = self._profile_row(rec.check())
        with self._locked():
            with self._db:
                self._db.execute("BEGIN")
                if command is not None:
                    self._db.execute(self._LOG_COMMAND, self._command_row(command))
                cur = self._db.execute(self._INSERT_PROFILE, row)
                if cur.rowcount != 1:
                    return False
                self._db.execute("UPDATE campaign_modes SET status='done', device_id=?, error='' "
                                 "WHERE campaign_id=? AND mode=?", (rec.device_id, rec.source, rec.mode))
                return True

    def record_results(self, items: list[tuple[ProfileRecord, CommandRecord | None]]) -> list[bool]:
        """``record_result`` of each item in one transaction: one commit, one fsync for them all."""
        rows = [(self._profile_row(rec.check()), rec, command) for rec, command in items]
        out: list[bool] = []
        with self._locked():
            with self._db:
                self._db.execute("BEGIN")
                for row, rec, command in rows:
                    if command is not None:
                        self._db.execute(self._LOG_COMMAND, self._command_row(command))
                    if self._db.execute(self._INSERT_PROFILE, row).rowcount != 1:
                        out.append(False)
                        continue
                    self._db.execute("UPDATE campaign_modes SET status='done', device_id=?, error='' "
                                     "WHERE campaign_id=? AND mode=?", (rec.device_id, rec.source, rec.mode))
                    out.append(True)
        return out

    def import_profiles(self, records: list[ProfileRecord], catalogs: dict[str, dict[str, Any]]) -> int:
        """Catalogs of models without one and the rows not stored yet, in one transaction; returns rows added."""
        rows = [self._profile_row(r.check()) for r in records]
        with self._locked():
            with self._db:
                self._db.execute("BEGIN")
                self._db.executemany("INSERT INTO catalogs VALUES (?,?) ON CONFLICT(model) DO NOTHING",
                                     [(m, json.dumps(c)) for m, c in catalogs.items()])
                cur = self._db.executemany(self._INSERT_PROFILE, rows)  # rowcount sums the rows inserted
                return max(0, cur.rowcount)

    def query_profiles(self, *, board_model: str = "", device_id: str = "", workload: str = "", mode: str = "",
                       source: str = "", with_raw: bool = False) -> list[ProfileRecord]:
        """One SELECT with the given filters."""
        where, args = [], []
        for col, val in (("board_model", board_model), ("device_id", device_id), ("workload", workload),
                         ("mode", mode), ("source", source)):
            if val:
                where.append(f"{col}=?")
                args.append(val)
        sql = f"SELECT {PROFILE_COLS}{', raw' if with_raw else ''} FROM profiles"
        sql += (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY source, mode, observation"
        out = []
        for r in self._rows(sql, tuple(args)):
            raw = raw_from_column(r[13]) if with_raw else None
            out.append(ProfileRecord(*r[:12], bool(r[12]), raw))  # type: ignore[arg-type, call-arg]
        return out

    def has_profiles(self, *, workload: str) -> bool:
        """One SELECT ... LIMIT 1."""
        return bool(self._rows("SELECT 1 FROM profiles WHERE workload=? LIMIT 1", (workload,)))

    def put_catalog(self, model: str, catalog: dict[str, Any]) -> None:
        """INSERT OR REPLACE of the model's catalog."""
        self._exec("INSERT OR REPLACE INTO catalogs VALUES (?,?)", (model, json.dumps(catalog)))

    def get_catalog(self, model: str) -> dict[str, Any] | None:
        """The model's catalog, or None."""
        rows = self._rows("SELECT catalog FROM catalogs WHERE model=?", (model,))
        return json.loads(rows[0][0]) if rows else None

    def put_roofline(self, rec: RooflineRecord) -> None:
        """INSERT OR REPLACE of the (board model, mode) row."""
        rec.check()
        self._exec("INSERT OR REPLACE INTO rooflines (board_model, mode, doc) VALUES (?,?,?)",
                   (rec.board_model, rec.mode, json.dumps(asdict(rec))))

    def get_rooflines(self, board_model: str) -> list[RooflineRecord]:
        """The board model's rows, by mode string."""
        return [RooflineRecord(**json.loads(r[0])) for r in
                self._rows("SELECT doc FROM rooflines WHERE board_model=? ORDER BY mode", (board_model,))]

    def put_doc(self, kind: str, doc_id: str, doc: dict[str, Any]) -> None:
        """Insert the document, or replace it in place (it keeps its position in ``list_docs``)."""
        self._exec("INSERT INTO docs (kind, doc_id, doc) VALUES (?,?,?) ON CONFLICT(kind, doc_id) DO UPDATE SET "
                   "doc=excluded.doc", (kind, doc_id, json.dumps(doc)))

    def get_doc(self, kind: str, doc_id: str) -> dict[str, Any] | None:
        """The document, or None."""
        rows = self._rows("SELECT doc FROM docs WHERE kind=? AND doc_id=?", (kind, doc_id))
        return json.loads(rows[0][0]) if rows else None

    def delete_doc(self, kind: str, doc_id: str) -> bool:
        """Remove a document; False if there was none."""
        return self._exec("DELETE FROM docs WHERE kind=? AND doc_id=?", (kind, doc_id)).rowcount > 0

    def list_docs(self, kind: str) -> list[dict[str, Any]]:
        """The kind's documents in the order they were first inserted."""
        return [json.loads(r[0]) for r in self._rows("SELECT doc FROM docs WHERE kind=? ORDER BY seq", (kind,))]

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._db.close()
