"""Which controller leads a lab, read straight from its store (what `jetfleet controller status` prints)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from jetfleet.controller.leader.dirlock import DataDirLock
from jetfleet.controller.leader.identity import ControllerIdentity
from jetfleet.controller.leader.lease import read_controllers, read_leader
from jetfleet.shared.errors import InvalidArgument, StoreUnavailable


@dataclass(frozen=True)
class LabStatus:
    """The lab's leader: on Redis the lease's holder, its term (fencing token) and the seconds its lease has left;
    on SQLite the controller written beside the data directory's lock."""

    store: str
    backend: str                          # "redis" or "sqlite"
    leader: ControllerIdentity | None     # None: no controller leads (or none runs, on SQLite)
    token: int = 0
    expires_in_s: float = 0.0
    standbys: tuple[ControllerIdentity, ...] = ()   # Redis: the other controllers alive now (docs/standby.md)


def lab_status(store: str, prefix: str = "jetfleet") -> LabStatus:
    """Read who leads the lab whose store is ``store`` (a data directory or redis://HOST:PORT/DB)."""
    if store.startswith(("redis://", "redis+sentinel://")):
        import redis

        from jetfleet.controller.store.redis import RedisStore
        from jetfleet.controller.store.redis_connect import connect, redacted

        RedisStore.check_prefix(prefix)
        client = connect(store, 5.0)
        try:
            info = read_leader(client, prefix)
            alive = read_controllers(client, prefix)
        except (redis.ConnectionError, redis.TimeoutError) as e:
            raise StoreUnavailable(f"store unavailable: Redis at {redacted(store)}: {e}", field="store") from None
        finally:
            client.close()
        leader = info.identity if info is not None else None
        standbys = tuple(c for c in alive if leader is None or (c.host, c.pid) != (leader.host, leader.pid))
        if info is None:
            return LabStatus(redacted(store), "redis", None, standbys=standbys)
        return LabStatus(redacted(store), "redis", info.identity, info.token, info.expires_in_s, standbys)
    path = Path(store).expanduser()
    if not path.is_dir():
        raise InvalidArgument(f"store {store!r}: no such data directory", field="store")
    return LabStatus(str(path), "sqlite", DataDirLock(path).running())
