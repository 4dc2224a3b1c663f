"""More than one controller: one per SQLite data directory (a lock), one leader per Redis prefix (a lease with
fencing), standbys that refuse changes naming the leader and take over (docs/standby.md). Real processes."""

import json
import re
import sys

from jetfleet.controller.leader.dirlock import HOLDER_NAME

from . import procs

JETFLEET = [sys.executable, "-m", "jetfleet.cli"]


def start(args, **kw):
    return procs.spawn(JETFLEET + args, stdout=procs.PIPE, stderr=procs.STDOUT, **kw)


def listening_line(ctl) -> str:
    """The controller's start-up line (log lines before it skipped)."""
    seen = []
    for line in ctl.stdout:
        if re.search(r"listening on (127.0.0.1:\d+)", line):
            return line
        seen.append(line)
    raise AssertionError("the controller ended before listening:\n" + "".join(seen))


def listening(ctl) -> str:
    return re.search(r"listening on (127.0.0.1:\d+)", listening_line(ctl)).group(1)


def test_a_second_controller_on_one_sqlite_data_directory_is_refused_naming_the_first(tmp_path):
    data = str(tmp_path / "data")
    first = start(["controller", "serve", "--listen", "127.0.0.1:0", "--store", data])
    try:
        address = listening(first)
        holder = json.loads((tmp_path / "data" / HOLDER_NAME).read_text())
        assert holder["pid"] == first.pid and holder["address"] == address
        second = start(["controller", "serve", "--listen", "127.0.0.1:0", "--store", data])
        out, _ = second.communicate(timeout=60)
        assert second.returncode != 0
        assert out.startswith("error: store ") and "another controller uses this data directory" in out, out
        assert f"{address} (pid {first.pid} on " in out, out
        assert first.poll() is None   # the first goes on
    finally:
        first.terminate()
        assert first.wait(15) == 0
    assert not (tmp_path / "data" / HOLDER_NAME).exists()
    # the lock went with the first: a controller starts on the directory again
    again = start(["controller", "serve", "--listen", "127.0.0.1:0", "--store", data])
    try:
        listening(again)
    finally:
        again.terminate()
        assert again.wait(15) == 0


def test_the_lock_goes_with_a_killed_controller(tmp_path):
    data = str(tmp_path / "data")
    first = start(["controller", "serve", "--listen", "127.0.0.1:0", "--store", data])
    listening(first)
    first.kill()
    first.wait(10)
    again = start(["controller", "serve", "--listen", "127.0.0.1:0", "--store", data])
    try:
        listening(again)   # the kernel dropped the dead one's lock; its stale controller.json is rewritten
        assert json.loads((tmp_path / "data" / HOLDER_NAME).read_text())["pid"] == again.pid
    finally:
        again.terminate()
        assert again.wait(15) == 0


# --- Redis: one leader per prefix ---------------------------------------------------------------------------
def serve_redis(redis_server, prefix, *extra):
    return start(["controller", "serve", "--listen", "127.0.0.1:0", "--store", redis_server.url, "--store-prefix",
                  prefix, "--lease-ttl", "1.5", "--metrics-port", "0", *extra])


def metric(line: str, name: str) -> float:
    """A metric's value from a controller's /metrics endpoint, whose URL its start-up line printed."""
    import urllib.request

    url = re.search(r"metrics on (http://\S+/metrics)", line).group(1)
    text = urllib.request.urlopen(url, timeout=10).read().decode()
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    assert m, f"{name} not in {url}"
    return float(m.group(1))


