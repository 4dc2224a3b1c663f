"""Redis's own failover through Redis Sentinel (issue 27): the store given the Sentinels' addresses and the master's
name follows a failover by itself. Real processes: a master, a replica and three Sentinels (redis-server
--sentinel, what the Debian redis-sentinel package runs); the master killed -9."""

from __future__ import annotations

import shutil

import pytest

from . import procs
from .harness import free_port, wait_until


def redis_proc(args: list[str]) -> procs.Child:
    return procs.spawn([shutil.which("redis-server") or "redis-server", *args], stdout=procs.DEVNULL,
                       stderr=procs.DEVNULL)


def answers(port: int) -> bool:
    import redis

    try:
        return bool(redis.Redis(port=port, socket_timeout=0.5, socket_connect_timeout=0.5).ping())
    except redis.RedisError:
        return False


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_store_follows_a_sentinel_failover_and_keeps_what_was_replicated(tmp_path):
    import redis

    from jetfleet.controller.store.redis import RedisStore
    from jetfleet.shared.errors import StoreUnavailable

    if not shutil.which("redis-server"):
        pytest.skip("redis-server is not installed (make test installs it with apt when run as root)")
    m, r = free_port(), free_port()
    master = redis_proc(["--port", str(m), "--bind", "127.0.0.1", "--dir", str(tmp_path), "--save", "",
                         "--appendonly", "yes", "--appendfilename", "m.aof", "--appenddirname", "m"])
    replica = redis_proc(["--port", str(r), "--bind", "127.0.0.1", "--dir", str(tmp_path), "--save", "",
                          "--appendonly", "yes", "--appendfilename", "r.aof", "--appenddirname", "r",
                          "--replicaof", "127.0.0.1", str(m)])
    sentinels, ports = [], []
    for i in range(3):
        port = free_port()
        conf = tmp_path / f"sentinel-{i}.conf"   # Sentinel rewrites its own configuration: one file each
        conf.write_text(f"port {port}\nbind 127.0.0.1\nsentinel monitor lab 127.0.0.1 {m} 2\n"
                        "sentinel down-after-milliseconds lab 500\nsentinel failover-timeout lab 2000\n")
        sentinels.append(redis_proc([str(conf), "--sentinel"]))
        ports.append(port)
    wait_until(lambda: answers(m) and answers(r) and all(answers(p) for p in ports), 20, "the servers")
    wait_until(lambda: redis.Redis(port=r).info("replication").get("master_link_status") == "up", 20,
               "the replica in sync")

    def sentinels_ready() -> bool:   # each knows the replica (from the master's INFO) and the two other Sentinels
        for p in ports:
            s = redis.Redis(port=p, decode_responses=True)
            replicas = s.execute_command("SENTINEL", "REPLICAS", "lab")
            others = s.execute_command("SENTINEL", "SENTINELS", "lab")
            if not any(str(r) in str(x) for x in replicas) or len(others) < 2:
                return False
        return True

    wait_until(sentinels_ready, 60, "the Sentinels to know the replica and each other")
    url = "redis+sentinel://" + ",".join(f"127.0.0.1:{p}" for p in ports) + "/lab"
    store = RedisStore(url, "sent", timeout_s=1.0)
    try:
        store.put_doc("k", "before", {"n": 1})
        assert store.r.execute_command("WAIT", 1, 5000) == 1   # replicated before the master dies
        master.kill()   # -9
        master.wait(10)

        def written() -> bool:
            try:
                store.put_doc("k", "after", {"n": 2})
                return True
            except StoreUnavailable:   # the failover under way: an outage, as for a Redis that is down
                return False

        wait_until(written, 60, "the store to write through the promoted replica")
        assert redis.Redis(port=r).info("replication")["role"] == "master"
        assert store.get_doc("k", "before") == {"n": 1} and store.get_doc("k", "after") == {"n": 2}
    finally:
        store.close()
        for p in (*sentinels, replica, master):
            p.end()


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
