"""Jobs in the Redis store: a hash per job (the record as JSON, its progress in fields, so
``advance_job`` is one Lua script: only forward, only for the job's current training command),
and a sorted set of job ids by creation time."""

from __future__ import annotations

import json
from typing import Any

from jetfleet.controller.store.job_record import JobRecord, job_doc, job_from_doc
from jetfleet.controller.store.redis_fence import FencedWrites

# KEYS: the job's hash. ARGV: run id, minibatches done, energy, elapsed.
_ADVANCE = """
if redis.call('HGET', KEYS[1], 'run_id') ~= ARGV[1] then return 0 end
if tonumber(redis.call('HGET', KEYS[1], 'minibatches_done')) > tonumber(ARGV[2]) then return 0 end
if tonumber(redis.call('HGET', KEYS[1], 'elapsed_s')) > tonumber(ARGV[4]) then return 0 end
redis.call('HSET', KEYS[1], 'minibatches_done', ARGV[2], 'energy_j', ARGV[3], 'elapsed_s', ARGV[4])
return 1
"""
# KEYS: the job's hash, the index. ARGV: job id, created, then field, value pairs.
_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
for i = 3, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
return 1
"""

# KEYS: the job's hash. ARGV: field, value pairs. Only an existing job is updated.
_UPDATE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
for i = 1, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
return 1
"""


def _fields(rec: JobRecord) -> dict[str, str]:
    return {"doc": json.dumps(job_doc(rec)), "run_id": rec.run_id, "minibatches_done": str(rec.minibatches_done),
            "energy_j": repr(float(rec.energy_j)), "elapsed_s": repr(float(rec.elapsed_s))}


def _record(h: dict[str, str]) -> JobRecord:
    return job_from_doc(json.loads(h["doc"]), run_id=h["run_id"], minibatches_done=int(h["minibatches_done"]),
                        energy_j=float(h["energy_j"]), elapsed_s=float(h["elapsed_s"]))


class RedisJobs(FencedWrites):
    """The jobs part of ``RedisStore`` (which provides the client, the key prefix and error mapping); writes fenced."""

    p: str
    r: Any

    def _call(self, fn: Any, *args: Any) -> Any:  # provided by RedisStore
        raise NotImplementedError

    def create_job(self, rec: JobRecord) -> bool:
        """A Lua script, so it is atomic: the job's fields and its index entry, unless it exists."""
        pairs = [v for kv in _fields(rec).items() for v in kv]
        return bool(self._write(lambda pipe: pipe.eval(_CREATE, 2, f"{self.p}:job:{rec.job_id}", f"{self.p}:jobs",
                                                       rec.job_id, repr(float(rec.created_s)), *pairs))[0])

    def get_job(self, job_id: str) -> JobRecord | None:
        """The job's hash, or None."""
        h = self._call(self.r.hgetall, f"{self.p}:job:{job_id}")
        return _record(h) if h else None

    def list_jobs(self) -> list[JobRecord]:
        """Every indexed job, by creation time then id."""
        ids = self._call(self.r.zrange, f"{self.p}:jobs", 0, -1)
        pipe = self.r.pipeline(transaction=False)
        for i in ids:
            pipe.hgetall(f"{self.p}:job:{i}")
        jobs = [_record(h) for h in self._call(pipe.execute) if h] if ids else []
        return sorted(jobs, key=lambda j: (j.created_s, j.job_id))

    def update_job(self, rec: JobRecord) -> None:
        """HSET of every field, if the job exists (a Lua script, so the check and the write are one)."""
        key = f"{self.p}:job:{rec.job_id}"
        fields = _fields(rec)
        self._write(lambda pipe: pipe.eval(_UPDATE, 1, key, *[v for kv in fields.items() for v in kv]))

    def advance_job(self, job_id: str, run_id: str, minibatches_done: int, energy_j: float, elapsed_s: float) -> bool:
        """A Lua script: compare the run id and the counts, then write, atomically."""
        return bool(self._write(lambda pipe: pipe.eval(_ADVANCE, 1, f"{self.p}:job:{job_id}", run_id, minibatches_done,
                                                       repr(float(energy_j)), repr(float(elapsed_s))))[0])
