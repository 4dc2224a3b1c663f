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


def _profile(source="c1", mode="12/2201.6/1300.5/3199", obs=0, model="agx-orin", workload="resnet18", raw=True):
    from jetfleet.controller.store import ProfileRecord

    samples = {"minibatch_times_s": [0.055] * 40, "power": [[1.0, 48.0, {"VDD_GPU_SOC": 30.0}]]}
    return ProfileRecord(source, mode, obs, model, "dev-1", workload, 55.0, 48.0, 10.0, 55.2, 2.6, 22, True,
                         samples if raw else None)


def test_campaigns_modes_and_results_exactly_once(store_spec):
    from jetfleet.controller.store import CampaignRecord, ModeState

    s = open_store(store_spec)
    modes = ["2/268.8/114.75/204", "12/2201.6/1300.5/3199", "4/1113.6/420.75/2133"]
    s.create_campaign(CampaignRecord("c1", "resnet18", "", "agx-orin", "presets", 40, 1.0), modes)
    assert s.get_campaign("c1").status == "running" and [c.campaign_id for c in s.list_campaigns()] == ["c1"]
    assert [m.mode for m in s.campaign_modes("c1")] == modes
    assert {m.status for m in s.campaign_modes("c1")} == {"pending"}
    s.set_mode_state("c1", ModeState(modes[1], "pending", 2, "dev-9", "went offline"))
    assert s.record_result(_profile()) is True
    assert s.record_result(_profile()) is False  # the retry's duplicate is dropped
    states = {m.mode: m for m in s.campaign_modes("c1")}
    assert states[modes[1]].status == "done" and states[modes[1]].device_id == "dev-1"
    assert states[modes[0]].status == "pending"
    got = s.query_profiles(source="c1", with_raw=True)
    assert len(got) == 1 and got[0].raw["minibatch_times_s"] == [0.055] * 40 and got[0].steady_state_found
    assert s.query_profiles(source="c1")[0].raw is None
    s.set_campaign_status("c1", "done", 5.0)
    assert (s.get_campaign("c1").status, s.get_campaign("c1").finished_s) == ("done", 5.0)
    s.close()


def test_profiles_import_and_query(store_spec):
    s = open_store(store_spec)
    rows = [_profile("import-1", m, obs, model, w, raw=False)
            for obs, (m, model, w) in enumerate([("1/345.6/140.25/1062.4", "tx2", "xception"),
                                                 ("1/345.6/140.25/1062.4", "tx2", "xception"),
                                                 ("12/2201.6/1300.5/3199", "agx-orin", "resnet18")])]
    s.import_profiles(rows, {"tx2-x": {"model": "tx2-x"}})
    assert len(s.query_profiles(board_model="tx2")) == 2
    assert len(s.query_profiles(workload="resnet18", board_model="agx-orin")) == 1
    assert len(s.query_profiles(mode="1/345.6/140.25/1062.4")) == 2
    assert s.get_catalog("tx2-x") == {"model": "tx2-x"} and s.get_catalog("nope") is None
    s.close()


def test_documents_by_kind_in_insertion_order(store_spec):
    s = open_store(store_spec)
    s.put_doc("model", "m2", {"v": 1})
    s.put_doc("model", "m1", {"v": 2})
    s.put_doc("decision", "d1", {"x": True})
    s.put_doc("model", "m2", {"v": 3})  # replaced, keeps its place
    assert s.list_docs("model") == [{"v": 3}, {"v": 2}] and s.get_doc("model", "m1") == {"v": 2}
    assert s.get_doc("model", "nope") is None and s.list_docs("decision") == [{"x": True}]
    s.close()
