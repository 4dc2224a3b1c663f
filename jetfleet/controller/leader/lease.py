"""The leader lease in Redis: one leader per key prefix, a fencing token per leadership term.

``{p}:leader`` holds ``TOKEN IDENTITY-JSON`` with an expiry (SET NX PX): whoever sets it leads. ``{p}:leader:fence``
is the token counter, INCRemented by every new term in the same script, so a term's token is greater than every
earlier one. The store refuses a write unless the counter still holds the writer's token (RedisStore.fence), so an
ex-leader that was paused or cut off past its lease changes nothing once another controller has taken over.
The leader renews well inside the expiry with a compare-and-extend script; a lease it cannot renew (Redis
unreachable, or it expired) is lost, and the controller stops acting."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from jetfleet.controller.leader.identity import ControllerIdentity
from jetfleet.shared.errors import InvalidArgument

log = logging.getLogger(__name__)
_UNREACHABLE = (redis.ConnectionError, redis.TimeoutError)

# KEYS: lease, fence. ARGV: identity json, ttl ms. Returns the new term's token, or 0 if the lease is held.
_ACQUIRE = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], token .. ' ' .. ARGV[1], 'NX', 'PX', ARGV[2])
return token
"""
# KEYS: lease. ARGV: the value this term wrote, ttl ms. Compare and extend.
_RENEW = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
"""
# KEYS: lease. ARGV: the value this term wrote. Compare and delete (a clean stop hands over at once).
_RELEASE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])
"""


@dataclass(frozen=True)
class LeaseConfig:
    """How long a lease lasts and how often it is renewed or tried (wall seconds)."""

    ttl_s: float = 3.0       # a dead leader is replaced this long after its last renewal (plus one try_every_s)
    renew_every_s: float = 0.5   # well inside ttl_s: several renewals may fail before the lease is lost
    try_every_s: float = 0.5     # how often a standby tries to take the lease
    # Replicas that must hold a new term's fencing token before the term acts (WAIT after the INCR; 0: none). Under
    # Sentinel (1) a failover cannot promote a replica that lacks the token and give the next term the same one.
    replica_acks: int = 0

    def check(self) -> LeaseConfig:
        """The config, or InvalidArgument naming the setting out of range."""
        if not 0.2 <= self.ttl_s <= 600:
            raise InvalidArgument(f"lease ttl_s={self.ttl_s}: allowed 0.2..600 s", field="lease_ttl_s")
        if not 0 < self.renew_every_s <= self.ttl_s / 3 + 1e-9:
            raise InvalidArgument(f"lease renew_every_s={self.renew_every_s}: allowed (0, ttl_s/3 = "
                                  f"{self.ttl_s / 3:g}] s, so a lease survives two missed renewals",
                                  field="lease_renew_every_s")
        if not 0 < self.try_every_s <= self.ttl_s:
            raise InvalidArgument(f"lease try_every_s={self.try_every_s}: allowed (0, ttl_s] s",
                                  field="lease_try_every_s")
        if not 0 <= self.replica_acks <= 16:
            raise InvalidArgument(f"lease replica_acks={self.replica_acks}: allowed 0..16 replicas",
                                  field="lease_replica_acks")
        return self


@dataclass(frozen=True)
class LeaderInfo:
    """Who leads a prefix, as read from Redis."""

    identity: ControllerIdentity | None   # None: a value this version cannot read
    token: int
    expires_in_s: float


def lease_keys(prefix: str) -> tuple[str, str]:
    """The lease's key and the fencing counter's key under ``prefix``."""
    return f"{prefix}:leader", f"{prefix}:leader:fence"


def presence_key(prefix: str, me: ControllerIdentity) -> str:
    """The key by which a controller of ``prefix`` (leader or standby) says it is alive."""
    return f"{prefix}:controllers:{me.host}:{me.pid}"


def read_controllers(r: Any, prefix: str) -> list[ControllerIdentity]:
    """The controllers of ``prefix`` alive now (each said so within its lease's ttl), by address (raises redis errors)."""
    keys = sorted(r.scan_iter(match=f"{prefix}:controllers:*", count=100))
    found = [ControllerIdentity.from_json(v) for v in (r.mget(keys) if keys else []) if v]
    return sorted((c for c in found if c is not None), key=lambda c: (c.address, c.host, c.pid))


def read_leader(r: Any, prefix: str) -> LeaderInfo | None:
    """The prefix's current leader, or None when no lease is held (raises redis errors)."""
    key, _ = lease_keys(prefix)
    pipe = r.pipeline(transaction=True)
    pipe.get(key)
    pipe.pttl(key)
    value, ttl_ms = pipe.execute()
    if not value:
        return None
    token, _, rest = str(value).partition(" ")
    return LeaderInfo(ControllerIdentity.from_json(rest), int(token) if token.isdigit() else 0,
                      max(0.0, int(ttl_ms) / 1000.0))


