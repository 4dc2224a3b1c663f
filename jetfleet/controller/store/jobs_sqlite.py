"""Jobs in the SQLite store: the record as JSON, its progress in columns so ``advance_job`` is one
conditional UPDATE (only forward, only for the job's current training command)."""

from __future__ import annotations

import json
import sqlite3
from contextlib import AbstractContextManager
from typing import Any

from jetfleet.controller.store.job_record import JobRecord, job_doc, job_from_doc

JOBS_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
  job_id TEXT PRIMARY KEY, created_s REAL NOT NULL, doc TEXT NOT NULL, run_id TEXT NOT NULL,
  minibatches_done INTEGER NOT NULL, energy_j REAL NOT NULL, elapsed_s REAL NOT NULL);
"""


def _doc(rec: JobRecord) -> str:
    return json.dumps(job_doc(rec))


def _record(row: tuple[Any, ...]) -> JobRecord:
    return job_from_doc(json.loads(row[0]), run_id=row[1], minibatches_done=row[2], energy_j=row[3], elapsed_s=row[4])


class SqliteJobs:
    """The jobs part of ``SqliteStore`` (which provides the connection and its lock)."""

    _db: sqlite3.Connection

    def _locked(self) -> AbstractContextManager[None]:  # provided by SqliteStore: the lock, errors as StoreUnavailable
        raise NotImplementedError

    def create_job(self, rec: JobRecord) -> bool:
        """INSERT OR IGNORE: False if the id exists."""
        with self._locked():
            cur = self._db.execute("INSERT OR IGNORE INTO jobs VALUES (?,?,?,?,?,?,?)",
                                   (rec.job_id, rec.created_s, _doc(rec), rec.run_id, rec.minibatches_done,
                                    rec.energy_j, rec.elapsed_s))
            return cur.rowcount == 1

    def get_job(self, job_id: str) -> JobRecord | None:
        """The job's row, or None."""
        with self._locked():
            rows = self._db.execute("SELECT doc, run_id, minibatches_done, energy_j, elapsed_s FROM jobs WHERE job_id=?",
                                    (job_id,)).fetchall()
        return _record(rows[0]) if rows else None

    def list_jobs(self) -> list[JobRecord]:
        """Every job's row, by creation time then id."""
        with self._locked():
            rows = self._db.execute("SELECT doc, run_id, minibatches_done, energy_j, elapsed_s FROM jobs "
                                    "ORDER BY created_s, job_id").fetchall()
        return [_record(r) for r in rows]

    def update_job(self, rec: JobRecord) -> None:
        """One UPDATE of the whole row."""
        with self._locked():
            self._db.execute("UPDATE jobs SET doc=?, run_id=?, minibatches_done=?, energy_j=?, elapsed_s=? WHERE job_id=?",
                             (_doc(rec), rec.run_id, rec.minibatches_done, rec.energy_j, rec.elapsed_s, rec.job_id))

    def advance_job(self, job_id: str, run_id: str, minibatches_done: int, energy_j: float, elapsed_s: float) -> bool:
        """One conditional UPDATE of the progress columns."""
        with self._locked():
            cur = self._db.execute("UPDATE jobs SET minibatches_done=?, energy_j=?, elapsed_s=? WHERE job_id=? AND "
                                   "run_id=? AND minibatches_done<=? AND elapsed_s<=?",
                                   (minibatches_done, energy_j, elapsed_s, job_id, run_id, minibatches_done, elapsed_s))
            return cur.rowcount == 1
