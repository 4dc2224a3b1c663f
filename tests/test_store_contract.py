"""One contract, every store backend (SQLite and a real redis-server): one behaviour for every call."""

import logging
import math
import os
import signal
import sys
from dataclasses import asdict

import pytest

from jetfleet.controller.store import CampaignRecord, CommandRecord, DeviceRecord, Event, ModeState, RooflineRecord, open_store
from jetfleet.shared.errors import AlreadyExists, InvalidArgument, StoreUnavailable

from . import procs


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
    """A SIGKILL keeps the page cache, so surviving it alone proves little: the connection must also
    write a WAL journal synced in full (a power cut loses nothing acknowledged)."""
    spec = str(tmp_path / "data")
    out = procs.run([sys.executable, "-c", WRITER, spec], timeout=60)
    assert out.returncode == -signal.SIGKILL
    acked = [int(x) for x in out.stdout.split()]
    s = open_store(spec)
    assert all(s.get_command(f"c{i}") is not None for i in acked) and len(acked) == 50
    assert s.durability() == {"journal_mode": "wal", "synchronous": "full"}
    s.close()


def test_redis_without_fsync_on_every_write_is_reported(tmp_path, caplog):
    from .harness import RedisServer

    lax = RedisServer(tmp_path, appendfsync="everysec").start()
    try:
        with caplog.at_level(logging.WARNING, logger="jetfleet.controller.store.redis"):
            s = open_store(lax.url)
        assert s.durability() == {"appendonly": "yes", "appendfsync": "everysec"}
        assert any("appendfsync=everysec" in r.getMessage() for r in caplog.records)
        s.close()
    finally:
        lax.kill()