class RedisLease:
    """One controller's side of the lease: ``try_acquire`` (a standby), ``renew`` (the leader), ``release``.

    ``r`` is a client of its own with a short socket timeout, so a Redis that does not answer is noticed
    within a renewal period; ``clock`` is monotonic seconds."""

    def __init__(self, r: Any, prefix: str, me: ControllerIdentity, config: LeaseConfig,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.r = r
        self.prefix = prefix
        self.me = me
        self.config = config.check()
        self.clock = clock
        self.key, self.fence_key = lease_keys(prefix)
        self.token = 0            # this term's token; 0 while not leading
        self._value = ""
        self.renewed_at = 0.0     # clock time the last successful renewal (or the acquisition) was sent
        self._acquire = r.register_script(_ACQUIRE)
        self._renew = r.register_script(_RENEW)
        self._release = r.register_script(_RELEASE)

    @property
    def leading(self) -> bool:
        """True while this controller holds a term of the lease."""
        return self.token > 0

    def lease_age_s(self) -> float:
        """Seconds since this leader last renewed its lease (0 while not leading)."""
        return self.clock() - self.renewed_at if self.leading else 0.0

    def try_acquire(self, me: ControllerIdentity | None = None) -> int:
        """Take the lease if nobody holds it: the new term's token, or 0 (held, or Redis unreachable)."""
        if me is not None:
            self.me = me
        sent = self.clock()
        value = ""
        conn = self.r
        try:
            if self.config.replica_acks:   # one connection for the script and WAIT (which counts its writes)
                conn = self.r.client()
            token = int(self._acquire(keys=[self.key, self.fence_key],
                                      args=[self.me.to_json(), int(self.config.ttl_s * 1000)], client=conn))
            value = f"{token} {self.me.to_json()}"
            if token and not self._replicated(conn, token, value):
                return 0
        except _UNREACHABLE as e:
            log.debug("lease %s: Redis unreachable: %s", self.key, e)
            return 0
        finally:
            if conn is not self.r:
                conn.close()
        if token:
            self.token, self._value, self.renewed_at = token, value, sent
            log.info("leading %s with fencing token %d", self.prefix, token)
        return token

    def _replicated(self, conn: Any, token: int, value: str) -> bool:
        """True once ``replica_acks`` replicas hold the new term's token (within one renewal period); otherwise the
        term is given up before it acts: a failover could promote a replica without it and repeat the token."""
        # the replicas connected now: a master alone (the replica promoted, the old master not back) has none to wait
        # for, and Sentinel promotes no replica that has long been cut off from its master
        want = min(self.config.replica_acks, int(conn.info("replication").get("connected_slaves", 0)))
        acks = int(conn.execute_command("WAIT", want, int(self.config.renew_every_s * 1000))) if want else 0
        if acks >= want:
            return True
        log.warning("lease %s: fencing token %d reached %d of %d connected replicas within %.1f s: not leading "
                    "with it (a failover could give the next term the same token); trying again", self.key, token,
                    acks, want, self.config.renew_every_s)
        self._release(keys=[self.key], args=[value], client=conn)
        return False

    def renew(self) -> bool:
        """Extend this term's lease; False once it is lost: someone else holds it, it expired, or Redis did not
        answer and the lease may have expired meanwhile (the caller then stops acting)."""
        if not self.leading:
            return False
        sent = self.clock()
        try:
            ok = bool(self._renew(keys=[self.key], args=[self._value, int(self.config.ttl_s * 1000)]))
        except _UNREACHABLE as e:
            # not renewed this time; lost only once the lease may have run out (measured from the last renewal sent)
            ok = None
            log.warning("lease %s: renewal failed (%s); %.1f s since the last one", self.key, e, sent - self.renewed_at)
        if ok:
            self.renewed_at = sent
            return True
        if ok is None and self.clock() - self.renewed_at < self.config.ttl_s - self.config.renew_every_s:
            return True
        log.error("lost the lead of %s (token %d): %s", self.prefix, self.token,
                  "another controller holds it or it expired" if ok is False else "Redis did not answer in time")
        self.token, self._value = 0, ""
        return False

    def announce(self) -> None:
        """Say that this controller is alive, leading or standing by (`controller status` lists the standbys): a key
        that expires after the lease's ttl unless said again. Not lab data, so not fenced; lost with Redis."""
        try:
            self.r.set(presence_key(self.prefix, self.me), self.me.to_json(), px=int(self.config.ttl_s * 1000))
        except _UNREACHABLE as e:
            log.debug("lease %s: presence not said: %s", self.key, e)

    def withdraw(self) -> None:
        """No longer alive (a clean stop)."""
        try:
            self.r.delete(presence_key(self.prefix, self.me))
        except _UNREACHABLE as e:
            log.debug("lease %s: presence not withdrawn (%s); it expires by itself", self.key, e)

    def release(self) -> None:
        """Give the lease up if this term still holds it (a clean stop: a standby takes over at its next try)."""
        if not self.leading:
            return
        try:
            self._release(keys=[self.key], args=[self._value])
        except _UNREACHABLE as e:
            log.warning("lease %s: not released (%s); it expires by itself", self.key, e)
        self.token, self._value = 0, ""

    def leader(self) -> LeaderInfo | None:
        """Who leads now (None: nobody, or Redis unreachable)."""
        try:
            return read_leader(self.r, self.prefix)
        except _UNREACHABLE:
            return None
