"""A new leadership term's fencing token and Redis's asynchronous replication (issue 27): the INCR that starts a term
may be acknowledged by the master and lost in a failover, and the next term would then get the same token. With
``replica_acks`` (what a controller on a redis+sentinel:// store uses) a term acts only once a replica holds its
token. Real processes: a master and its replica; the replica paused (SIGSTOP) so it receives nothing, the master
killed -9 and the replica started again from its own append-only file as the master (the state Sentinel's promotion
of a replica that had not received the INCR leaves)."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

import pytest

from jetfleet.controller.leader.identity import ControllerIdentity
from jetfleet.controller.leader.lease import LeaseConfig, RedisLease, lease_keys
from jetfleet.shared.errors import InvalidArgument

from .harness import free_port, wait_until
from .sentinel_lab import SentinelLab, answers

CONFIG = LeaseConfig(ttl_s=3.0, renew_every_s=0.3, try_every_s=0.3)


def me(port: int) -> ControllerIdentity:
    return ControllerIdentity(pid=port, host=socket.gethostname(), address=f"127.0.0.1:{port}", started_s=0.0)


def server_args(tmp_path: Path, name: str, port: int) -> list[str]:
    return ["--port", str(port), "--bind", "127.0.0.1", "--dir", str(tmp_path), "--save", "", "--appendonly", "yes",
            "--appendfilename", f"{name}.aof", "--appenddirname", name]


def master_and_replica(tmp_path: Path) -> tuple[SentinelLab, int, int]:
    """A master and its replica, no Sentinels (the test promotes the replica itself)."""
    lab = SentinelLab(tmp_path)
    m, r = free_port(), free_port()
    lab.ports = {"master": m, "replica": r}
    lab._redis("master", server_args(tmp_path, "master", m))
    lab._redis("replica", [*server_args(tmp_path, "replica", r), "--replicaof", "127.0.0.1", str(m)])
    wait_until(lambda: answers(m) and answers(r), 20, "the Redis servers")
    wait_until(lambda: lab.replication("replica").get("master_link_status") == "up", 20, "the replica in sync")
    return lab, m, r


@pytest.mark.slow   # two redis-servers and a WAIT that times out: ~5 s
@pytest.mark.parametrize("acks", [0, 1])
def test_a_term_acts_only_once_a_replica_holds_its_token_so_a_failover_never_repeats_a_token(tmp_path, acks):
    import redis

    if SentinelLab.missing():
        pytest.skip(SentinelLab.missing())
    lab, m, r = master_and_replica(tmp_path)
    try:
        config = LeaseConfig(**{**CONFIG.__dict__, "replica_acks": acks})
        old = RedisLease(redis.Redis(port=m, decode_responses=True, socket_timeout=2), "lab", me(1), config)
        lab.children["replica"].send_signal(signal.SIGSTOP)   # connected, but it acknowledges nothing
        token = old.try_acquire()
        fence_key = lease_keys("lab")[1]
        if acks:   # not leading with a token only the master has; the lease it set is withdrawn
            assert token == 0 and not old.leading
            assert redis.Redis(port=m).exists(lease_keys("lab")[0]) == 0
        else:
            assert token == 1 and old.leading   # what a plain redis:// store does (one server: nothing to wait for)
        # The replica never applies what the master sent it meanwhile: it is killed while paused and started again
        # from its own append-only file, as the master (what Sentinel's promotion leaves); then the master dies.
        lab.kill("replica")
        lab.kill("master")
        lab._redis("replica", server_args(tmp_path, "replica", r))
        wait_until(lambda: answers(r), 20, "the replica back, as the master")
        promoted = redis.Redis(port=r, decode_responses=True, socket_timeout=2)
        assert promoted.get(lease_keys("lab")[0]) is None   # what the master did after the pause is not there
        new = RedisLease(promoted, "lab", me(2), config)
        wait_until(lambda: new.try_acquire() > 0, 10, "a new term on the promoted replica")
        assert int(promoted.get(fence_key)) == new.token
        acted = [t for t in (token,) if t]   # the terms that acted before the failover
        if acks:
            assert all(t < new.token for t in acted), (acted, new.token)
        else:   # the hole the acknowledgement closes: two terms that acted with the same token
            assert acted == [new.token]
    finally:
        lab.end()


@pytest.mark.slow   # two redis-servers: ~2 s
def test_with_the_replica_back_a_term_leads_and_the_replica_holds_its_token(tmp_path):
    import redis

    if SentinelLab.missing():
        pytest.skip(SentinelLab.missing())
    lab, m, r = master_and_replica(tmp_path)
    try:
        config = LeaseConfig(**{**CONFIG.__dict__, "replica_acks": 1})
        lease = RedisLease(redis.Redis(port=m, decode_responses=True, socket_timeout=2), "lab", me(1), config)
        token = lease.try_acquire()
        assert token == 1 and lease.leading
        # the acknowledgement came before try_acquire returned: the replica holds the token now, no waiting
        assert redis.Redis(port=r, decode_responses=True).get(lease_keys("lab")[1]) == "1"
    finally:
        lab.end()


def test_replica_acks_out_of_range_is_refused_naming_the_setting():
    with pytest.raises(InvalidArgument) as e:
        LeaseConfig(replica_acks=-1).check()
    assert e.value.field == "lease_replica_acks" and "allowed 0..16" in e.value.message
