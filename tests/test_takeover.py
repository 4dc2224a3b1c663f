"""Takeover, judged on the board (issue 27): two controllers on one Redis prefix, the leader killed -9 mid-job; the
standby takes the lease, loads the job and resumes it, and the board trains the job's length exactly once. Real
processes, a real redis-server; what the board trained is read from its own /metrics."""

from __future__ import annotations

import re
import sys
import time

import pytest

from jetfleet.client import OperatorClient
from jetfleet.shared.proto import operator_pb2 as op

from . import procs
from .harness import wait_until
from .test_exactly_once import NANO, job, job_end, trained

JETFLEET = [sys.executable, "-m", "jetfleet.cli"]
pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]


def seeded_redis(url: str, prefix: str, reference_nets) -> None:
    """The reference a job transfers from, written into the lab's prefix before any controller starts."""
    from jetfleet.controller.powertrain.artifacts import ModelRepo
    from jetfleet.controller.store.redis import RedisStore

    store = RedisStore(url, prefix)
    modes, (tn, pn) = reference_nets
    ModelRepo(store).save("reference", NANO, "resnet18", "", modes, tn, pn, {}, (0.0, 0.0, 0.0), None)
    store.close()


def controller(url: str, prefix: str) -> tuple[procs.Child, str]:
    c = procs.spawn([*JETFLEET, "controller", "serve", "--listen", "127.0.0.1:0", "--store", url, "--store-prefix",
                     prefix, "--lease-ttl", "2"], stdout=procs.PIPE, stderr=procs.STDOUT)
    for line in c.stdout:
        m = re.search(r"listening on (127.0.0.1:\d+)", line)
        if m:
            return c, m.group(1)
    raise AssertionError("the controller ended before listening")


def device(addresses: str, device_id: str) -> op.Device:
    try:
        with OperatorClient(addresses, timeout_s=5) as c:
            return c.call("GetDevice", op.GetDeviceRequest(device_id=device_id))
    except Exception:  # noqa: BLE001 - a takeover under way
        return op.Device()


def test_the_leader_killed_mid_job_the_standby_finishes_it_and_the_board_trains_it_once(redis_server, reference_nets):
    from jetfleet.controller.leader.status import lab_status

    n = 6000
    redis_server.flush()
    seeded_redis(redis_server.url, "lab", reference_nets)
    a, a_address = controller(redis_server.url, "lab")
    b, b_address = controller(redis_server.url, "lab")
    both = f"{b_address},{a_address}"   # the standby first: the client and the agent must find the leader
    board = procs.spawn([*JETFLEET, "agent", "run", "--controller", both, "--device", f"emulated:{NANO}:3", "--id",
                         "nano-a", "--speed", "100", "--metrics-port", "0", "--metrics-address", "127.0.0.1"],
                        stdout=procs.DEVNULL, stderr=procs.DEVNULL)
    wait_until(lambda: device(both, "nano-a").online, 60, "the agent online at the leader")
    metrics = device(both, "nano-a").metrics_address
    with OperatorClient(both) as c:   # refused by the standby, which names the leader; sent there
        jid = c.call("SubmitJob", op.SubmitJobRequest(workload="mobilenet_v3", power_budget_w=11, minibatches=n,
                                                      profile_modes=10, device_id="nano-a")).job_id
        assert c.address == a_address
    wait_until(lambda: (job(both, jid) or op.Job()).minibatches_done > 1000, 120, "the job to train a while")

    a.kill()   # -9 mid-job: no clean shutdown, the lease expires by itself
    killed = time.monotonic()
    a.wait(10)
    wait_until(lambda: (lambda s: s.leader is not None and s.leader.pid == b.pid)(lab_status(redis_server.url, "lab")),
               30, "the standby to take the lead")
    took_s = time.monotonic() - killed
    done = job_end(b_address, jid, "the job to end at the new leader")
    print(f"takeover {took_s:.2f} s after the kill")
    assert done.state == "done" and done.minibatches_done == n, done.detail
    assert trained(metrics, "nano-a") == n, "the board trained minibatches the job counted once"   # the board's word
    assert done.board_minibatches == n, done.runs
    board.terminate()
    b.terminate()
    assert board.wait(30) == 0 and b.wait(30) == 0


def campaign(addresses: str, campaign_id: str):
    try:
        with OperatorClient(addresses, timeout_s=5) as c:
            return c.get_campaign(campaign_id)
    except Exception:  # noqa: BLE001 - a takeover under way
        return None


