from jetfleet.shared.proto import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AgentMessage(_message.Message):
    __slots__ = ("hello", "heartbeat", "telemetry", "ack", "result", "result_part", "progress", "results")
    HELLO_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    TELEMETRY_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    RESULT_PART_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    hello: Hello
    heartbeat: Heartbeat
    telemetry: TelemetryBatch
    ack: CommandAck
    result: CommandResult
    result_part: ResultPart
    progress: TrainingProgress
    results: ResultBatch
    def __init__(self, hello: _Optional[_Union[Hello, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., telemetry: _Optional[_Union[TelemetryBatch, _Mapping]] = ..., ack: _Optional[_Union[CommandAck, _Mapping]] = ..., result: _Optional[_Union[CommandResult, _Mapping]] = ..., result_part: _Optional[_Union[ResultPart, _Mapping]] = ..., progress: _Optional[_Union[TrainingProgress, _Mapping]] = ..., results: _Optional[_Union[ResultBatch, _Mapping]] = ...) -> None: ...

class ResultBatch(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[CommandResult]
    def __init__(self, results: _Optional[_Iterable[_Union[CommandResult, _Mapping]]] = ...) -> None: ...

class Hello(_message.Message):
    __slots__ = ("board", "current_mode", "agent_version", "protocol", "metrics_port", "instance_id", "batches")
    BOARD_FIELD_NUMBER: _ClassVar[int]
    CURRENT_MODE_FIELD_NUMBER: _ClassVar[int]
    AGENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    METRICS_PORT_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    board: _common_pb2.BoardInfo
    current_mode: _common_pb2.PowerMode
    agent_version: str
    protocol: int
    metrics_port: int
    instance_id: str
    batches: bool
    def __init__(self, board: _Optional[_Union[_common_pb2.BoardInfo, _Mapping]] = ..., current_mode: _Optional[_Union[_common_pb2.PowerMode, _Mapping]] = ..., agent_version: _Optional[str] = ..., protocol: _Optional[int] = ..., metrics_port: _Optional[int] = ..., instance_id: _Optional[str] = ..., batches: bool = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ("t_s", "current_mode", "busy_command_id", "launch_ids")
    T_S_FIELD_NUMBER: _ClassVar[int]
    CURRENT_MODE_FIELD_NUMBER: _ClassVar[int]
    BUSY_COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    LAUNCH_IDS_FIELD_NUMBER: _ClassVar[int]
    t_s: float
    current_mode: _common_pb2.PowerMode
    busy_command_id: str
    launch_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, t_s: _Optional[float] = ..., current_mode: _Optional[_Union[_common_pb2.PowerMode, _Mapping]] = ..., busy_command_id: _Optional[str] = ..., launch_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class TelemetryBatch(_message.Message):
    __slots__ = ("samples", "dropped", "columns", "heartbeat")
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    samples: _containers.RepeatedCompositeFieldContainer[_common_pb2.TelemetrySample]
    dropped: int
    columns: _common_pb2.SampleColumns
    heartbeat: Heartbeat
    def __init__(self, samples: _Optional[_Iterable[_Union[_common_pb2.TelemetrySample, _Mapping]]] = ..., dropped: _Optional[int] = ..., columns: _Optional[_Union[_common_pb2.SampleColumns, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ...) -> None: ...

class CommandAck(_message.Message):
    __slots__ = ("command_id", "accepted", "error")
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    command_id: str
    accepted: bool
    error: _common_pb2.Error
    def __init__(self, command_id: _Optional[str] = ..., accepted: bool = ..., error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ...) -> None: ...

class TrainingResult(_message.Message):
    __slots__ = ("workload", "minibatch_times_s", "start_s", "end_s", "energy_j", "elapsed_s", "inference", "output_tail")
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    MINIBATCH_TIMES_S_FIELD_NUMBER: _ClassVar[int]
    START_S_FIELD_NUMBER: _ClassVar[int]
    END_S_FIELD_NUMBER: _ClassVar[int]
    ENERGY_J_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_S_FIELD_NUMBER: _ClassVar[int]
    INFERENCE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TAIL_FIELD_NUMBER: _ClassVar[int]
    workload: str
    minibatch_times_s: _containers.RepeatedScalarFieldContainer[float]
    start_s: float
    end_s: float
    energy_j: float
    elapsed_s: float
    inference: InferenceStats
    output_tail: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, workload: _Optional[str] = ..., minibatch_times_s: _Optional[_Iterable[float]] = ..., start_s: _Optional[float] = ..., end_s: _Optional[float] = ..., energy_j: _Optional[float] = ..., elapsed_s: _Optional[float] = ..., inference: _Optional[_Union[InferenceStats, _Mapping]] = ..., output_tail: _Optional[_Iterable[str]] = ...) -> None: ...

class TrainingProgress(_message.Message):
    __slots__ = ("command_id", "minibatches_done", "t_s", "elapsed_s", "energy_j", "mode", "final", "inference", "output_tail")
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    MINIBATCHES_DONE_FIELD_NUMBER: _ClassVar[int]
    T_S_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_S_FIELD_NUMBER: _ClassVar[int]
    ENERGY_J_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    INFERENCE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TAIL_FIELD_NUMBER: _ClassVar[int]
    command_id: str
    minibatches_done: int
    t_s: float
    elapsed_s: float
    energy_j: float
    mode: _common_pb2.PowerMode
    final: bool
    inference: InferenceStats
    output_tail: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, command_id: _Optional[str] = ..., minibatches_done: _Optional[int] = ..., t_s: _Optional[float] = ..., elapsed_s: _Optional[float] = ..., energy_j: _Optional[float] = ..., mode: _Optional[_Union[_common_pb2.PowerMode, _Mapping]] = ..., final: bool = ..., inference: _Optional[_Union[InferenceStats, _Mapping]] = ..., output_tail: _Optional[_Iterable[str]] = ...) -> None: ...

class ProfileResult(_message.Message):
    __slots__ = ("workload", "mode", "minibatch_times_s", "power", "steady_state_found", "window_start_s", "window_end_s", "power_columns")
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    MINIBATCH_TIMES_S_FIELD_NUMBER: _ClassVar[int]
    POWER_FIELD_NUMBER: _ClassVar[int]
    STEADY_STATE_FOUND_FIELD_NUMBER: _ClassVar[int]
    WINDOW_START_S_FIELD_NUMBER: _ClassVar[int]
    WINDOW_END_S_FIELD_NUMBER: _ClassVar[int]
    POWER_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    workload: str
    mode: _common_pb2.PowerMode
    minibatch_times_s: _containers.RepeatedScalarFieldContainer[float]
    power: _containers.RepeatedCompositeFieldContainer[_common_pb2.TelemetrySample]
    steady_state_found: bool
    window_start_s: float
    window_end_s: float
    power_columns: _common_pb2.SampleColumns
    def __init__(self, workload: _Optional[str] = ..., mode: _Optional[_Union[_common_pb2.PowerMode, _Mapping]] = ..., minibatch_times_s: _Optional[_Iterable[float]] = ..., power: _Optional[_Iterable[_Union[_common_pb2.TelemetrySample, _Mapping]]] = ..., steady_state_found: bool = ..., window_start_s: _Optional[float] = ..., window_end_s: _Optional[float] = ..., power_columns: _Optional[_Union[_common_pb2.SampleColumns, _Mapping]] = ...) -> None: ...

class CommandResult(_message.Message):
    __slots__ = ("command_id", "ok", "error", "confirmed_mode", "training", "profile", "cancelled", "roofline", "inference", "parts")
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_MODE_FIELD_NUMBER: _ClassVar[int]
    TRAINING_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    ROOFLINE_FIELD_NUMBER: _ClassVar[int]
    INFERENCE_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    command_id: str
    ok: bool
    error: _common_pb2.Error
    confirmed_mode: _common_pb2.PowerMode
    training: TrainingResult
    profile: ProfileResult
    cancelled: bool
    roofline: RooflineResult
    inference: InferenceResult
    parts: int
    def __init__(self, command_id: _Optional[str] = ..., ok: bool = ..., error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ..., confirmed_mode: _Optional[_Union[_common_pb2.PowerMode, _Mapping]] = ..., training: _Optional[_Union[TrainingResult, _Mapping]] = ..., profile: _Optional[_Union[ProfileResult, _Mapping]] = ..., cancelled: bool = ..., roofline: _Optional[_Union[RooflineResult, _Mapping]] = ..., inference: _Optional[_Union[InferenceResult, _Mapping]] = ..., parts: _Optional[int] = ...) -> None: ...

class ResultPart(_message.Message):
    __slots__ = ("command_id", "index", "minibatch_times_s", "power")
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    MINIBATCH_TIMES_S_FIELD_NUMBER: _ClassVar[int]
    POWER_FIELD_NUMBER: _ClassVar[int]
    command_id: str
    index: int
    minibatch_times_s: _containers.RepeatedScalarFieldContainer[float]
    power: _containers.RepeatedCompositeFieldContainer[_common_pb2.TelemetrySample]
    def __init__(self, command_id: _Optional[str] = ..., index: _Optional[int] = ..., minibatch_times_s: _Optional[_Iterable[float]] = ..., power: _Optional[_Iterable[_Union[_common_pb2.TelemetrySample, _Mapping]]] = ...) -> None: ...

class ControllerMessage(_message.Message):
    __slots__ = ("welcome", "command", "notice", "commands")
    WELCOME_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    NOTICE_FIELD_NUMBER: _ClassVar[int]
    COMMANDS_FIELD_NUMBER: _ClassVar[int]
    welcome: Welcome
    command: Command
    notice: Notice
    commands: CommandBatch
    def __init__(self, welcome: _Optional[_Union[Welcome, _Mapping]] = ..., command: _Optional[_Union[Command, _Mapping]] = ..., notice: _Optional[_Union[Notice, _Mapping]] = ..., commands: _Optional[_Union[CommandBatch, _Mapping]] = ...) -> None: ...

class CommandBatch(_message.Message):
    __slots__ = ("commands",)
    COMMANDS_FIELD_NUMBER: _ClassVar[int]
    commands: _containers.RepeatedCompositeFieldContainer[Command]
    def __init__(self, commands: _Optional[_Iterable[_Union[Command, _Mapping]]] = ...) -> None: ...

class Welcome(_message.Message):
    __slots__ = ("session_id", "heartbeat_interval_s", "telemetry_interval_s", "max_batch_samples", "columns", "folded_heartbeats", "batches")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_S_FIELD_NUMBER: _ClassVar[int]
    TELEMETRY_INTERVAL_S_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCH_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    FOLDED_HEARTBEATS_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    heartbeat_interval_s: float
    telemetry_interval_s: float
    max_batch_samples: int
    columns: bool
    folded_heartbeats: bool
    batches: bool
    def __init__(self, session_id: _Optional[str] = ..., heartbeat_interval_s: _Optional[float] = ..., telemetry_interval_s: _Optional[float] = ..., max_batch_samples: _Optional[int] = ..., columns: bool = ..., folded_heartbeats: bool = ..., batches: bool = ...) -> None: ...

class Notice(_message.Message):
    __slots__ = ("error",)
    ERROR_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.Error
    def __init__(self, error: _Optional[_Union[_common_pb2.Error, _Mapping]] = ...) -> None: ...

class SetMode(_message.Message):
    __slots__ = ("mode", "preset", "during_command_id")
    MODE_FIELD_NUMBER: _ClassVar[int]
    PRESET_FIELD_NUMBER: _ClassVar[int]
    DURING_COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    mode: _common_pb2.PowerMode
    preset: str
    during_command_id: str
    def __init__(self, mode: _Optional[_Union[_common_pb2.PowerMode, _Mapping]] = ..., preset: _Optional[str] = ..., during_command_id: _Optional[str] = ...) -> None: ...

class RunTraining(_message.Message):
    __slots__ = ("workload", "minibatches", "minibatch_size", "workers", "progress_interval_s", "inference_workload", "arrival_rate", "arrival_times_s", "inference_batch_size", "latency_budget_s", "latency_window_s", "seed", "attach", "attach_timeout_s", "launch")
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    MINIBATCHES_FIELD_NUMBER: _ClassVar[int]
    MINIBATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_INTERVAL_S_FIELD_NUMBER: _ClassVar[int]
    INFERENCE_WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    ARRIVAL_RATE_FIELD_NUMBER: _ClassVar[int]
    ARRIVAL_TIMES_S_FIELD_NUMBER: _ClassVar[int]
    INFERENCE_BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    LATENCY_BUDGET_S_FIELD_NUMBER: _ClassVar[int]
    LATENCY_WINDOW_S_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    ATTACH_FIELD_NUMBER: _ClassVar[int]
    ATTACH_TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    LAUNCH_FIELD_NUMBER: _ClassVar[int]
    workload: str
    minibatches: int
    minibatch_size: int
    workers: int
    progress_interval_s: float
    inference_workload: str
    arrival_rate: float
    arrival_times_s: _containers.RepeatedScalarFieldContainer[float]
    inference_batch_size: int
    latency_budget_s: float
    latency_window_s: float
    seed: int
    attach: bool
    attach_timeout_s: float
    launch: LaunchTemplate
    def __init__(self, workload: _Optional[str] = ..., minibatches: _Optional[int] = ..., minibatch_size: _Optional[int] = ..., workers: _Optional[int] = ..., progress_interval_s: _Optional[float] = ..., inference_workload: _Optional[str] = ..., arrival_rate: _Optional[float] = ..., arrival_times_s: _Optional[_Iterable[float]] = ..., inference_batch_size: _Optional[int] = ..., latency_budget_s: _Optional[float] = ..., latency_window_s: _Optional[float] = ..., seed: _Optional[int] = ..., attach: bool = ..., attach_timeout_s: _Optional[float] = ..., launch: _Optional[_Union[LaunchTemplate, _Mapping]] = ...) -> None: ...

class LaunchTemplate(_message.Message):
    __slots__ = ("template", "args", "launch_id", "minibatches", "done")
    class ArgsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    LAUNCH_ID_FIELD_NUMBER: _ClassVar[int]
    MINIBATCHES_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    template: str
    args: _containers.ScalarMap[str, str]
    launch_id: str
    minibatches: int
    done: int
    def __init__(self, template: _Optional[str] = ..., args: _Optional[_Mapping[str, str]] = ..., launch_id: _Optional[str] = ..., minibatches: _Optional[int] = ..., done: _Optional[int] = ...) -> None: ...

class RunProfile(_message.Message):
    __slots__ = ("workload", "mode", "minibatches", "minibatch_size", "workers", "warmup_s", "sample_interval_s")
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    MINIBATCHES_FIELD_NUMBER: _ClassVar[int]
    MINIBATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    WARMUP_S_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_INTERVAL_S_FIELD_NUMBER: _ClassVar[int]
    workload: str
    mode: _common_pb2.PowerMode
    minibatches: int
    minibatch_size: int
    workers: int
    warmup_s: float
    sample_interval_s: float
    def __init__(self, workload: _Optional[str] = ..., mode: _Optional[_Union[_common_pb2.PowerMode, _Mapping]] = ..., minibatches: _Optional[int] = ..., minibatch_size: _Optional[int] = ..., workers: _Optional[int] = ..., warmup_s: _Optional[float] = ..., sample_interval_s: _Optional[float] = ...) -> None: ...

class Cancel(_message.Message):
    __slots__ = ("target_command_id",)
    TARGET_COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    target_command_id: str
    def __init__(self, target_command_id: _Optional[str] = ...) -> None: ...

class Command(_message.Message):
    __slots__ = ("command_id", "set_mode", "run_training", "run_profile", "cancel", "run_roofline", "run_inference")
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    SET_MODE_FIELD_NUMBER: _ClassVar[int]
    RUN_TRAINING_FIELD_NUMBER: _ClassVar[int]
    RUN_PROFILE_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    RUN_ROOFLINE_FIELD_NUMBER: _ClassVar[int]
    RUN_INFERENCE_FIELD_NUMBER: _ClassVar[int]
    command_id: str
    set_mode: SetMode
    run_training: RunTraining
    run_profile: RunProfile
    cancel: Cancel
    run_roofline: RunRoofline
    run_inference: RunInference
    def __init__(self, command_id: _Optional[str] = ..., set_mode: _Optional[_Union[SetMode, _Mapping]] = ..., run_training: _Optional[_Union[RunTraining, _Mapping]] = ..., run_profile: _Optional[_Union[RunProfile, _Mapping]] = ..., cancel: _Optional[_Union[Cancel, _Mapping]] = ..., run_roofline: _Optional[_Union[RunRoofline, _Mapping]] = ..., run_inference: _Optional[_Union[RunInference, _Mapping]] = ...) -> None: ...

class RunRoofline(_message.Message):
    __slots__ = ("mode", "seconds", "sample_interval_s")
    MODE_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_INTERVAL_S_FIELD_NUMBER: _ClassVar[int]
    mode: _common_pb2.PowerMode
    seconds: float
    sample_interval_s: float
    def __init__(self, mode: _Optional[_Union[_common_pb2.PowerMode, _Mapping]] = ..., seconds: _Optional[float] = ..., sample_interval_s: _Optional[float] = ...) -> None: ...

class RooflineResult(_message.Message):
    __slots__ = ("mode", "peak_flops", "peak_bytes_per_s", "idle_w", "compute_w", "memory_w", "compute_bytes_per_s", "memory_flops", "samples", "method")
    MODE_FIELD_NUMBER: _ClassVar[int]
    PEAK_FLOPS_FIELD_NUMBER: _ClassVar[int]
    PEAK_BYTES_PER_S_FIELD_NUMBER: _ClassVar[int]
    IDLE_W_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_W_FIELD_NUMBER: _ClassVar[int]
    MEMORY_W_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_BYTES_PER_S_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FLOPS_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    mode: _common_pb2.PowerMode
    peak_flops: float
    peak_bytes_per_s: float
    idle_w: float
    compute_w: float
    memory_w: float
    compute_bytes_per_s: float
    memory_flops: float
    samples: int
    method: str
    def __init__(self, mode: _Optional[_Union[_common_pb2.PowerMode, _Mapping]] = ..., peak_flops: _Optional[float] = ..., peak_bytes_per_s: _Optional[float] = ..., idle_w: _Optional[float] = ..., compute_w: _Optional[float] = ..., memory_w: _Optional[float] = ..., compute_bytes_per_s: _Optional[float] = ..., memory_flops: _Optional[float] = ..., samples: _Optional[int] = ..., method: _Optional[str] = ...) -> None: ...

class InferenceStats(_message.Message):
    __slots__ = ("served", "late", "dropped", "p50_ms", "p95_ms", "p99_ms", "window_served", "buckets", "bucket_sum_s", "batch_size")
    SERVED_FIELD_NUMBER: _ClassVar[int]
    LATE_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    P50_MS_FIELD_NUMBER: _ClassVar[int]
    P95_MS_FIELD_NUMBER: _ClassVar[int]
    P99_MS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_SERVED_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    BUCKET_SUM_S_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    served: int
    late: int
    dropped: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    window_served: int
    buckets: _containers.RepeatedScalarFieldContainer[int]
    bucket_sum_s: float
    batch_size: int
    def __init__(self, served: _Optional[int] = ..., late: _Optional[int] = ..., dropped: _Optional[int] = ..., p50_ms: _Optional[float] = ..., p95_ms: _Optional[float] = ..., p99_ms: _Optional[float] = ..., window_served: _Optional[int] = ..., buckets: _Optional[_Iterable[int]] = ..., bucket_sum_s: _Optional[float] = ..., batch_size: _Optional[int] = ...) -> None: ...

class RunInference(_message.Message):
    __slots__ = ("workload", "mode", "batch_sizes", "passes")
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZES_FIELD_NUMBER: _ClassVar[int]
    PASSES_FIELD_NUMBER: _ClassVar[int]
    workload: str
    mode: _common_pb2.PowerMode
    batch_sizes: _containers.RepeatedScalarFieldContainer[int]
    passes: int
    def __init__(self, workload: _Optional[str] = ..., mode: _Optional[_Union[_common_pb2.PowerMode, _Mapping]] = ..., batch_sizes: _Optional[_Iterable[int]] = ..., passes: _Optional[int] = ...) -> None: ...

class InferenceResult(_message.Message):
    __slots__ = ("mode", "batch_sizes", "latency_s", "power_w")
    MODE_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZES_FIELD_NUMBER: _ClassVar[int]
    LATENCY_S_FIELD_NUMBER: _ClassVar[int]
    POWER_W_FIELD_NUMBER: _ClassVar[int]
    mode: _common_pb2.PowerMode
    batch_sizes: _containers.RepeatedScalarFieldContainer[int]
    latency_s: _containers.RepeatedScalarFieldContainer[float]
    power_w: float
    def __init__(self, mode: _Optional[_Union[_common_pb2.PowerMode, _Mapping]] = ..., batch_sizes: _Optional[_Iterable[int]] = ..., latency_s: _Optional[_Iterable[float]] = ..., power_w: _Optional[float] = ...) -> None: ...
