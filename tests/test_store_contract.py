"""One contract, every store backend (SQLite and a real redis-server)."""

import os
import signal
import subprocess
import sys

from jetfleet.controller.store import CommandRecord, DeviceRecord, Event, open_store


def device(i: int, mode: str = "12/2201.6/1300.5/3199", seen: float = 100.0) -> DeviceRecord:
    return DeviceRecord(f"dev-{i}", "agx-orin", f"SER{i}", {"l4t": "36.3"}, {"model": "agx-orin", "cores": [1]},
                        True, mode, seen, seen)


def test_devices_upsert_get_list(store_spec):
    s = open_store(store_spec)
    assert s.get_device("dev-1") is None and s.list_devices() == []
    s.upsert_device(device(2))
    s.upsert_device(device(1))
    s.upsert_device(device(1, mode="2/268.8/114.75/204", seen=200.0))
    got = s.get_device("dev-1")
    assert got is not None and got.current_mode == "2/268.8/114.75/204"
    assert got.first_seen_s == 100.0 and got.last_seen_s == 200.0  # first seen is kept
    assert [d.device_id for d in s.list_devices()] == ["dev-1", "dev-2"]
    assert got.software == {"l4t": "36.3"} and got.catalog["model"] == "agx-orin" and got.emulated
    s.close()


def test_commands_are_inserted_once_and_finished(store_spec):
    s = open_store(store_spec)
    cmd = CommandRecord("c1", "dev-1", "set_mode", {"a": 1}, 5.0)
    assert s.insert_command(cmd) is True
    assert s.insert_command(CommandRecord("c1", "dev-2", "cancel", {}, 6.0)) is False
    got = s.get_command("c1")
    assert got is not None and got.device_id == "dev-1" and got.status == "pending" and got.payload == {"a": 1}
    s.finish_command("c1", "done", {"ok": True}, {}, 7.0)
    got = s.get_command("c1")
    assert got is not None and (got.status, got.result, got.finished_s) == ("done", {"ok": True}, 7.0)
    assert s.get_command("nope") is None
    s.close()


def test_events_newest_first_with_limit(store_spec):
    s = open_store(store_spec)
    for i in range(5):
        s.append_event(Event("dev-1", float(i), "mode", f"m{i}"))
    s.append_event(Event("dev-2", 9.0, "online", "x"))
    assert [e.detail for e in s.list_events("dev-1", 3)] == ["m4", "m3", "m2"]
    assert len(s.list_events("dev-2")) == 1
    s.close()


WRITER = """
import os, sys
from jetfleet.controller.store import open_store, CommandRecord
s = open_store(sys.argv[1])
for i in range(50):
    s.insert_command(CommandRecord(f"c{i}", "dev", "set_mode", {}, float(i)))
    print(i, flush=True)
os.kill(os.getpid(), 9)
"""


def test_acknowledged_writes_survive_a_crash_sqlite(tmp_path):
    spec = str(tmp_path / "data")
    out = subprocess.run([sys.executable, "-c", WRITER, spec], capture_output=True, text=True, timeout=60)
    assert out.returncode == -signal.SIGKILL
    acked = [int(x) for x in out.stdout.split()]
    s = open_store(spec)
    assert all(s.get_command(f"c{i}") is not None for i in acked) and len(acked) == 50
    s.close()


def test_acknowledged_writes_survive_a_crash_redis(redis_server, tmp_path):
    redis_server.flush()
    s = open_store(redis_server.url)
    for i in range(50):
        assert s.insert_command(CommandRecord(f"c{i}", "dev", "set_mode", {}, float(i)))
    s.upsert_device(device(7))
    s.close()
    redis_server.kill()  # SIGKILL: only the fsynced append-only file survives
    redis_server.start()
    s = open_store(redis_server.url)
    assert all(s.get_command(f"c{i}") is not None for i in range(50))
    assert s.get_device("dev-7") is not None
    s.close()
    assert os.path.isdir(redis_server.data_dir)
