"""Fenced writes for the Redis store: every durable write is one MULTI/EXEC under WATCH of the leader's fencing
counter (jetfleet.controller.leader.lease), refused unless the counter holds this controller's token. A write by
an ex-leader, paused or cut off while another controller took over, changes nothing (Fenced)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jetfleet.controller.store.base import Fenced


class FencedWrites:
    """The write path of ``RedisStore`` (which provides the client ``r``, the prefix ``p`` and ``_call``)."""

    p: str
    r: Any
    _fence_token: int | None = None   # None: unfenced (a store used outside a controller: tools, tests)

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:  # provided by RedisStore
        raise NotImplementedError

    @property
    def fence_key(self) -> str:
        """The fencing counter's key (the leader lease's, jetfleet.controller.leader.lease)."""
        return f"{self.p}:leader:fence"

    def fence(self, token: int | None) -> None:
        """Write only while the fencing counter holds ``token`` (0: refuse every write, a standby); None: unfenced."""
        self._fence_token = token

    def _tx(self, body: Callable[[Any], None], *watch: str) -> list[Any]:
        """Run ``body(pipe)`` under WATCH of the fencing counter and ``watch``: it may read (immediate mode), then
        calls ``pipe.multi()`` and queues its writes; EXEC applies them only if nothing watched changed (a change
        retries, and a superseded token is then refused). Returns EXEC's results."""
        token = self._fence_token

        def run(pipe: Any) -> None:
            if token is not None:
                current = pipe.get(self.fence_key)
                if str(token) != (current or ""):
                    raise Fenced(f"store write refused: this controller's leadership term (fencing token {token}) is "
                                 f"not current (the lab's token is {current or 'unset'}): another controller leads",
                                 field="store")
            body(pipe)

        return list(self._call(self.r.transaction, run, self.fence_key, *watch) or [])

    def _write(self, queue: Callable[[Any], object], *watch: str) -> list[Any]:
        """``_tx`` of writes alone: ``queue(pipe)`` adds them after MULTI."""
        def body(pipe: Any) -> None:
            pipe.multi()
            queue(pipe)

        return self._tx(body, *watch)
