"""This controller's role: leader or standby, and the loop that keeps or seeks the lead.

On SQLite the controller that holds the data directory's lock leads for its whole life. On Redis a standby tries
the lease every ``try_every_s``; the leader renews it every ``renew_every_s``. Taking the lead calls ``on_lead``
(load campaigns, jobs and fleet caps and resume them); losing it calls ``on_lost`` (stop acting) once."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from jetfleet.controller.leader.identity import ControllerIdentity
from jetfleet.controller.leader.lease import LeaderInfo, RedisLease
from jetfleet.controller.metrics import ControllerMetrics

log = logging.getLogger(__name__)


class Role:
    """Leader or standby. ``lease`` None: the only controller of its store (SQLite), leader from the start."""

    def __init__(self, lease: RedisLease | None, metrics: ControllerMetrics,
                 on_lead: Callable[[int], Awaitable[None]], on_lost: Callable[[], Awaitable[None]]) -> None:
        self.lease = lease
        self.metrics = metrics
        self.on_lead = on_lead
        self.on_lost = on_lost
        self.leading = False
        self.lost = asyncio.Event()        # set once this controller lost a lead it held
        self.known_leader: LeaderInfo | None = None   # the leader as last read by this standby
        metrics.leader.set(0)
        metrics.lease_age.set_function(lambda: lease.lease_age_s() if lease is not None else 0.0)

    @property
    def redis(self) -> bool:
        """True on Redis (a lease to hold); False on SQLite."""
        return self.lease is not None

    def leader_address(self) -> str:
        """Where the leader is reached: "" while none is known (or this one leads)."""
        info = self.known_leader
        return info.identity.address if info is not None and info.identity is not None else ""

    def describe_leader(self) -> str:
        """The leader as an error names it."""
        info = self.known_leader
        if info is None:
            return "no controller leads now (a takeover is under way); try again in a few seconds"
        who = info.identity.describe() if info.identity is not None else "a controller this version cannot name"
        return f"the leader is {who}, fencing token {info.token}"

    async def first_try(self, me: ControllerIdentity) -> None:
        """At start: lead at once if nobody else does (SQLite: always)."""
        if self.lease is None:
            await self._lead(0)
            return
        token = await asyncio.to_thread(self.lease.try_acquire, me)
        await asyncio.to_thread(self.lease.announce)
        if token:
            await self._lead(token)
        else:
            self.known_leader = await asyncio.to_thread(self.lease.leader)
            log.info("standing by: %s", self.describe_leader())

    async def run(self, stop: asyncio.Event) -> None:
        """Keep the lead (renew) or seek it (try) until ``stop`` is set or the lead is lost."""
        lease = self.lease
        if lease is None:
            return
        while not stop.is_set():
            period = lease.config.renew_every_s if self.leading else lease.config.try_every_s
            try:
                await asyncio.wait_for(stop.wait(), period)
                return
            except asyncio.TimeoutError:
                pass
            if self.leading:
                try:
                    kept = await asyncio.to_thread(lease.renew)
                except Exception:   # an answer the lease cannot read: it cannot say it still leads
                    log.exception("renewing the lease failed")
                    kept = False
                if not kept:
                    self.leading = False
                    self.metrics.leader.set(0)
                    self.lost.set()
                    await self.on_lost()
                    return
                # alive (`controller status`), said after the renewal so that a slow Redis never delays the renewal
                await asyncio.to_thread(lease.announce)
                continue
            try:
                token = await asyncio.to_thread(lease.try_acquire)
                await asyncio.to_thread(lease.announce)
                if not token:
                    self.known_leader = await asyncio.to_thread(lease.leader)
            except Exception:   # a standby keeps trying
                log.exception("trying the lease failed")
                continue
            if token:
                try:
                    await self._lead(token)
                except Exception:   # it could not load what it has to resume: give the lead up, and say so
                    log.exception("taking the lead failed; giving it up")
                    await self.on_lost()
                    await self.release()
                    self.lost.set()
                    return

    async def _lead(self, token: int) -> None:
        if token > 1:
            self.metrics.takeovers.inc()   # the prefix had a leader before this term
        self.known_leader = None
        await self.on_lead(token)
        self.leading = True
        self.metrics.leader.set(1)

    async def release(self) -> None:
        """Give the lease up (a clean stop): a standby takes over at its next try instead of after the expiry."""
        if self.lease is not None:
            await asyncio.to_thread(self.lease.release)
            await asyncio.to_thread(self.lease.withdraw)
        self.leading = False
        self.metrics.leader.set(0)
