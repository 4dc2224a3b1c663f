"""Redis's own failover through Redis Sentinel (issue 27): the store given the Sentinels' addresses and the master's
name follows a failover by itself. Real processes: a master, a replica and three Sentinels (redis-server
--sentinel, what the Debian redis-sentinel package runs); the master killed -9."""

from __future__ import annotations

import pytest

from .harness import wait_until
from .sentinel_lab import SentinelLab


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("password", ["", "s3cret-sentinel-pw"])   # the Ansible role's Sentinels require one
def test_the_store_follows_a_sentinel_failover_and_keeps_what_was_replicated(tmp_path, password):
    from jetfleet.controller.store.redis import RedisStore
    from jetfleet.shared.errors import StoreUnavailable

    if SentinelLab.missing():
        pytest.skip(SentinelLab.missing())
    lab = SentinelLab(tmp_path, password=password).start()
    store = RedisStore(lab.url, "sent", timeout_s=1.0)
    try:
        store.put_doc("k", "before", {"n": 1})
        assert store.r.execute_command("WAIT", 1, 5000) == 1   # replicated before the master dies
        lab.kill("master")   # -9

        def written() -> bool:
            try:
                store.put_doc("k", "after", {"n": 2})
                return True
            except StoreUnavailable:   # the failover under way: an outage, as for a Redis that is down
                return False

        wait_until(written, 60, "the store to write through the promoted replica")
        assert lab.replication("replica")["role"] == "master"
        assert store.get_doc("k", "before") == {"n": 1} and store.get_doc("k", "after") == {"n": 2}
    finally:
        store.close()
        lab.end()


def test_a_bad_sentinel_url_is_refused_naming_the_store():
    from jetfleet.controller.store.redis import RedisStore
    from jetfleet.shared.errors import InvalidArgument

    for url, why in (("redis+sentinel://h1:26379,h2/lab", "Sentinel address 'h2' is not HOST:PORT"),
                     ("redis+sentinel://h1:26379", "give the master's name"),
                     ("redis+sentinel://:secret@h1:26379/lab/x", "give the master's name"),
                     ("rediss://h:1/0", "expected redis://")):
        try:
            RedisStore(url)
            raise AssertionError(url)
        except InvalidArgument as e:
            assert e.field == "store" and why in e.message and "secret" not in e.message, e.message
