"""Controllers under a Redis failover (issue 27): two real controllers on a redis+sentinel:// store (a real master, a
replica and three real Sentinels), a job training on an emulated board; the Redis master killed -9 mid-job. Sentinel
promotes the replica, the controllers follow it, and the job finishes with the board's own trained counter equal to
its length. The gap (how long the store refused writes) and the time until a controller leads again are measured and
printed (docs/standby.md quotes them)."""

from __future__ import annotations

import re
import sys
import threading
import time
from pathlib import Path

import pytest

from jetfleet.client import OperatorClient
from jetfleet.shared.proto import operator_pb2 as op

from . import procs
from .harness import wait_until
from .sentinel_lab import SentinelLab
from .test_exactly_once import NANO, job, job_end, trained
from .test_takeover import device, seeded_redis

JETFLEET = [sys.executable, "-m", "jetfleet.cli"]
pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]


def controller(url: str, prefix: str, log: Path) -> tuple[procs.Child, str]:
    """A controller serving the lab, its output in ``log`` (read, never left to fill a pipe)."""
    with open(log, "w") as f:
        c = procs.spawn([*JETFLEET, "controller", "serve", "--listen", "127.0.0.1:0", "--store", url, "--store-prefix",
                         prefix], stdout=f, stderr=procs.STDOUT)
    found: list[str] = []

    def listening() -> bool:
        m = re.search(r"listening on (127.0.0.1:\d+)", log.read_text())
        found[:] = [m.group(1)] if m else []
        assert m or c.poll() is None, log.read_text()[-3000:]
        return bool(m)

    wait_until(listening, 60, f"the controller to listen ({log})")
    return c, found[0]


def stop(board: procs.Child, *controllers: procs.Child) -> None:
    """SIGTERM to the agent and to each controller still running; each ends cleanly."""
    board.terminate()
    assert board.wait(30) == 0
    for p in controllers:
        if p.poll() is None:
            p.terminate()
            assert p.wait(30) == 0


class WriteProbe:
    """Writes to the store through Sentinel every 20 ms on a thread of its own and keeps when each write succeeded;
    the gap around a moment is how long writes were refused there."""

    def __init__(self, url: str) -> None:
        from jetfleet.controller.store.redis import RedisStore

        self.store = RedisStore(url, "probe", timeout_s=0.5)
        self.ok_at: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _write(self) -> bool:
        from jetfleet.shared.errors import StoreUnavailable

        try:
            self.store.put_doc("probe", "k", {"t": time.time()})
            self.ok_at.append(time.monotonic())
        except StoreUnavailable:
            pass
        return self.stop.is_set()

    def _run(self) -> None:
        wait_until(self._write, 600, "the probe to be stopped")

    def gap_s(self, around: float) -> float:
        """Seconds between the last successful write before ``around`` and the first one after it."""
        before = max(t for t in self.ok_at if t <= around)
        after = min(t for t in self.ok_at if t > around)
        return after - before

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.store.close()