def stored_once(addresses: str, url: str, campaign_id: str, modes: int) -> None:
    """The campaign ended with each of its ``modes`` modes done and stored once, as its first observation."""
    from jetfleet.controller.store.redis import RedisStore

    final = campaign(addresses, campaign_id)
    assert (final.total, final.done, final.failed) == (modes, modes, 0), final
    store = RedisStore(url, "lab")
    try:
        rows = store.query_profiles(source=campaign_id)
        states = store.campaign_modes(campaign_id)
    finally:
        store.close()
    assert len(rows) == modes and {r.mode for r in rows} == {s.mode for s in states}, len(rows)   # each mode once
    assert {r.observation for r in rows} == {0}, "a mode measured again was stored as a second observation"
    assert all(s.status == "done" for s in states)


def test_the_leader_killed_mid_campaign_the_standby_finishes_it_and_stores_each_mode_once(redis_server):
    from jetfleet.controller.leader.status import lab_status

    redis_server.flush()
    a, a_address = controller(redis_server.url, "lab")
    b, b_address = controller(redis_server.url, "lab")
    both = f"{a_address},{b_address}"
    board = procs.spawn([*JETFLEET, "agent", "run", "--controller", both, "--device", f"emulated:{NANO}:4", "--id",
                         "nano-c", "--speed", "100"], stdout=procs.DEVNULL, stderr=procs.DEVNULL)
    wait_until(lambda: device(both, "nano-c").online, 60, "the agent online at the leader")
    with OperatorClient(both) as c:
        cid = c.create_campaign("mobilenet_v3", device_id="nano-c", modes="random:60", seed=3).campaign_id
    wait_until(lambda: getattr(campaign(both, cid), "done", 0) >= 15, 120, "the campaign to measure a while")
    a.kill()   # -9 mid-campaign
    a.wait(10)
    wait_until(lambda: (lambda s: s.leader is not None and s.leader.pid == b.pid)(lab_status(redis_server.url, "lab")),
               30, "the standby to take the lead")
    wait_until(lambda: getattr(campaign(b_address, cid), "status", "") == "done", 300, "the campaign to end")
    stored_once(b_address, redis_server.url, cid, 60)
    board.terminate()
    b.terminate()
    assert board.wait(30) == 0 and b.wait(30) == 0


def test_a_leader_frozen_past_its_lease_stops_acting_when_continued_and_the_job_is_trained_once(redis_server,
                                                                                                reference_nets):
    """SIGSTOP past the lease: the standby takes over; the old leader, continued, finds its lease gone, stops acting
    (its writes fenced meanwhile) and exits for its supervisor to start it again as a standby."""
    import signal

    from jetfleet.controller.leader.status import lab_status

    n = 5000
    redis_server.flush()
    seeded_redis(redis_server.url, "lab", reference_nets)
    a, a_address = controller(redis_server.url, "lab")
    b, b_address = controller(redis_server.url, "lab")
    both = f"{a_address},{b_address}"
    board = procs.spawn([*JETFLEET, "agent", "run", "--controller", both, "--device", f"emulated:{NANO}:5", "--id",
                         "nano-f", "--speed", "100", "--metrics-port", "0", "--metrics-address", "127.0.0.1"],
                        stdout=procs.DEVNULL, stderr=procs.DEVNULL)
    wait_until(lambda: device(both, "nano-f").online, 60, "the agent online at the leader")
    metrics = device(both, "nano-f").metrics_address
    with OperatorClient(both) as c:
        jid = c.call("SubmitJob", op.SubmitJobRequest(workload="mobilenet_v3", power_budget_w=11, minibatches=n,
                                                      profile_modes=10, device_id="nano-f")).job_id
    wait_until(lambda: (job(both, jid) or op.Job()).minibatches_done > 800, 120, "the job to train a while")
    a.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: (lambda s: s.leader is not None and s.leader.pid == b.pid)(
            lab_status(redis_server.url, "lab")), 30, "the standby to take the lead")
    finally:
        a.send_signal(signal.SIGCONT)
    out, _ = a.communicate(timeout=60)   # it notices at its next renewal and exits
    assert a.returncode == 5, out[-3000:]
    assert "lost the lead" in out and "stopped acting" in out, out[-3000:]
    done = job_end(b_address, jid, "the job to end at the new leader")
    assert done.state == "done" and done.minibatches_done == n, done.detail
    assert trained(metrics, "nano-f") == n, "the board trained minibatches the job counted once"
    assert done.board_minibatches == n, done.runs
    board.terminate()
    b.terminate()
    assert board.wait(30) == 0 and b.wait(30) == 0