def test_one_leader_per_prefix_a_standby_refuses_changes_naming_it_and_takes_over_when_it_dies(redis_server):
    from click.testing import CliRunner

    from jetfleet.cli.main import cli
    from jetfleet.client import OperatorClient
    from jetfleet.controller.leader.status import lab_status
    from jetfleet.shared.errors import NotFound

    from .harness import wait_until

    redis_server.flush()
    a = serve_redis(redis_server, "lab1")
    a_line = listening_line(a)
    a_address = re.search(r"listening on (127.0.0.1:\d+)", a_line).group(1)
    assert a_line.rstrip().endswith(", leader"), a_line
    b = serve_redis(redis_server, "lab1")
    b_line = listening_line(b)
    b_address = re.search(r"listening on (127.0.0.1:\d+)", b_line).group(1)
    assert f"standby (the leader is {a_address} (pid {a.pid} on " in b_line, b_line
    # another lab on the same Redis stays apart: it leads its own prefix
    other = serve_redis(redis_server, "lab2")
    assert listening_line(other).rstrip().endswith(", leader")

    r = CliRunner().invoke(cli, ["controller", "status", "--store", redis_server.url, "--store-prefix", "lab1"])
    assert r.exit_code == 0 and f"leader {a_address} (pid {a.pid} on " in r.output, r.output
    assert f"\nstandby {b_address} (pid {b.pid} on " in r.output, r.output   # lab2's controller is another lab's
    assert r.output.count("standby ") == 1, r.output
    assert metric(a_line, "jetfleet_controller_leader") == 1 and metric(b_line, "jetfleet_controller_leader") == 0

    import grpc

    from jetfleet.shared.grpc_errors import leader_of
    from jetfleet.shared.proto import operator_pb2, operator_pb2_grpc

    with grpc.insecure_channel(b_address) as channel:   # the wire: what any client sees
        stub = operator_pb2_grpc.OperatorStub(channel)
        calls = (("SetMode", lambda: stub.SetMode(operator_pb2.SetModeRequest(device_id="nr-0", mode="MAXN"), timeout=10)),
                 ("ListDevices", lambda: stub.ListDevices(operator_pb2.ListDevicesRequest(), timeout=10)))
        for name, call in calls:   # changes, and reads too while the leader is known: its answer is the live one
            try:
                call()
                raise AssertionError(f"a standby answered {name}")
            except grpc.RpcError as e:
                assert e.code() == grpc.StatusCode.UNAVAILABLE, e
                assert f"this controller is a standby and does not serve {name}" in e.details(), e.details()
                assert f"the leader is {a_address} (pid {a.pid}" in e.details(), e.details()
                assert leader_of(e) == a_address
    with OperatorClient(b_address) as c:   # the client library goes where the standby says
        try:
            c.set_mode("nr-0", "MAXN")
            raise AssertionError("an unknown board's mode was set")
        except NotFound:
            assert c.address == a_address

    a.kill()   # -9: no clean shutdown, the lease expires by itself
    a.wait(10)
    wait_until(lambda: (lambda s: s.leader is not None and s.leader.pid == b.pid)(lab_status(redis_server.url, "lab1")),
               30, "the standby to take the lead")
    assert lab_status(redis_server.url, "lab1").token == 2   # a new term: the dead leader's token is stale
    assert lab_status(redis_server.url, "lab2").leader.pid == other.pid
    wait_until(lambda: metric(b_line, "jetfleet_controller_leader") == 1, 10, "the new leader's gauge")
    assert metric(b_line, "jetfleet_controller_takeovers_total") == 1
    with OperatorClient(b_address) as c:
        try:
            c.set_mode("nr-0", "MAXN")
        except NotFound:   # it reached the operator API: the board is unknown, not the call refused
            pass
    for p in (b, other):
        p.terminate()
        assert p.wait(15) == 0