# Sentinel's down-after-milliseconds: a failover shorter than the controllers' 3 s lease (the leader keeps its lease
# on the promoted replica), and one longer (the leader stops acting and exits for its supervisor; the standby leads).
@pytest.mark.parametrize("down_after_ms", [500, 4000], ids=["inside-the-lease", "past-the-lease"])
def test_a_redis_master_killed_mid_job_sentinel_promotes_the_replica_and_the_job_is_trained_once(tmp_path,
                                                                                                 reference_nets,
                                                                                                 down_after_ms):
    from jetfleet.controller.leader.status import lab_status

    if SentinelLab.missing():
        pytest.skip(SentinelLab.missing())
    n = 6000
    redis = SentinelLab(tmp_path, down_after_ms=down_after_ms, failover_timeout_ms=max(2000, 2 * down_after_ms)).start()
    probe = WriteProbe(redis.url)
    try:
        seeded_redis(redis.url, "lab", reference_nets)
        a, a_address = controller(redis.url, "lab", tmp_path / "a.log")
        b, b_address = controller(redis.url, "lab", tmp_path / "b.log")
        both = f"{a_address},{b_address}"
        board = procs.spawn([*JETFLEET, "agent", "run", "--controller", both, "--device", f"emulated:{NANO}:7", "--id",
                             "nano-s", "--speed", "100", "--metrics-port", "0", "--metrics-address", "127.0.0.1"],
                            stdout=procs.DEVNULL, stderr=procs.DEVNULL)
        wait_until(lambda: device(both, "nano-s").online, 60, "the agent online at the leader")
        metrics = device(both, "nano-s").metrics_address
        before = lab_status(redis.url, "lab")
        assert before.leader is not None and before.leader.pid == a.pid, before
        with OperatorClient(both) as c:
            jid = c.call("SubmitJob", op.SubmitJobRequest(workload="mobilenet_v3", power_budget_w=11, minibatches=n,
                                                          profile_modes=10, device_id="nano-s")).job_id
        probe.thread.start()
        wait_until(lambda: (job(both, jid) or op.Job()).minibatches_done > 1000, 120, "the job to train a while")
        redis.kill("master")   # -9 mid-job: Sentinel finds it down after down_after_ms and promotes the replica
        killed = time.monotonic()

        def leads() -> bool:
            try:
                s = lab_status(redis.url, "lab")
            except Exception:  # noqa: BLE001 - the failover under way: the Sentinels name no master yet
                return False
            return s.leader is not None and s.leader.pid in (a.pid, b.pid) and s.expires_in_s > 0

        wait_until(lambda: redis.replication("replica").get("role") == "master", 60, "Sentinel to promote the replica")
        promoted_s = time.monotonic() - killed
        wait_until(leads, 60, "a controller to lead on the promoted replica")
        leading_s = time.monotonic() - killed
        done = job_end(both, jid, "the job to end after the failover")
        after = lab_status(redis.url, "lab")
        gap_s = probe.gap_s(killed)
        exited = {name: p.poll() for name, p in (("a", a), ("b", b))}
        print(f"\nRedis master killed -9 (down-after {down_after_ms} ms): replica promoted after {promoted_s:.2f} s, "
              f"store writes refused for {gap_s:.2f} s, a controller leading after {leading_s:.2f} s "
              f"(leader before: a, token {before.token}; "
              f"after: {'a' if after.leader and after.leader.pid == a.pid else 'b'}, token {after.token}; "
              f"exited: {exited})")
        assert done.state == "done" and done.minibatches_done == n, done.detail
        assert trained(metrics, "nano-s") == n, "the board trained minibatches the job counted once"   # the board's word
        assert done.board_minibatches == n, done.runs
        # a controller that lost the lead during the outage exits with status 5 for its supervisor; none else
        assert all(rc in (None, 5) for rc in exited.values()), (exited, (tmp_path / "a.log").read_text()[-3000:])
        if down_after_ms < 3000:   # the lease outlived the failover: the same leader, the same term
            assert after.leader is not None and after.leader.pid == a.pid and after.token == before.token, after
            assert exited == {"a": None, "b": None}
        else:   # it did not: a new term, with a larger token, at the standby
            assert after.leader is not None and after.leader.pid == b.pid and after.token > before.token, after
            assert exited["a"] == 5
        stop(board, a, b)
    finally:
        probe.close()
        redis.end()


def test_a_redis_master_killed_mid_campaign_sentinel_promotes_the_replica_and_each_mode_is_stored_once(tmp_path):
    """The same failover (inside the lease) under a campaign: it goes on at the promoted replica and ends with each
    of its modes stored exactly once, as its first observation."""
    from .test_takeover import campaign, stored_once

    if SentinelLab.missing():
        pytest.skip(SentinelLab.missing())
    redis = SentinelLab(tmp_path, down_after_ms=500, failover_timeout_ms=2000).start()
    try:
        a, a_address = controller(redis.url, "lab", tmp_path / "a.log")
        b, b_address = controller(redis.url, "lab", tmp_path / "b.log")
        both = f"{a_address},{b_address}"
        board = procs.spawn([*JETFLEET, "agent", "run", "--controller", both, "--device", f"emulated:{NANO}:4", "--id",
                             "nano-c", "--speed", "100"], stdout=procs.DEVNULL, stderr=procs.DEVNULL)
        wait_until(lambda: device(both, "nano-c").online, 60, "the agent online at the leader")
        with OperatorClient(both) as c:
            cid = c.create_campaign("mobilenet_v3", device_id="nano-c", modes="random:60", seed=3).campaign_id
        wait_until(lambda: getattr(campaign(both, cid), "done", 0) >= 15, 120, "the campaign to measure a while")
        redis.kill("master")
        wait_until(lambda: redis.replication("replica").get("role") == "master", 60, "Sentinel to promote the replica")
        wait_until(lambda: getattr(campaign(both, cid), "status", "") == "done", 300, "the campaign to end")
        stored_once(both, redis.url, cid, 60)
        stop(board, a, b)
    finally:
        redis.end()
