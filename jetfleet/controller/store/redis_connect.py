"""Connections to the Redis store: one server (``redis://[:PASSWORD@]HOST:PORT/DB``), or the master that Redis
Sentinel names (``redis+sentinel://[:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTER[/DB]``: the Sentinels' addresses and
the master's name; a password authenticates to the Sentinels and the master alike). Through Sentinel every new
connection asks the Sentinels for the master, so after a failover the store reconnects to the promoted replica by
itself; meanwhile calls fail as for any outage (StoreUnavailable)."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlparse

import redis
from redis.sentinel import Sentinel

from jetfleet.shared.errors import InvalidArgument

SCHEMES = ("redis://", "redis+sentinel://")
USAGE = "expected redis://[:PASSWORD@]HOST:PORT/DB or redis+sentinel://[:PASSWORD@]HOST:PORT[,HOST:PORT...]/MASTER[/DB]"


def is_redis(spec: str) -> bool:
    """True for a store spec that names Redis (directly or through Sentinel)."""
    return spec.startswith(SCHEMES)


def redacted(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for logs, errors and the start-up line)."""
    parsed = urlparse(url)
    if parsed.password is None:
        return url
    user = parsed.username or ""
    host = parsed.netloc.rpartition("@")[2]
    return parsed._replace(netloc=f"{user}:***@{host}").geturl()


def connect(url: str, timeout_s: float) -> Any:
    """A client (str answers) with ``timeout_s`` on connecting and on every call; InvalidArgument for a bad URL."""
    shown = redacted(url)
    if url.startswith("redis://"):
        if not urlparse(url).hostname:
            raise InvalidArgument(f"store {shown!r}: {USAGE}", field="store")
        return redis.Redis.from_url(url, decode_responses=True, socket_timeout=timeout_s,
                                    socket_connect_timeout=timeout_s)
    if not url.startswith("redis+sentinel://"):
        raise InvalidArgument(f"store {shown!r}: {USAGE}", field="store")
    rest = url[len("redis+sentinel://"):]
    auth, _, rest = rest.rpartition("@")
    hosts_text, _, path = rest.partition("/")
    parts = [p for p in path.split("/") if p]
    sentinels: list[tuple[str, int]] = []
    for h in hosts_text.split(","):
        host, _, port = h.rpartition(":")
        if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise InvalidArgument(f"store {shown!r}: Sentinel address {h!r} is not HOST:PORT; {USAGE}", field="store")
        sentinels.append((host.strip("[]"), int(port)))
    if not parts or len(parts) > 2 or (len(parts) == 2 and not parts[1].isdigit()):
        raise InvalidArgument(f"store {shown!r}: give the master's name (and a database number); {USAGE}",
                              field="store")
    password = unquote(auth.partition(":")[2]) if auth else None
    # the password authenticates to the Sentinels too: give them the same requirepass (the Ansible role does)
    sentinel = Sentinel(sentinels, sentinel_kwargs={"password": password or None, "socket_timeout": timeout_s,
                                                    "socket_connect_timeout": timeout_s},
                        socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
    return sentinel.master_for(parts[0], db=int(parts[1]) if len(parts) == 2 else 0, password=password or None,
                               decode_responses=True, socket_timeout=timeout_s, socket_connect_timeout=timeout_s)