def test_acknowledged_writes_survive_a_crash_redis(redis_server, tmp_path, caplog):
    redis_server.flush()
    with caplog.at_level(logging.WARNING, logger="jetfleet.controller.store.redis"):
        s = open_store(redis_server.url)
    assert s.durability() == {"appendonly": "yes", "appendfsync": "always"} and not caplog.records
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

    power = 4.8 if model.startswith("tx2") else 48.0
    samples = {"minibatch_times_s": [0.055] * 40, "power": [[1.0, power, {"VDD_GPU_SOC": 30.0}]]}
    return ProfileRecord(source, mode, obs, model, "dev-1", workload, 55.0, power, 10.0, 55.2, 2.6, 22, True,
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


def test_whether_a_workload_has_profiles(store_spec):
    """What an import asks to tell a new workload from a known one (a typo from a name it has seen)."""
    s = open_store(store_spec)
    assert not s.has_profiles(workload="xception")
    s.import_profiles([_profile("import-2", workload="xception", raw=False)], {})
    assert s.has_profiles(workload="xception") and not s.has_profiles(workload="xceptio")
    assert not s.has_profiles(workload="resnet18")
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


def _roofline(model="nano", mode="4/1479/921.6/1600", peak=1.4e11, **kw):
    return RooflineRecord(board_model=model, mode=mode, peak_flops=peak, peak_bytes_per_s=1.8e10, idle_w=3.2,
                          compute_w=7.1, memory_w=6.2, compute_bytes_per_s=2.8e8, memory_flops=3e9, eps_flop_j=2.7e-11,
                          eps_byte_j=1.6e-10, pi0_w=3.2, device_id="nano-0", method="twin", measured_s=10.0, samples=48,
                          **kw)


def test_rooflines_per_board_model_and_mode_replaced_by_a_new_measurement(store_spec):
    s = open_store(store_spec)
    s.put_roofline(_roofline(mode="4/1479/921.6/1600"))
    s.put_roofline(_roofline(mode="2/918/614.4/1600", peak=9.6e10))
    s.put_roofline(_roofline(model="xavier-nx", mode="6/1907.2/1109.25/1866", peak=5.2e11))
    s.put_roofline(_roofline(mode="4/1479/921.6/1600", peak=1.5e11))   # measured again: replaces
    nano = s.get_rooflines("nano")
    assert [(r.mode, r.peak_flops) for r in nano] == [("2/918/614.4/1600", 9.6e10), ("4/1479/921.6/1600", 1.5e11)]
    assert nano[1] == _roofline(peak=1.5e11)
    assert [r.board_model for r in s.get_rooflines("xavier-nx")] == ["xavier-nx"] and s.get_rooflines("tx2") == []
    s.close()
    assert len(open_store(store_spec).get_rooflines("nano")) == 2    # durable across a reopen


@pytest.mark.parametrize("field,value", [("peak_flops", 0.0), ("idle_w", math.nan), ("eps_byte_j", -1e-12),
                                         ("board_model", "")])
def test_an_impossible_roofline_is_refused_and_nothing_is_written(store_spec, field, value):
    s = open_store(store_spec)
    with pytest.raises(InvalidArgument) as e:
        s.put_roofline(RooflineRecord(**{**asdict(_roofline()), field: value}))
    assert e.value.field == field and s.get_rooflines("nano") == []
    s.close()


def test_documents_deleted_once_and_durably(store_spec):
    s = open_store(store_spec)
    s.put_doc("fleet_cap", "lab", {"cap_w": 200.0})
    s.put_doc("fleet_cap", "rack-a", {"cap_w": 90.0})
    assert s.delete_doc("fleet_cap", "lab") and not s.delete_doc("fleet_cap", "lab")
    s.close()
    s = open_store(store_spec)
    assert s.get_doc("fleet_cap", "lab") is None and s.list_docs("fleet_cap") == [{"cap_w": 90.0}]
    s.close()


from jetfleet.controller.store.job_record import (  # noqa: E402 - beside the other job helpers
    ChoiceRecord,
    InferenceChoice,
    JobOptions,
    RunRecord,
    StepRecord,
    StreamSpec,
    Verdict,
)


def _job(job_id="j1", created=1.0):
    from jetfleet.controller.store import JobRecord

    return JobRecord(job_id, "mobilenet_v3", "agx-xavier-1", "agx-xavier", "power", 30.0, 0.0, 5000, created,
                     options=JobOptions(confidence=0.9, max_steps=3))


def test_jobs_created_once_listed_in_order_and_updated(store_spec):
    s = open_store(store_spec)
    assert s.get_job("j1") is None and s.list_jobs() == []
    assert s.create_job(_job("j2", 2.0)) is True
    assert s.create_job(_job("j1", 1.0)) is True
    dup = _job("j1", 9.0)
    dup.workload = "resnet18"
    assert s.create_job(dup) is False  # a retried submit: the first one stays
    assert [j.job_id for j in s.list_jobs()] == ["j1", "j2"]
    j = s.get_job("j1")
    assert (j.workload, j.options, j.state, j.steps) == ("mobilenet_v3", JobOptions(confidence=0.9, max_steps=3),
                                                         "queued", [])
    j.state, j.run_id, j.minibatches_done, j.energy_j = "running", "j1-r1", 10, 55.5
    j.steps.append(StepRecord(5.0, 10, "a", "b", "over", 31.0, 90.0, 28.0, 29.5, 95.0, "over", 99.0))
    j.runs.append(RunRecord("j1-r1", "agx-xavier-1", "i1", 1, 5000, 0, 0.0, 0.0, trained=10))
    j.choice = ChoiceRecord("a", "fastest under 30 W", 90.0, 95.0, 28.0, 29.9, 26.0, False, 0.9, covered=False,
                            inference=InferenceChoice(4, 80.0, 10.0, True, "given", 27.0, {"1": 5.0}))
    j.options.inference = StreamSpec("resnet18", 5.0, [], 5.0, 0.2, 4, 12.5)
    j.verdict = Verdict(True, False, "mean 31.00 W OVER the 30 W budget", "")
    s.update_job(j)
    got = s.get_job("j1")
    assert got == j   # every typed part comes back as it was stored
    assert got.run is got.runs[0] and got.device_id == "agx-xavier-1"
    s.update_job(_job("ghost"))  # unknown: ignored
    assert s.get_job("ghost") is None
    s.close()


def test_job_progress_only_moves_forward_for_the_current_run(store_spec):
    s = open_store(store_spec)
    j = _job()
    j.run_id = "r1"
    s.create_job(j)
    assert s.advance_job("j1", "r1", 100, 500.0, 20.0) is True
    assert s.advance_job("j1", "r1", 90, 450.0, 18.0) is False       # a late report: never back
    assert s.advance_job("j1", "r0", 200, 900.0, 40.0) is False      # a superseded command: never counted
    assert s.advance_job("j1", "r1", 100, 510.0, 21.0) is True       # same count, time and energy go on
    got = s.get_job("j1")
    assert (got.minibatches_done, got.energy_j, got.elapsed_s) == (100, 510.0, 21.0)
    got.run_id = "r2"                                                 # the job moved to a new command
    s.update_job(got)
    assert s.advance_job("j1", "r1", 300, 1.0, 99.0) is False
    assert s.advance_job("j1", "r2", 150, 700.0, 30.0) is True
    assert s.advance_job("nope", "r2", 1, 1.0, 1.0) is False
    assert s.get_job("j1").minibatches_done == 150
    s.close()
# --- one behaviour per call on every backend ----------------------------------------------------------
def test_upsert_does_not_change_the_callers_record(store_spec):
    s = open_store(store_spec)
    s.upsert_device(device(1, seen=100.0))
    later = device(1, seen=200.0)
    s.upsert_device(later)
    assert later.first_seen_s == 200.0  # the caller's record is its own
    assert s.get_device("dev-1").first_seen_s == 100.0
    s.close()


def test_forgetting_a_device_removes_it_and_its_events(store_spec):
    s = open_store(store_spec)
    s.upsert_device(device(1))
    s.upsert_device(device(2))
    s.append_event(Event("dev-1", 1.0, "online", "x"))
    assert s.delete_device("dev-1") is True and s.delete_device("dev-1") is False
    assert s.get_device("dev-1") is None and s.list_events("dev-1") == []
    assert [d.device_id for d in s.list_devices()] == ["dev-2"]
    s.close()


def test_events_limit_zero_gives_none_and_history_is_capped(store_spec):
    s = open_store(store_spec, max_events=5)
    for i in range(8):
        s.append_event(Event("dev-1", float(i), "mode", f"m{i}"))
    assert s.list_events("dev-1", 0) == [] and s.list_events("dev-1", -1) == []
    assert [e.detail for e in s.list_events("dev-1", 100)] == ["m7", "m6", "m5", "m4", "m3"]
    s.close()


def test_a_campaign_id_is_created_once(store_spec):
    s = open_store(store_spec)
    s.create_campaign(CampaignRecord("c1", "resnet18", "", "agx-orin", "presets", 40, 1.0), ["2/268.8/114.75/204"])
    with pytest.raises(AlreadyExists, match="c1"):
        s.create_campaign(CampaignRecord("c1", "lstm", "", "tx2", "full", 10, 2.0), ["4/2035.2/1300.5/1866"])
    assert s.get_campaign("c1").workload == "resnet18"
    assert [m.mode for m in s.campaign_modes("c1")] == ["2/268.8/114.75/204"]
    s.close()


@pytest.mark.parametrize("change,field", [
    ({"power_w": math.nan}, "power_w"), ({"power_w": -3.0}, "power_w"), ({"power_w": 1e308}, "power_w"),
    ({"power_w": 121.0}, "power_w"),  # above the AGX Orin's 120 W limit
    ({"minibatch_time_ms": -1.0}, "minibatch_time_ms"), ({"minibatch_time_ms": math.inf}, "minibatch_time_ms"),
    ({"observed_at": math.nan}, "observed_at"), ({"mode": "fast"}, "mode"),
])
def test_an_impossible_result_is_refused_and_nothing_is_written(store_spec, change, field):
    s = open_store(store_spec)
    mode = "12/2201.6/1300.5/3199"
    s.create_campaign(CampaignRecord("c1", "resnet18", "", "agx-orin", "presets", 40, 1.0), [mode])
    bad = _profile(**{k: v for k, v in {"mode": change.get("mode", mode)}.items()})
    for k, v in change.items():
        setattr(bad, k, v)
    with pytest.raises(InvalidArgument) as e:
        s.record_result(bad)
    assert e.value.field == field
    with pytest.raises(InvalidArgument):
        s.import_profiles([_profile("import-1", raw=False), bad], {"x-model": {"model": "x-model"}})
    assert s.query_profiles() == [] and s.get_catalog("x-model") is None
    assert [m.status for m in s.campaign_modes("c1")] == ["pending"]
    s.close()


def test_import_keeps_stored_rows_and_catalogs(store_spec):
    """Importing rows whose keys are stored adds nothing and overwrites nothing; a stored catalog is kept."""
    s = open_store(store_spec)
    first = [_profile("import-a", "1/345.6/140.25/1062.4", 0, "tx2", "xception", raw=False),
             _profile("import-a", "1/345.6/140.25/1062.4", 1, "tx2", "xception", raw=False)]
    assert s.import_profiles(first, {"tx2-x": {"model": "tx2-x", "v": 1}}) == 2
    again = [_profile("import-a", "1/345.6/140.25/1062.4", 1, "tx2", "other", raw=False),
             _profile("import-a", "1/345.6/140.25/1062.4", 2, "tx2", "xception", raw=False)]
    assert s.import_profiles(again, {"tx2-x": {"model": "tx2-x", "v": 2}}) == 1
    got = s.query_profiles(source="import-a")
    assert [(g.observation, g.workload) for g in got] == [(0, "xception"), (1, "xception"), (2, "xception")]
    assert s.get_catalog("tx2-x") == {"model": "tx2-x", "v": 1}
    assert s.import_profiles(first, {}) == 0
    s.close()


def test_a_result_is_recorded_once_with_its_mode_and_attempts(store_spec):
    s = open_store(store_spec)
    mode = "12/2201.6/1300.5/3199"
    s.create_campaign(CampaignRecord("c1", "resnet18", "", "agx-orin", "presets", 40, 1.0), [mode])
    s.set_mode_state("c1", ModeState(mode, "pending", 2, "dev-9", "went offline"))
    assert s.record_result(_profile()) is True
    state = s.campaign_modes("c1")[0]
    assert asdict(state) == asdict(ModeState(mode, "done", 2, "dev-1", ""))
    s.close()


def test_an_unreachable_redis_is_store_unavailable_and_comes_back(tmp_path):
    from .harness import RedisServer

    server = RedisServer(tmp_path).start()
    try:
        s = open_store(server.url)
        s.upsert_device(device(1))
        server.kill()
        with pytest.raises(StoreUnavailable, match="store unavailable"):
            s.list_devices()
        with pytest.raises(StoreUnavailable):
            s.record_result(_profile())
        server.start()
        assert [d.device_id for d in s.list_devices()] == ["dev-1"]
        s.close()
    finally:
        server.kill()


def _profile_result_pb(columns: bool):
    """A board's ProfileResult with three power samples, as samples or as columns."""
    from jetfleet.shared.columns import columns_from_samples
    from jetfleet.shared.proto import agent_pb2, common_pb2

    samples = [common_pb2.TelemetrySample(t_s=10.0 + i / 10, rails_w={"VDD_GPU_SOC": 20.0 + i, "VDD_CPU_CV": 5.0},
                                          total_w=25.0 + i, cpu_mhz=2201.6, gpu_mhz=1300.5, mem_mhz=3199.0,
                                          cores_online=12, temps_c={"cpu": 40.0}) for i in range(3)]
    p = agent_pb2.ProfileResult(workload="resnet18", minibatch_times_s=[0.055] * 40, window_start_s=10.0,
                                window_end_s=12.2)
    if columns:
        p.power_columns.CopyFrom(columns_from_samples(samples))
    else:
        p.power.extend(samples)
    return p


@pytest.mark.parametrize("columns", [False, True])
def test_a_result_with_its_command_is_one_write_and_raw_samples_read_back(store_spec, columns):
    from dataclasses import replace

    s = open_store(store_spec)
    mode = "12/2201.6/1300.5/3199"
    s.create_campaign(CampaignRecord("c1", "resnet18", "", "agx-orin", "presets", 40, 1.0), [mode])
    s.set_mode_state("c1", ModeState(mode, "pending", 1, "dev-9", "went offline"),
                     CommandRecord("c1-0-dev-9", "dev-9", "run_profile", {"a": 1}, 5.0, "pending",
                                   error={"code": "UNAVAILABLE", "message": "gone"}))
    assert s.get_command("c1-0-dev-9").error["code"] == "UNAVAILABLE"
    assert s.campaign_modes("c1")[0].attempts == 1
    rec = replace(_profile(raw=False), raw_pb=_profile_result_pb(columns).SerializeToString())
    cmd = CommandRecord("c1-0-dev-1", "dev-1", "run_profile", {"runProfile": {"workload": "resnet18"}}, 6.0, "done",
                        {"ok": True, "compacted": True}, {}, 7.0)
    assert s.record_result(rec, cmd) is True
    got = s.get_command("c1-0-dev-1")
    assert (got.status, got.result, got.finished_s, got.created_s) == ("done", {"ok": True, "compacted": True}, 7.0, 6.0)
    assert asdict(s.campaign_modes("c1")[0]) == asdict(ModeState(mode, "done", 1, "dev-1", ""))
    raw = s.query_profiles(source="c1", with_raw=True)[0].raw
    assert raw["minibatch_times_s"] == [0.055] * 40 and raw["window"] == [10.0, 12.2]
    assert raw["power"] == [[10.0 + i / 10, 25.0 + i, {"VDD_GPU_SOC": 20.0 + i, "VDD_CPU_CV": 5.0}] for i in range(3)]
    # a duplicate from a retry by another command: the result and mode are kept, the command is logged
    again = CommandRecord("c1-0-dev-2", "dev-2", "run_profile", {}, 8.0, "done", {"ok": True}, {}, 9.0)
    assert s.record_result(replace(rec, device_id="dev-2"), again) is False
    assert s.get_command("c1-0-dev-2").status == "done"
    assert s.campaign_modes("c1")[0].device_id == "dev-1" and len(s.query_profiles(source="c1")) == 1
    # an entry written again (the command resent, then answered) is replaced by the newer one
    s.set_mode_state("c1", s.campaign_modes("c1")[0],
                     CommandRecord("c1-0-dev-9", "dev-9", "run_profile", {"a": 1}, 99.0, "failed", {"ok": False}, {}, 9.5))
    got = s.get_command("c1-0-dev-9")
    assert (got.status, got.finished_s, got.created_s, got.error) == ("failed", 9.5, 99.0, {})
    s.close()


def test_results_recorded_together_each_once_with_its_mode_and_command(store_spec):
    """A group commit (``record_results``): each result stored once with its mode done and its command's log entry;
    one stored already (by an earlier write, or twice in the group) is a duplicate, and only its entry is written."""
    s = open_store(store_spec)
    modes = ["2/268.8/114.75/204", "12/2201.6/1300.5/3199", "4/1113.6/420.75/2133"]
    s.create_campaign(CampaignRecord("c1", "resnet18", "", "agx-orin", "presets", 40, 1.0), modes)
    assert s.record_result(_profile(mode=modes[1])) is True

    def cmd(i: int) -> CommandRecord:
        return CommandRecord(f"c1-{i}-dev-1", "dev-1", "run_profile", {}, 1.0, "done", {"ok": True}, "", 2.0)

    got = s.record_results([(_profile(mode=modes[0]), cmd(0)), (_profile(mode=modes[1]), cmd(1)),
                            (_profile(mode=modes[2]), cmd(2)), (_profile(mode=modes[2]), cmd(3))])
    assert got == [True, False, True, False]
    assert {m.mode: (m.status, m.device_id) for m in s.campaign_modes("c1")} == {m: ("done", "dev-1") for m in modes}
    assert sorted(p.mode for p in s.query_profiles(source="c1")) == sorted(modes)   # one row a mode
    assert all(s.get_command(f"c1-{i}-dev-1").status == "done" for i in range(4))
    assert s.record_results([]) == []
    bad = _profile(mode=modes[0], source="c2")
    bad.power_w = math.nan
    s.create_campaign(CampaignRecord("c2", "resnet18", "", "agx-orin", "presets", 40, 1.0), modes)
    with pytest.raises(InvalidArgument) as e:   # one impossible record: nothing of the group is written
        s.record_results([(_profile(mode=modes[1], source="c2"), cmd(5)), (bad, cmd(6))])
    assert e.value.field == "power_w"
    assert s.query_profiles(source="c2") == [] and s.get_command("c1-5-dev-1") is None
    assert {m.status for m in s.campaign_modes("c2")} == {"pending"}
    s.close()
