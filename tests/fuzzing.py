"""Hypothesis strategies for hostile input: agent messages and operator requests, generated from the wire
types (any value each field can hold on the wire) and mutated from real messages, plus the checks that
the controller's state holds nothing invalid afterwards."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import strategies as st

from jetfleet.controller.server import Controller
from jetfleet.shared.bounds import check_id
from jetfleet.shared.catalog import MAX_CATALOG_MODES, builtin_catalogs, catalog_from_dict, get_catalog
from jetfleet.shared.columns import columns_from_samples
from jetfleet.shared.convert import catalog_to_pb, mode_to_pb, sample_to_pb
from jetfleet.shared.proto import agent_pb2, common_pb2, operator_pb2
from jetfleet.shared.workloads import WORKLOADS
from jetfleet.twin.board import EmulatedBoard

UINT32 = st.integers(0, 2**32 - 1)
UINT64 = st.integers(0, 2**64 - 1)
FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(
    [0.0, -0.0, 1e-300, 1e300, -1e308, 2**32 - 1, 0.1, 1.0, 10.0, 60.0, 1300.5, 3199.0]))
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
BIG = st.sampled_from(["x" * 70_000, "\u0430" * 5_000, "a/" * 2_000, "\n" * 1000])
NAMES = st.one_of(TEXT, BIG, st.sampled_from(sorted(WORKLOADS) + sorted(builtin_catalogs()) + [
    "agx-orin-0", "tx2-0", "MAXN", "\u0430gx-orin-0", "../x", "", "x" * 65, "VDD_IN", "random:1", "full",
    "powertrain", "presets", "random:0", "random:99999999999", "12/2201.6/1300.5/3199", "pause", "resume", "cancel"]))
MODE = st.builds(common_pb2.PowerMode, cores=UINT32, cpu_mhz=FLOATS, gpu_mhz=FLOATS, mem_mhz=FLOATS)
REAL_MODE = st.sampled_from([mode_to_pb(m) for m in get_catalog("tx2").sample(20, 1)])
LABELS = st.one_of(NAMES, st.sampled_from(["VDD_IN", "VDD_GPU_SOC", "cpu", "gpu", "t" * 300]))


def _floats_list(max_size: int = 8) -> st.SearchStrategy[list[float]]:
    return st.lists(FLOATS, max_size=max_size)


CATALOG = st.one_of(
    st.sampled_from([catalog_to_pb(c) for c in builtin_catalogs().values()]),
    st.builds(common_pb2.Catalog, model=NAMES, name=st.one_of(TEXT, BIG), cores=st.lists(UINT32, max_size=8),
              cpu_mhz=_floats_list(), gpu_mhz=_floats_list(), mem_mhz=_floats_list(),
              presets=st.dictionaries(LABELS, MODE, max_size=3),
              rails=st.lists(st.builds(common_pb2.Rail, label=LABELS, parts=st.lists(TEXT, max_size=3),
                                       in_total=st.booleans()), max_size=4),
              grids=st.dictionaries(LABELS, st.builds(common_pb2.Grid, cores=_floats_list(3)), max_size=2)),
    st.builds(lambda n: common_pb2.Catalog(model="wide", cores=range(1, 257), cpu_mhz=range(1, 257),
                                           gpu_mhz=range(1, 257), mem_mhz=range(1, n + 1)), st.integers(1, 256)))
BOARD = st.builds(common_pb2.BoardInfo, device_id=st.one_of(NAMES, st.just("fz-board")),
                  model=st.one_of(NAMES, st.just("tx2")), serial=st.one_of(TEXT, st.just("S1"), BIG),
                  software=st.dictionaries(LABELS, st.one_of(TEXT, BIG), max_size=4), catalog=CATALOG,
                  emulated=st.booleans(), workloads=st.lists(NAMES, max_size=4))
HELLO = st.builds(lambda b, m, v, p, mp: agent_pb2.AgentMessage(hello=agent_pb2.Hello(
    board=b, current_mode=m, agent_version=v, protocol=p, metrics_port=mp)),
    BOARD, st.one_of(MODE, REAL_MODE), st.one_of(TEXT, BIG), st.one_of(st.just(1), UINT32), UINT32)
SAMPLE = st.builds(common_pb2.TelemetrySample, t_s=FLOATS, rails_w=st.dictionaries(LABELS, FLOATS, max_size=5),
                   total_w=FLOATS, cpu_mhz=FLOATS, gpu_mhz=FLOATS, mem_mhz=FLOATS, cores_online=UINT32,
                   temps_c=st.dictionaries(LABELS, FLOATS, max_size=4), cpu_util=FLOATS, gpu_util=FLOATS)
def _block(n: int, rails: list[str], temps: list[str], values: list[float], junk: bytes, exact: bool) -> Any:
    """A SampleColumns block: numbers of the right count for its layout (or not), or any bytes at all."""
    from array import array

    need = n * (8 + len(rails) + len(temps))
    numbers = array("d", (values * (need // max(1, len(values)) + 1))[:need] if values else [0.0] * need)
    return common_pb2.SampleColumns(samples=n, rails=rails, temps=temps, values=numbers.tobytes() if exact else junk)


COLUMNS = st.builds(_block, st.integers(0, 12), st.lists(LABELS, max_size=5), st.lists(LABELS, max_size=4),
                    st.lists(FLOATS, max_size=16), st.binary(max_size=256), st.booleans())
COMMAND_IDS = st.one_of(NAMES, st.sampled_from(["c1", "fz-cmd", "x" * 161]))
PROFILE = st.builds(agent_pb2.ProfileResult, workload=NAMES, mode=st.one_of(MODE, REAL_MODE),
                    minibatch_times_s=st.lists(FLOATS, max_size=50), power=st.lists(SAMPLE, max_size=20),
                    steady_state_found=st.booleans(), window_start_s=FLOATS, window_end_s=FLOATS,
                    power_columns=st.one_of(st.none(), COLUMNS))


def _result(cid: str, ok: bool, kind: str, parts: int, profile: Any, mode: Any) -> agent_pb2.CommandResult:
    r = agent_pb2.CommandResult(command_id=cid, ok=ok, parts=parts)
    if kind == "profile":
        r.profile.CopyFrom(profile)
    elif kind == "confirmed_mode":
        r.confirmed_mode.CopyFrom(mode)
    elif kind == "cancelled":
        r.cancelled = ok
    return r


RESULT = st.builds(_result, COMMAND_IDS, st.booleans(), st.sampled_from(["profile", "confirmed_mode", "cancelled", ""]),
                   st.one_of(st.just(0), UINT32), PROFILE, st.one_of(MODE, REAL_MODE))
AGENT_MESSAGE = st.one_of(
    HELLO,
    st.builds(lambda t, m, b: agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat(t_s=t, current_mode=m,
                                                                                  busy_command_id=b)),
              FLOATS, st.one_of(MODE, REAL_MODE), TEXT),
    st.builds(lambda s, d: agent_pb2.AgentMessage(telemetry=agent_pb2.TelemetryBatch(samples=s, dropped=d)),
              st.lists(SAMPLE, max_size=10), UINT64),
    st.builds(lambda c, s, t, m: agent_pb2.AgentMessage(telemetry=agent_pb2.TelemetryBatch(
        columns=c, samples=s, heartbeat=agent_pb2.Heartbeat(t_s=t, current_mode=m))),
        COLUMNS, st.lists(SAMPLE, max_size=3), FLOATS, st.one_of(MODE, REAL_MODE)),
    st.builds(lambda c, a, code: agent_pb2.AgentMessage(ack=agent_pb2.CommandAck(
        command_id=c, accepted=a, error=common_pb2.Error(code=code, message=code))), COMMAND_IDS, st.booleans(), TEXT),
    st.builds(lambda r: agent_pb2.AgentMessage(result=r), RESULT),
    st.builds(lambda c, n, t, e, el, m, f: agent_pb2.AgentMessage(progress=agent_pb2.TrainingProgress(
        command_id=c, minibatches_done=n, t_s=t, energy_j=e, elapsed_s=el, mode=m, final=f)),
        COMMAND_IDS, UINT64, FLOATS, FLOATS, FLOATS, st.one_of(MODE, REAL_MODE), st.booleans()),
    st.builds(lambda c, i, t, p: agent_pb2.AgentMessage(result_part=agent_pb2.ResultPart(
        command_id=c, index=i, minibatch_times_s=t, power=p)), COMMAND_IDS, UINT32, _floats_list(), st.lists(SAMPLE, max_size=4)),
    st.just(agent_pb2.AgentMessage()))


def real_messages() -> list[agent_pb2.AgentMessage]:
    """Messages a real agent on a twin sends: the seeds the mutations start from."""
    board = EmulatedBoard("tx2", 3)
    info = board.describe()
    hello = agent_pb2.AgentMessage(hello=agent_pb2.Hello(board=common_pb2.BoardInfo(
        device_id="fz-real", model=info.model, serial=info.serial, software=dict(info.software),
        catalog=catalog_to_pb(info.catalog), emulated=True, workloads=sorted(WORKLOADS)),
        current_mode=mode_to_pb(board.read_mode()), protocol=1))
    batch = agent_pb2.AgentMessage(telemetry=agent_pb2.TelemetryBatch(samples=[sample_to_pb(board.sample())] * 3))
    beat = agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat(t_s=1.0, current_mode=mode_to_pb(board.read_mode())))
    folded = agent_pb2.AgentMessage(telemetry=agent_pb2.TelemetryBatch(
        columns=columns_from_samples([board.sample() for _ in range(3)]), heartbeat=beat.heartbeat))
    return [hello, batch, beat, folded]


def mutated(seeds: list[agent_pb2.AgentMessage]) -> st.SearchStrategy[agent_pb2.AgentMessage | None]:
    """A real message with some of its bytes replaced; None when the result is no longer a message."""
    def mutate(i: int, edits: list[tuple[int, int]]) -> agent_pb2.AgentMessage | None:
        data = bytearray(seeds[i % len(seeds)].SerializeToString())
        for pos, value in edits:
            data[pos % len(data)] = value
        msg = agent_pb2.AgentMessage()
        try:
            msg.ParseFromString(bytes(data))
        except Exception:  # noqa: BLE001 - gRPC would not deliver it
            return None
        return msg

    return st.builds(mutate, st.integers(0, 100), st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)),
                                                           min_size=1, max_size=6))


# --- operator requests: (method name, request) ------------------------------------------------------
OPERATOR = st.one_of(
    st.tuples(st.just("list_devices"), NAMES),
    st.tuples(st.just("get_device"), NAMES),
    st.tuples(st.just("forget_device"), NAMES),
    st.tuples(st.just("set_mode"), st.builds(operator_pb2.SetModeRequest, device_id=NAMES, mode=NAMES,
                                             request_id=NAMES, timeout_s=FLOATS)),
    st.tuples(st.just("watch"), st.tuples(NAMES, UINT32, FLOATS)),
    st.tuples(st.just("create"), st.builds(operator_pb2.CreateCampaignRequest, workload=NAMES,
                                           device_id=st.one_of(st.just(""), NAMES),
                                           board_model=st.one_of(st.just(""), NAMES), modes=NAMES,
                                           mode_list=st.lists(st.one_of(NAMES, st.just("MAXN")), max_size=4),
                                           minibatches=UINT32, seed=UINT32)),
    st.tuples(st.just("control"), st.tuples(NAMES, NAMES)),
    st.tuples(st.just("export"), st.builds(operator_pb2.ExportProfilesRequest, board_model=NAMES, workload=NAMES,
                                           device_id=NAMES, campaign_id=NAMES)),
    st.tuples(st.just("import"), st.tuples(st.one_of(TEXT, BIG, st.builds(
        lambda rows: "board_model,workload,cpu_cores,cpu_mhz,gpu_mhz,mem_mhz,minibatch_time_ms,power_w\n"
        + "\n".join(",".join(r) for r in rows), st.lists(st.lists(st.one_of(TEXT, st.sampled_from(
            ["tx2", "fz-model", "resnet18", "4", "2035.2", "1300.5", "1866", "55", "1e308", "nan", "-1"])),
            min_size=8, max_size=8), max_size=5))), TEXT)),
    # epochs: both sides of the bound, never a long training (a fuzzed import may store rows to train on)
    st.tuples(st.just("train"), st.builds(operator_pb2.TrainReferenceRequest, board_model=NAMES, workload=NAMES,
                                          campaign_id=NAMES, epochs=st.one_of(st.integers(0, 20),
                                                                              st.integers(10_001, 2**32 - 1)),
                                          no_dropout=st.booleans())),
    st.tuples(st.just("transfer"), st.builds(operator_pb2.TransferModelRequest, reference_id=NAMES,
                                             reference_board_model=NAMES, reference_workload=NAMES,
                                             board_model=NAMES, workload=NAMES, campaign_id=NAMES)),
    st.tuples(st.just("predict"), st.builds(operator_pb2.PredictRequest, board_model=NAMES, workload=NAMES,
                                            model_id=NAMES, grid=NAMES, pareto_only=st.booleans())),
    st.tuples(st.just("optimize"), st.builds(operator_pb2.OptimizeRequest, device_id=NAMES, board_model=NAMES,
                                             workload=NAMES, model_id=NAMES, power_budget_w=FLOATS,
                                             deadline_s=FLOATS, min_energy=st.booleans(),
                                             minibatches_per_epoch=UINT32, apply=st.booleans(),
                                             verify_minibatches=UINT32, refine=st.booleans())),
    # jobs: every field on both sides of its bound; a job that passes its checks may start profiling
    st.tuples(st.just("submit_job"), st.builds(operator_pb2.SubmitJobRequest, workload=NAMES,
                                               device_id=st.one_of(st.just(""), NAMES),
                                               board_model=st.one_of(st.just(""), NAMES), power_budget_w=FLOATS,
                                               deadline_s=FLOATS, min_energy=st.booleans(), minibatches=UINT64,
                                               epochs=UINT32, minibatches_per_epoch=UINT32, profile_modes=UINT32,
                                               strategy=NAMES, confidence=FLOATS, max_steps=UINT32, window_s=FLOATS,
                                               request_id=NAMES)),
    st.tuples(st.just("get_job"), NAMES),
    st.tuples(st.just("cancel_job"), NAMES),
)


def check_state(ctl: Controller) -> dict[str, int]:
    """Everything the controller keeps is valid: ids, bounded catalogs and records, possible profiles."""
    store = ctl.store
    devices = store.list_devices()
    for d in devices:
        check_id(d.device_id, "device_id")
        assert catalog_from_dict(d.catalog).size <= MAX_CATALOG_MODES
        assert len(d.software) <= 32 and all(len(v.encode()) <= 256 for v in d.software.values())
    rows = store.query_profiles()
    for r in rows:
        r.check()
        check_id(r.board_model, "board_model")
        check_id(r.workload, "workload")
    for c in store.list_campaigns():
        assert c.workload in WORKLOADS
    for device_id in list(ctl.telemetry._boards):
        for s in ctl.telemetry.window(device_id):
            assert all(math.isfinite(v) and v >= 0 for v in s.rails_w.values())
    return {"devices": len(devices), "profiles": len(rows), "campaigns": len(store.list_campaigns())}


async def call_operator(ctl: Controller, name: str, req: Any) -> None:
    """One operator call the way the servicer makes it (an async generator is read for its first item)."""
    svc = ctl.service
    calls = {
        "list_devices": lambda: svc.list_devices(req), "get_device": lambda: svc.get_device(req),
        "forget_device": lambda: svc.forget_device(req), "set_mode": lambda: svc.set_mode(req),
        "create": lambda: svc.campaigns.create(req), "control": lambda: svc.campaigns.control(*req),
        "export": lambda: svc.export_profiles(req), "import": lambda: svc.import_csv(*req),
        "train": lambda: svc.models.train_reference(req), "transfer": lambda: svc.models.transfer(req),
        "predict": lambda: svc.models.predict(req), "optimize": lambda: svc.models.optimize(req),
        "submit_job": lambda: svc.jobs.submit(req), "get_job": lambda: svc.jobs.get(req),
        "cancel_job": lambda: svc.jobs.cancel(req),
    }
    if name == "watch":
        gen = svc.watch(*req)
        try:
            await gen.__anext__()
        except StopAsyncIteration:
            pass
        finally:
            await gen.aclose()
        return
    out = calls[name]()
    if hasattr(out, "__await__"):
        await out