def test_a_superseded_leaders_writes_are_refused_and_change_nothing(redis_server):
    """Fencing, on the store's own calls: a leader paused past its lease, then continued, writes nothing."""
    from jetfleet.controller.leader.identity import ControllerIdentity
    from jetfleet.controller.leader.lease import LeaseConfig, RedisLease
    from jetfleet.controller.store.base import Fenced
    from jetfleet.controller.store.redis import RedisStore

    from .harness import wait_until

    redis_server.flush()
    config = LeaseConfig(ttl_s=0.4, renew_every_s=0.1, try_every_s=0.1)
    stores = [RedisStore(redis_server.url, "fence"), RedisStore(redis_server.url, "fence")]
    try:
        leases = [RedisLease(s.client(1.0), "fence", ControllerIdentity(100 + i, "h", f"x:{i}", 0.0), config)
                  for i, s in enumerate(stores)]
        old, new = stores
        old.fence(leases[0].try_acquire())
        assert leases[0].token == 1 and leases[1].try_acquire() == 0
        new.fence(0)   # a standby: every write refused
        for write in (lambda s: s.put_doc("k", "d", {"by": "x"}), lambda s: s.put_catalog("m", {"c": 1})):
            try:
                write(new)
                raise AssertionError("a standby wrote")
            except Fenced:
                pass
        old.put_doc("k", "d", {"by": "old"})
        # the old leader stops renewing (paused); its lease expires and the standby takes a new term
        wait_until(lambda: leases[1].try_acquire() > 0, 10, "the lease to expire and be taken")
        new.fence(leases[1].token)
        assert leases[1].token == 2
        for write in (lambda s: s.put_doc("k", "d", {"by": "old again"}), lambda s: s.delete_doc("k", "d"),
                      lambda s: s.put_catalog("m", {"c": 2})):
            try:
                write(old)
                raise AssertionError("the superseded leader wrote")
            except Fenced as e:
                assert "fencing token 1" in e.message and "token is 2" in e.message, e.message
        assert old.get_doc("k", "d") == {"by": "old"} and old.get_catalog("m") is None   # nothing changed
        assert not leases[0].renew()   # it learns it lost the lead
        new.put_doc("k", "d", {"by": "new"})
        assert new.get_doc("k", "d") == {"by": "new"}
    finally:
        for s in stores:
            s.close()


def test_two_controllers_started_at_the_same_instant_elect_exactly_one(redis_server):
    from jetfleet.controller.leader.status import lab_status

    redis_server.flush()
    both = [serve_redis(redis_server, "race"), serve_redis(redis_server, "race")]
    lines = [listening_line(p) for p in both]
    roles = sorted("leader" if line.rstrip().endswith(", leader") else "standby" if ", standby (the leader is " in line
                   else line for line in lines)
    assert roles == ["leader", "standby"], lines
    leader = both[[line.rstrip().endswith(", leader") for line in lines].index(True)]
    st = lab_status(redis_server.url, "race")
    assert st.leader.pid == leader.pid and st.token == 1
    for p in both:
        p.terminate()
        assert p.wait(15) == 0
    # a clean stop gives the lease back at once: nobody leads, and no stale lease waits for its expiry
    assert lab_status(redis_server.url, "race").leader is None


def test_bad_controller_lists_and_prefixes_are_refused_naming_the_field(redis_server):
    from click.testing import CliRunner

    from jetfleet.cli.main import cli
    from jetfleet.shared.address import controller_list
    from jetfleet.shared.errors import InvalidArgument

    assert controller_list("a, b:7,a:50051,[::1]") == ["a:50051", "b:7", "[::1]:50051"]
    too_many = ",".join(f"h{i}" for i in range(17))
    for bad, why in (("a,,b", "an empty address"), ("a,b:0", "the port must be"), (too_many, "at most 16")):
        try:
            controller_list(bad)
            raise AssertionError(bad)
        except InvalidArgument as e:
            assert e.field == "controller" and why in e.message, e.message
    r = CliRunner().invoke(cli, ["controller", "status", "--store", redis_server.url, "--store-prefix", "two words"])
    assert r.exit_code == 3 and "store prefix 'two words'" in r.output, r.output
    r = CliRunner().invoke(cli, ["devices", "ls", "--controller", "127.0.0.1:1,,127.0.0.1:2"])
    assert r.exit_code == 3 and "an empty address in the list" in r.output, r.output
