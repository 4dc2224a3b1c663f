from jetfleet.shared.proto import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Device(_message.Message):
    __slots__ = ("device_id", "model", "serial", "online", "current_mode", "current_mode_name", "last_seen_s", "software", "emulated", "last_telemetry", "catalog", "first_seen_s", "metrics_address", "workloads", "templates", "broken_workloads", "labels", "speed", "held_by", "busy_command")
    class SoftwareEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class BrokenWorkloadsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SERIAL_FIELD_NUMBER: _ClassVar[int]
    ONLINE_FIELD_NUMBER: _ClassVar[int]
    CURRENT_MODE_FIELD_NUMBER: _ClassVar[int]
    CURRENT_MODE_NAME_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_S_FIELD_NUMBER: _ClassVar[int]
    SOFTWARE_FIELD_NUMBER: _ClassVar[int]
    EMULATED_FIELD_NUMBER: _ClassVar[int]
    LAST_TELEMETRY_FIELD_NUMBER: _ClassVar[int]
    CATALOG_FIELD_NUMBER: _ClassVar[int]
    FIRST_SEEN_S_FIELD_NUMBER: _ClassVar[int]
    METRICS_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    WORKLOADS_FIELD_NUMBER: _ClassVar[int]
    TEMPLATES_FIELD_NUMBER: _ClassVar[int]
    BROKEN_WORKLOADS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    SPEED_FIELD_NUMBER: _ClassVar[int]
    HELD_BY_FIELD_NUMBER: _ClassVar[int]
    BUSY_COMMAND_FIELD_NUMBER: _ClassVar[int]
    device_id: str
    model: str
    serial: str
    online: bool
    current_mode: _common_pb2.PowerMode
    current_mode_name: str
    last_seen_s: float
    software: _containers.ScalarMap[str, str]
    emulated: bool
    last_telemetry: _common_pb2.TelemetrySample
    catalog: _common_pb2.Catalog
    first_seen_s: float
    metrics_address: str
    workloads: _containers.RepeatedScalarFieldContainer[str]
    templates: _containers.RepeatedCompositeFieldContainer[_common_pb2.TemplateInfo]
    broken_workloads: _containers.ScalarMap[str, str]
    labels: _containers.ScalarMap[str, str]
    speed: float
    held_by: str
    busy_command: str
    def __init__(self, device_id: _Optional[str] = ..., model: _Optional[str] = ..., serial: _Optional[str] = ..., online: bool = ..., current_mode: _Optional[_Union[_common_pb2.PowerMode, _Mapping]] = ..., current_mode_name: _Optional[str] = ..., last_seen_s: _Optional[float] = ..., software: _Optional[_Mapping[str, str]] = ..., emulated: bool = ..., last_telemetry: _Optional[_Union[_common_pb2.TelemetrySample, _Mapping]] = ..., catalog: _Optional[_Union[_common_pb2.Catalog, _Mapping]] = ..., first_seen_s: _Optional[float] = ..., metrics_address: _Optional[str] = ..., workloads: _Optional[_Iterable[str]] = ..., templates: _Optional[_Iterable[_Union[_common_pb2.TemplateInfo, _Mapping]]] = ..., broken_workloads: _Optional[_Mapping[str, str]] = ..., labels: _Optional[_Mapping[str, str]] = ..., speed: _Optional[float] = ..., held_by: _Optional[str] = ..., busy_command: _Optional[str] = ...) -> None: ...

class ListDevicesRequest(_message.Message):
    __slots__ = ("model",)
    MODEL_FIELD_NUMBER: _ClassVar[int]
    model: str
    def __init__(self, model: _Optional[str] = ...) -> None: ...

class ListDevicesResponse(_message.Message):
    __slots__ = ("devices",)
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    devices: _containers.RepeatedCompositeFieldContainer[Device]
    def __init__(self, devices: _Optional[_Iterable[_Union[Device, _Mapping]]] = ...) -> None: ...

class GetDeviceRequest(_message.Message):
    __slots__ = ("device_id",)
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    device_id: str
    def __init__(self, device_id: _Optional[str] = ...) -> None: ...

class SetModeRequest(_message.Message):
    __slots__ = ("device_id", "mode", "request_id", "timeout_s")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    device_id: str
    mode: str
    request_id: str
    timeout_s: float
    def __init__(self, device_id: _Optional[str] = ..., mode: _Optional[str] = ..., request_id: _Optional[str] = ..., timeout_s: _Optional[float] = ...) -> None: ...

class SetModeResponse(_message.Message):
    __slots__ = ("device_id", "requested", "confirmed", "command_id", "latency_s")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_FIELD_NUMBER: _ClassVar[int]
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    LATENCY_S_FIELD_NUMBER: _ClassVar[int]
    device_id: str
    requested: _common_pb2.PowerMode
    confirmed: _common_pb2.PowerMode
    command_id: str
    latency_s: float
    def __init__(self, device_id: _Optional[str] = ..., requested: _Optional[_Union[_common_pb2.PowerMode, _Mapping]] = ..., confirmed: _Optional[_Union[_common_pb2.PowerMode, _Mapping]] = ..., command_id: _Optional[str] = ..., latency_s: _Optional[float] = ...) -> None: ...

class WatchTelemetryRequest(_message.Message):
    __slots__ = ("device_id", "max_samples", "timeout_s")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    device_id: str
    max_samples: int
    timeout_s: float
    def __init__(self, device_id: _Optional[str] = ..., max_samples: _Optional[int] = ..., timeout_s: _Optional[float] = ...) -> None: ...

class ForgetDeviceRequest(_message.Message):
    __slots__ = ("device_id",)
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    device_id: str
    def __init__(self, device_id: _Optional[str] = ...) -> None: ...

class ForgetDeviceResponse(_message.Message):
    __slots__ = ("device_id",)
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    device_id: str
    def __init__(self, device_id: _Optional[str] = ...) -> None: ...

class CreateCampaignRequest(_message.Message):
    __slots__ = ("workload", "device_id", "board_model", "modes", "mode_list", "minibatches", "seed", "mode_lines")
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    BOARD_MODEL_FIELD_NUMBER: _ClassVar[int]
    MODES_FIELD_NUMBER: _ClassVar[int]
    MODE_LIST_FIELD_NUMBER: _ClassVar[int]
    MINIBATCHES_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    MODE_LINES_FIELD_NUMBER: _ClassVar[int]
    workload: str
    device_id: str
    board_model: str
    modes: str
    mode_list: _containers.RepeatedScalarFieldContainer[str]
    minibatches: int
    seed: int
    mode_lines: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, workload: _Optional[str] = ..., device_id: _Optional[str] = ..., board_model: _Optional[str] = ..., modes: _Optional[str] = ..., mode_list: _Optional[_Iterable[str]] = ..., minibatches: _Optional[int] = ..., seed: _Optional[int] = ..., mode_lines: _Optional[_Iterable[int]] = ...) -> None: ...

class Campaign(_message.Message):
    __slots__ = ("campaign_id", "workload", "target_device", "target_model", "modes", "minibatches", "status", "total", "done", "failed", "in_flight", "eta_s", "created_s", "finished_s", "boards", "errors", "retries", "waiting")
    CAMPAIGN_ID_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    TARGET_DEVICE_FIELD_NUMBER: _ClassVar[int]
    TARGET_MODEL_FIELD_NUMBER: _ClassVar[int]
    MODES_FIELD_NUMBER: _ClassVar[int]
    MINIBATCHES_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    ETA_S_FIELD_NUMBER: _ClassVar[int]
    CREATED_S_FIELD_NUMBER: _ClassVar[int]
    FINISHED_S_FIELD_NUMBER: _ClassVar[int]
    BOARDS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    RETRIES_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    campaign_id: str
    workload: str
    target_device: str
    target_model: str
    modes: str
    minibatches: int
    status: str
    total: int
    done: int
    failed: int
    in_flight: int
    eta_s: float
    created_s: float
    finished_s: float
    boards: _containers.RepeatedScalarFieldContainer[str]
    errors: _containers.RepeatedScalarFieldContainer[str]
    retries: int
    waiting: str
    def __init__(self, campaign_id: _Optional[str] = ..., workload: _Optional[str] = ..., target_device: _Optional[str] = ..., target_model: _Optional[str] = ..., modes: _Optional[str] = ..., minibatches: _Optional[int] = ..., status: _Optional[str] = ..., total: _Optional[int] = ..., done: _Optional[int] = ..., failed: _Optional[int] = ..., in_flight: _Optional[int] = ..., eta_s: _Optional[float] = ..., created_s: _Optional[float] = ..., finished_s: _Optional[float] = ..., boards: _Optional[_Iterable[str]] = ..., errors: _Optional[_Iterable[str]] = ..., retries: _Optional[int] = ..., waiting: _Optional[str] = ...) -> None: ...

class ListCampaignsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListCampaignsResponse(_message.Message):
    __slots__ = ("campaigns",)
    CAMPAIGNS_FIELD_NUMBER: _ClassVar[int]
    campaigns: _containers.RepeatedCompositeFieldContainer[Campaign]
    def __init__(self, campaigns: _Optional[_Iterable[_Union[Campaign, _Mapping]]] = ...) -> None: ...

class GetCampaignRequest(_message.Message):
    __slots__ = ("campaign_id",)
    CAMPAIGN_ID_FIELD_NUMBER: _ClassVar[int]
    campaign_id: str
    def __init__(self, campaign_id: _Optional[str] = ...) -> None: ...

class ControlCampaignRequest(_message.Message):
    __slots__ = ("campaign_id", "action")
    CAMPAIGN_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    campaign_id: str
    action: str
    def __init__(self, campaign_id: _Optional[str] = ..., action: _Optional[str] = ...) -> None: ...

class ExportProfilesRequest(_message.Message):
    __slots__ = ("board_model", "workload", "device_id", "campaign_id")
    BOARD_MODEL_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    CAMPAIGN_ID_FIELD_NUMBER: _ClassVar[int]
    board_model: str
    workload: str
    device_id: str
    campaign_id: str
    def __init__(self, board_model: _Optional[str] = ..., workload: _Optional[str] = ..., device_id: _Optional[str] = ..., campaign_id: _Optional[str] = ...) -> None: ...

class ExportProfilesResponse(_message.Message):
    __slots__ = ("csv", "rows")
    CSV_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    csv: str
    rows: int
    def __init__(self, csv: _Optional[str] = ..., rows: _Optional[int] = ...) -> None: ...

class ImportProfilesRequest(_message.Message):
    __slots__ = ("csv", "name", "allow_new", "allow_any_new")
    CSV_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ALLOW_NEW_FIELD_NUMBER: _ClassVar[int]
    ALLOW_ANY_NEW_FIELD_NUMBER: _ClassVar[int]
    csv: str
    name: str
    allow_new: _containers.RepeatedScalarFieldContainer[str]
    allow_any_new: bool
    def __init__(self, csv: _Optional[str] = ..., name: _Optional[str] = ..., allow_new: _Optional[_Iterable[str]] = ..., allow_any_new: bool = ...) -> None: ...

class ImportProfilesResponse(_message.Message):
    __slots__ = ("rows", "source", "new_board_models", "already_stored", "new_workloads")
    ROWS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    NEW_BOARD_MODELS_FIELD_NUMBER: _ClassVar[int]
    ALREADY_STORED_FIELD_NUMBER: _ClassVar[int]
    NEW_WORKLOADS_FIELD_NUMBER: _ClassVar[int]
    rows: int
    source: str
    new_board_models: _containers.RepeatedScalarFieldContainer[str]
    already_stored: int
    new_workloads: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, rows: _Optional[int] = ..., source: _Optional[str] = ..., new_board_models: _Optional[_Iterable[str]] = ..., already_stored: _Optional[int] = ..., new_workloads: _Optional[_Iterable[str]] = ...) -> None: ...

class ProfilesChunk(_message.Message):
    __slots__ = ("csv", "rows", "name", "allow_new", "allow_any_new")
    CSV_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ALLOW_NEW_FIELD_NUMBER: _ClassVar[int]
    ALLOW_ANY_NEW_FIELD_NUMBER: _ClassVar[int]
    csv: str
    rows: int
    name: str
    allow_new: _containers.RepeatedScalarFieldContainer[str]
    allow_any_new: bool
    def __init__(self, csv: _Optional[str] = ..., rows: _Optional[int] = ..., name: _Optional[str] = ..., allow_new: _Optional[_Iterable[str]] = ..., allow_any_new: bool = ...) -> None: ...

class ModelInfo(_message.Message):
    __slots__ = ("model_id", "kind", "board_model", "workload", "parent_id", "version", "created_s", "training_modes", "metrics", "coverage")
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    BOARD_MODEL_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATED_S_FIELD_NUMBER: _ClassVar[int]
    TRAINING_MODES_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    COVERAGE_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    kind: str
    board_model: str
    workload: str
    parent_id: str
    version: int
    created_s: float
    training_modes: int
    metrics: _containers.ScalarMap[str, float]
    coverage: ModelCoverage
    def __init__(self, model_id: _Optional[str] = ..., kind: _Optional[str] = ..., board_model: _Optional[str] = ..., workload: _Optional[str] = ..., parent_id: _Optional[str] = ..., version: _Optional[int] = ..., created_s: _Optional[float] = ..., training_modes: _Optional[int] = ..., metrics: _Optional[_Mapping[str, float]] = ..., coverage: _Optional[_Union[ModelCoverage, _Mapping]] = ...) -> None: ...

class KnobCoverage(_message.Message):
    __slots__ = ("knob", "seen", "grid", "catalog", "missing")
    KNOB_FIELD_NUMBER: _ClassVar[int]
    SEEN_FIELD_NUMBER: _ClassVar[int]
    GRID_FIELD_NUMBER: _ClassVar[int]
    CATALOG_FIELD_NUMBER: _ClassVar[int]
    MISSING_FIELD_NUMBER: _ClassVar[int]
    knob: str
    seen: _containers.RepeatedScalarFieldContainer[float]
    grid: _containers.RepeatedScalarFieldContainer[float]
    catalog: _containers.RepeatedScalarFieldContainer[float]
    missing: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, knob: _Optional[str] = ..., seen: _Optional[_Iterable[float]] = ..., grid: _Optional[_Iterable[float]] = ..., catalog: _Optional[_Iterable[float]] = ..., missing: _Optional[_Iterable[float]] = ...) -> None: ...

class ModelCoverage(_message.Message):
    __slots__ = ("knobs", "grid", "grid_modes", "fitted_modes", "partial", "accepted_partial", "partial_reference")
    KNOBS_FIELD_NUMBER: _ClassVar[int]
    GRID_FIELD_NUMBER: _ClassVar[int]
    GRID_MODES_FIELD_NUMBER: _ClassVar[int]
    FITTED_MODES_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_PARTIAL_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_REFERENCE_FIELD_NUMBER: _ClassVar[int]
    knobs: _containers.RepeatedCompositeFieldContainer[KnobCoverage]
    grid: str
    grid_modes: int
    fitted_modes: int
    partial: bool
    accepted_partial: bool
    partial_reference: str
    def __init__(self, knobs: _Optional[_Iterable[_Union[KnobCoverage, _Mapping]]] = ..., grid: _Optional[str] = ..., grid_modes: _Optional[int] = ..., fitted_modes: _Optional[int] = ..., partial: bool = ..., accepted_partial: bool = ..., partial_reference: _Optional[str] = ...) -> None: ...

class ModelProgress(_message.Message):
    __slots__ = ("phase", "epoch", "epochs", "phase_index", "phases", "losses", "elapsed_s", "model")
    PHASE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    EPOCHS_FIELD_NUMBER: _ClassVar[int]
    PHASE_INDEX_FIELD_NUMBER: _ClassVar[int]
    PHASES_FIELD_NUMBER: _ClassVar[int]
    LOSSES_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_S_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    phase: str
    epoch: int
    epochs: int
    phase_index: int
    phases: int
    losses: _containers.RepeatedScalarFieldContainer[float]
    elapsed_s: float
    model: ModelInfo
    def __init__(self, phase: _Optional[str] = ..., epoch: _Optional[int] = ..., epochs: _Optional[int] = ..., phase_index: _Optional[int] = ..., phases: _Optional[int] = ..., losses: _Optional[_Iterable[float]] = ..., elapsed_s: _Optional[float] = ..., model: _Optional[_Union[ModelInfo, _Mapping]] = ...) -> None: ...

class TrainReferenceRequest(_message.Message):
    __slots__ = ("board_model", "workload", "campaign_id", "epochs", "no_dropout", "published_dropout", "accept_partial")
    BOARD_MODEL_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    CAMPAIGN_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCHS_FIELD_NUMBER: _ClassVar[int]
    NO_DROPOUT_FIELD_NUMBER: _ClassVar[int]
    PUBLISHED_DROPOUT_FIELD_NUMBER: _ClassVar[int]
    ACCEPT_PARTIAL_FIELD_NUMBER: _ClassVar[int]
    board_model: str
    workload: str
    campaign_id: str
    epochs: int
    no_dropout: bool
    published_dropout: bool
    accept_partial: bool
    def __init__(self, board_model: _Optional[str] = ..., workload: _Optional[str] = ..., campaign_id: _Optional[str] = ..., epochs: _Optional[int] = ..., no_dropout: bool = ..., published_dropout: bool = ..., accept_partial: bool = ...) -> None: ...

class TransferModelRequest(_message.Message):
    __slots__ = ("reference_id", "reference_board_model", "reference_workload", "board_model", "workload", "campaign_id")
    REFERENCE_ID_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_BOARD_MODEL_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    BOARD_MODEL_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    CAMPAIGN_ID_FIELD_NUMBER: _ClassVar[int]
    reference_id: str
    reference_board_model: str
    reference_workload: str
    board_model: str
    workload: str
    campaign_id: str
    def __init__(self, reference_id: _Optional[str] = ..., reference_board_model: _Optional[str] = ..., reference_workload: _Optional[str] = ..., board_model: _Optional[str] = ..., workload: _Optional[str] = ..., campaign_id: _Optional[str] = ...) -> None: ...

class ListModelsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListModelsResponse(_message.Message):
    __slots__ = ("models",)
    MODELS_FIELD_NUMBER: _ClassVar[int]
    models: _containers.RepeatedCompositeFieldContainer[ModelInfo]
    def __init__(self, models: _Optional[_Iterable[_Union[ModelInfo, _Mapping]]] = ...) -> None: ...

class GetModelRequest(_message.Message):
    __slots__ = ("model_id",)
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    def __init__(self, model_id: _Optional[str] = ...) -> None: ...

class PredictRequest(_message.Message):
    __slots__ = ("board_model", "workload", "model_id", "grid", "pareto_only", "confidence")
    BOARD_MODEL_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    GRID_FIELD_NUMBER: _ClassVar[int]
    PARETO_ONLY_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    board_model: str
    workload: str
    model_id: str
    grid: str
    pareto_only: bool
    confidence: float
    def __init__(self, board_model: _Optional[str] = ..., workload: _Optional[str] = ..., model_id: _Optional[str] = ..., grid: _Optional[str] = ..., pareto_only: bool = ..., confidence: _Optional[float] = ...) -> None: ...

class Prediction(_message.Message):
    __slots__ = ("mode", "time_ms", "power_w", "pareto", "time_ms_lo", "time_ms_hi", "power_w_lo", "power_w_hi", "outside_coverage")
    MODE_FIELD_NUMBER: _ClassVar[int]
    TIME_MS_FIELD_NUMBER: _ClassVar[int]
    POWER_W_FIELD_NUMBER: _ClassVar[int]
    PARETO_FIELD_NUMBER: _ClassVar[int]
    TIME_MS_LO_FIELD_NUMBER: _ClassVar[int]
    TIME_MS_HI_FIELD_NUMBER: _ClassVar[int]
    POWER_W_LO_FIELD_NUMBER: _ClassVar[int]
    POWER_W_HI_FIELD_NUMBER: _ClassVar[int]
    OUTSIDE_COVERAGE_FIELD_NUMBER: _ClassVar[int]
    mode: _common_pb2.PowerMode
    time_ms: float
    power_w: float
    pareto: bool
    time_ms_lo: float
    time_ms_hi: float
    power_w_lo: float
    power_w_hi: float
    outside_coverage: bool
    def __init__(self, mode: _Optional[_Union[_common_pb2.PowerMode, _Mapping]] = ..., time_ms: _Optional[float] = ..., power_w: _Optional[float] = ..., pareto: bool = ..., time_ms_lo: _Optional[float] = ..., time_ms_hi: _Optional[float] = ..., power_w_lo: _Optional[float] = ..., power_w_hi: _Optional[float] = ..., outside_coverage: bool = ...) -> None: ...

class PredictResponse(_message.Message):
    __slots__ = ("model_id", "predictions", "pareto_size", "confidence")
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    PREDICTIONS_FIELD_NUMBER: _ClassVar[int]
    PARETO_SIZE_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    predictions: _containers.RepeatedCompositeFieldContainer[Prediction]
    pareto_size: int
    confidence: float
    def __init__(self, model_id: _Optional[str] = ..., predictions: _Optional[_Iterable[_Union[Prediction, _Mapping]]] = ..., pareto_size: _Optional[int] = ..., confidence: _Optional[float] = ...) -> None: ...

class OptimizeRequest(_message.Message):
    __slots__ = ("device_id", "board_model", "workload", "model_id", "power_budget_w", "deadline_s", "min_energy", "minibatches_per_epoch", "apply", "verify_minibatches", "refine", "confidence")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    BOARD_MODEL_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    POWER_BUDGET_W_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_S_FIELD_NUMBER: _ClassVar[int]
    MIN_ENERGY_FIELD_NUMBER: _ClassVar[int]
    MINIBATCHES_PER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    APPLY_FIELD_NUMBER: _ClassVar[int]
    VERIFY_MINIBATCHES_FIELD_NUMBER: _ClassVar[int]
    REFINE_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    device_id: str
    board_model: str
    workload: str
    model_id: str
    power_budget_w: float
    deadline_s: float
    min_energy: bool
    minibatches_per_epoch: int
    apply: bool
    verify_minibatches: int
    refine: bool
    confidence: float
    def __init__(self, device_id: _Optional[str] = ..., board_model: _Optional[str] = ..., workload: _Optional[str] = ..., model_id: _Optional[str] = ..., power_budget_w: _Optional[float] = ..., deadline_s: _Optional[float] = ..., min_energy: bool = ..., minibatches_per_epoch: _Optional[int] = ..., apply: bool = ..., verify_minibatches: _Optional[int] = ..., refine: bool = ..., confidence: _Optional[float] = ...) -> None: ...

class Applied(_message.Message):
    __slots__ = ("device_id", "confirmed", "observed_time_ms", "observed_power_w", "time_error_pct", "power_error_pct", "decision_id", "goal_missed", "note")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_POWER_W_FIELD_NUMBER: _ClassVar[int]
    TIME_ERROR_PCT_FIELD_NUMBER: _ClassVar[int]
    POWER_ERROR_PCT_FIELD_NUMBER: _ClassVar[int]
    DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    GOAL_MISSED_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    device_id: str
    confirmed: _common_pb2.PowerMode
    observed_time_ms: float
    observed_power_w: float
    time_error_pct: float
    power_error_pct: float
    decision_id: str
    goal_missed: bool
    note: str
    def __init__(self, device_id: _Optional[str] = ..., confirmed: _Optional[_Union[_common_pb2.PowerMode, _Mapping]] = ..., observed_time_ms: _Optional[float] = ..., observed_power_w: _Optional[float] = ..., time_error_pct: _Optional[float] = ..., power_error_pct: _Optional[float] = ..., decision_id: _Optional[str] = ..., goal_missed: bool = ..., note: _Optional[str] = ...) -> None: ...

class OptimizeResponse(_message.Message):
    __slots__ = ("model_id", "goal", "mode", "mode_name", "predicted_time_ms", "predicted_power_w", "epoch_s", "energy_per_epoch_j", "applied", "confidence", "predicted_time_ms_lo", "predicted_time_ms_hi", "predicted_power_w_lo", "predicted_power_w_hi", "at_risk", "outside_coverage", "coverage_note")
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    GOAL_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    MODE_NAME_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_POWER_W_FIELD_NUMBER: _ClassVar[int]
    EPOCH_S_FIELD_NUMBER: _ClassVar[int]
    ENERGY_PER_EPOCH_J_FIELD_NUMBER: _ClassVar[int]
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_TIME_MS_LO_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_TIME_MS_HI_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_POWER_W_LO_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_POWER_W_HI_FIELD_NUMBER: _ClassVar[int]
    AT_RISK_FIELD_NUMBER: _ClassVar[int]
    OUTSIDE_COVERAGE_FIELD_NUMBER: _ClassVar[int]
    COVERAGE_NOTE_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    goal: str
    mode: _common_pb2.PowerMode
    mode_name: str
    predicted_time_ms: float
    predicted_power_w: float
    epoch_s: float
    energy_per_epoch_j: float
    applied: _containers.RepeatedCompositeFieldContainer[Applied]
    confidence: float
    predicted_time_ms_lo: float
    predicted_time_ms_hi: float
    predicted_power_w_lo: float
    predicted_power_w_hi: float
    at_risk: bool
    outside_coverage: bool
    coverage_note: str
    def __init__(self, model_id: _Optional[str] = ..., goal: _Optional[str] = ..., mode: _Optional[_Union[_common_pb2.PowerMode, _Mapping]] = ..., mode_name: _Optional[str] = ..., predicted_time_ms: _Optional[float] = ..., predicted_power_w: _Optional[float] = ..., epoch_s: _Optional[float] = ..., energy_per_epoch_j: _Optional[float] = ..., applied: _Optional[_Iterable[_Union[Applied, _Mapping]]] = ..., confidence: _Optional[float] = ..., predicted_time_ms_lo: _Optional[float] = ..., predicted_time_ms_hi: _Optional[float] = ..., predicted_power_w_lo: _Optional[float] = ..., predicted_power_w_hi: _Optional[float] = ..., at_risk: bool = ..., outside_coverage: bool = ..., coverage_note: _Optional[str] = ...) -> None: ...

class SubmitJobRequest(_message.Message):
    __slots__ = ("workload", "device_id", "board_model", "power_budget_w", "deadline_s", "min_energy", "minibatches", "epochs", "minibatches_per_epoch", "profile_modes", "strategy", "confidence", "max_steps", "window_s", "request_id", "confirm_profiles", "no_confirm", "seed", "inference_workload", "arrival_rate", "arrival_times_s", "latency_budget_s", "inference_batch_size", "fleet", "priority", "attach", "attach_timeout_s", "template", "template_args")
    class TemplateArgsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    BOARD_MODEL_FIELD_NUMBER: _ClassVar[int]
    POWER_BUDGET_W_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_S_FIELD_NUMBER: _ClassVar[int]
    MIN_ENERGY_FIELD_NUMBER: _ClassVar[int]
    MINIBATCHES_FIELD_NUMBER: _ClassVar[int]
    EPOCHS_FIELD_NUMBER: _ClassVar[int]
    MINIBATCHES_PER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PROFILE_MODES_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    MAX_STEPS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_S_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    CONFIRM_PROFILES_FIELD_NUMBER: _ClassVar[int]
    NO_CONFIRM_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    INFERENCE_WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    ARRIVAL_RATE_FIELD_NUMBER: _ClassVar[int]
    ARRIVAL_TIMES_S_FIELD_NUMBER: _ClassVar[int]
    LATENCY_BUDGET_S_FIELD_NUMBER: _ClassVar[int]
    INFERENCE_BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    FLEET_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    ATTACH_FIELD_NUMBER: _ClassVar[int]
    ATTACH_TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_ARGS_FIELD_NUMBER: _ClassVar[int]
    workload: str
    device_id: str
    board_model: str
    power_budget_w: float
    deadline_s: float
    min_energy: bool
    minibatches: int
    epochs: int
    minibatches_per_epoch: int
    profile_modes: int
    strategy: str
    confidence: float
    max_steps: int
    window_s: float
    request_id: str
    confirm_profiles: int
    no_confirm: bool
    seed: int
    inference_workload: str
    arrival_rate: float
    arrival_times_s: _containers.RepeatedScalarFieldContainer[float]
    latency_budget_s: float
    inference_batch_size: int
    fleet: bool
    priority: float
    attach: bool
    attach_timeout_s: float
    template: str
    template_args: _containers.ScalarMap[str, str]
    def __init__(self, workload: _Optional[str] = ..., device_id: _Optional[str] = ..., board_model: _Optional[str] = ..., power_budget_w: _Optional[float] = ..., deadline_s: _Optional[float] = ..., min_energy: bool = ..., minibatches: _Optional[int] = ..., epochs: _Optional[int] = ..., minibatches_per_epoch: _Optional[int] = ..., profile_modes: _Optional[int] = ..., strategy: _Optional[str] = ..., confidence: _Optional[float] = ..., max_steps: _Optional[int] = ..., window_s: _Optional[float] = ..., request_id: _Optional[str] = ..., confirm_profiles: _Optional[int] = ..., no_confirm: bool = ..., seed: _Optional[int] = ..., inference_workload: _Optional[str] = ..., arrival_rate: _Optional[float] = ..., arrival_times_s: _Optional[_Iterable[float]] = ..., latency_budget_s: _Optional[float] = ..., inference_batch_size: _Optional[int] = ..., fleet: bool = ..., priority: _Optional[float] = ..., attach: bool = ..., attach_timeout_s: _Optional[float] = ..., template: _Optional[str] = ..., template_args: _Optional[_Mapping[str, str]] = ...) -> None: ...

class JobStep(_message.Message):
    __slots__ = ("t_s", "at_minibatch", "from_mode", "to_mode", "reason", "observed_power_w", "observed_time_ms", "predicted_power_w", "predicted_power_w_hi", "predicted_time_ms", "kind", "predicted_time_ms_hi")
    T_S_FIELD_NUMBER: _ClassVar[int]
    AT_MINIBATCH_FIELD_NUMBER: _ClassVar[int]
    FROM_MODE_FIELD_NUMBER: _ClassVar[int]
    TO_MODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_POWER_W_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_POWER_W_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_POWER_W_HI_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_TIME_MS_HI_FIELD_NUMBER: _ClassVar[int]
    t_s: float
    at_minibatch: int
    from_mode: str
    to_mode: str
    reason: str
    observed_power_w: float
    observed_time_ms: float
    predicted_power_w: float
    predicted_power_w_hi: float
    predicted_time_ms: float
    kind: str
    predicted_time_ms_hi: float
    def __init__(self, t_s: _Optional[float] = ..., at_minibatch: _Optional[int] = ..., from_mode: _Optional[str] = ..., to_mode: _Optional[str] = ..., reason: _Optional[str] = ..., observed_power_w: _Optional[float] = ..., observed_time_ms: _Optional[float] = ..., predicted_power_w: _Optional[float] = ..., predicted_power_w_hi: _Optional[float] = ..., predicted_time_ms: _Optional[float] = ..., kind: _Optional[str] = ..., predicted_time_ms_hi: _Optional[float] = ...) -> None: ...

class JobSegment(_message.Message):
    __slots__ = ("mode", "device_id", "minibatches", "seconds", "energy_j")
    MODE_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    MINIBATCHES_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    ENERGY_J_FIELD_NUMBER: _ClassVar[int]
    mode: str
    device_id: str
    minibatches: int
    seconds: float
    energy_j: float
    def __init__(self, mode: _Optional[str] = ..., device_id: _Optional[str] = ..., minibatches: _Optional[int] = ..., seconds: _Optional[float] = ..., energy_j: _Optional[float] = ...) -> None: ...

class Job(_message.Message):
    __slots__ = ("job_id", "workload", "target_device", "target_model", "goal", "power_budget_w", "deadline_s", "min_energy", "minibatches", "state", "detail", "device_id", "model_id", "campaign_id", "minibatches_done", "elapsed_s", "energy_j", "eta_s", "mode", "predicted_time_ms", "predicted_time_ms_hi", "predicted_power_w", "predicted_power_w_hi", "observed_time_ms", "observed_power_w", "steps", "segments", "goal_kept", "created_s", "finished_s", "confidence", "max_steps", "window_s", "profile_modes", "strategy", "at_risk", "priority", "fleet", "inference", "waiting_for", "verdict", "history", "runs", "board_minibatches", "covered", "choice_note", "confirms", "confirmed", "template", "output_tail", "seed")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    TARGET_DEVICE_FIELD_NUMBER: _ClassVar[int]
    TARGET_MODEL_FIELD_NUMBER: _ClassVar[int]
    GOAL_FIELD_NUMBER: _ClassVar[int]
    POWER_BUDGET_W_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_S_FIELD_NUMBER: _ClassVar[int]
    MIN_ENERGY_FIELD_NUMBER: _ClassVar[int]
    MINIBATCHES_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    CAMPAIGN_ID_FIELD_NUMBER: _ClassVar[int]
    MINIBATCHES_DONE_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_S_FIELD_NUMBER: _ClassVar[int]
    ENERGY_J_FIELD_NUMBER: _ClassVar[int]
    ETA_S_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_TIME_MS_HI_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_POWER_W_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_POWER_W_HI_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_POWER_W_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    SEGMENTS_FIELD_NUMBER: _ClassVar[int]
    GOAL_KEPT_FIELD_NUMBER: _ClassVar[int]
    CREATED_S_FIELD_NUMBER: _ClassVar[int]
    FINISHED_S_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    MAX_STEPS_FIELD_NUMBER: _ClassVar[int]
    WINDOW_S_FIELD_NUMBER: _ClassVar[int]
    PROFILE_MODES_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    AT_RISK_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    FLEET_FIELD_NUMBER: _ClassVar[int]
    INFERENCE_FIELD_NUMBER: _ClassVar[int]
    WAITING_FOR_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    BOARD_MINIBATCHES_FIELD_NUMBER: _ClassVar[int]
    COVERED_FIELD_NUMBER: _ClassVar[int]
    CHOICE_NOTE_FIELD_NUMBER: _ClassVar[int]
    CONFIRMS_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TAIL_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    workload: str
    target_device: str
    target_model: str
    goal: str
    power_budget_w: float
    deadline_s: float
    min_energy: bool
    minibatches: int
    state: str
    detail: str
    device_id: str
    model_id: str
    campaign_id: str
    minibatches_done: int
    elapsed_s: float
    energy_j: float
    eta_s: float
    mode: _common_pb2.PowerMode
    predicted_time_ms: float
    predicted_time_ms_hi: float
    predicted_power_w: float
    predicted_power_w_hi: float
    observed_time_ms: float
    observed_power_w: float
    steps: _containers.RepeatedCompositeFieldContainer[JobStep]
    segments: _containers.RepeatedCompositeFieldContainer[JobSegment]
    goal_kept: bool
    created_s: float
    finished_s: float
    confidence: float
    max_steps: int
    window_s: float
    profile_modes: int
    strategy: str
    at_risk: bool
    priority: float
    fleet: bool
    inference: JobInference
    waiting_for: str
    verdict: JobVerdict
    history: _containers.RepeatedCompositeFieldContainer[JobTransition]
    runs: _containers.RepeatedCompositeFieldContainer[JobRun]
    board_minibatches: int
    covered: bool
    choice_note: str
    confirms: _containers.RepeatedCompositeFieldContainer[JobConfirm]
    confirmed: bool
    template: str
    output_tail: _containers.RepeatedScalarFieldContainer[str]
    seed: int
    def __init__(self, job_id: _Optional[str] = ..., workload: _Optional[str] = ..., target_device: _Optional[str] = ..., target_model: _Optional[str] = ..., goal: _Optional[str] = ..., power_budget_w: _Optional[float] = ..., deadline_s: _Optional[float] = ..., min_energy: bool = ..., minibatches: _Optional[int] = ..., state: _Optional[str] = ..., detail: _Optional[str] = ..., device_id: _Optional[str] = ..., model_id: _Optional[str] = ..., campaign_id: _Optional[str] = ..., minibatches_done: _Optional[int] = ..., elapsed_s: _Optional[float] = ..., energy_j: _Optional[float] = ..., eta_s: _Optional[float] = ..., mode: _Optional[_Union[_common_pb2.PowerMode, _Mapping]] = ..., predicted_time_ms: _Optional[float] = ..., predicted_time_ms_hi: _Optional[float] = ..., predicted_power_w: _Optional[float] = ..., predicted_power_w_hi: _Optional[float] = ..., observed_time_ms: _Optional[float] = ..., observed_power_w: _Optional[float] = ..., steps: _Optional[_Iterable[_Union[JobStep, _Mapping]]] = ..., segments: _Optional[_Iterable[_Union[JobSegment, _Mapping]]] = ..., goal_kept: bool = ..., created_s: _Optional[float] = ..., finished_s: _Optional[float] = ..., confidence: _Optional[float] = ..., max_steps: _Optional[int] = ..., window_s: _Optional[float] = ..., profile_modes: _Optional[int] = ..., strategy: _Optional[str] = ..., at_risk: bool = ..., priority: _Optional[float] = ..., fleet: bool = ..., inference: _Optional[_Union[JobInference, _Mapping]] = ..., waiting_for: _Optional[str] = ..., verdict: _Optional[_Union[JobVerdict, _Mapping]] = ..., history: _Optional[_Iterable[_Union[JobTransition, _Mapping]]] = ..., runs: _Optional[_Iterable[_Union[JobRun, _Mapping]]] = ..., board_minibatches: _Optional[int] = ..., covered: bool = ..., choice_note: _Optional[str] = ..., confirms: _Optional[_Iterable[_Union[JobConfirm, _Mapping]]] = ..., confirmed: bool = ..., template: _Optional[str] = ..., output_tail: _Optional[_Iterable[str]] = ..., seed: _Optional[int] = ...) -> None: ...

class JobVerdict(_message.Message):
    __slots__ = ("judged", "kept", "constraint", "objective", "text")
    JUDGED_FIELD_NUMBER: _ClassVar[int]
    KEPT_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINT_FIELD_NUMBER: _ClassVar[int]
    OBJECTIVE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    judged: bool
    kept: bool
    constraint: str
    objective: str
    text: str
    def __init__(self, judged: bool = ..., kept: bool = ..., constraint: _Optional[str] = ..., objective: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class JobTransition(_message.Message):
    __slots__ = ("state", "why", "at_s")
    STATE_FIELD_NUMBER: _ClassVar[int]
    WHY_FIELD_NUMBER: _ClassVar[int]
    AT_S_FIELD_NUMBER: _ClassVar[int]
    state: str
    why: str
    at_s: float
    def __init__(self, state: _Optional[str] = ..., why: _Optional[str] = ..., at_s: _Optional[float] = ...) -> None: ...

class JobConfirm(_message.Message):
    __slots__ = ("mode", "device_id", "power_w", "time_ms", "predicted_power_w_hi", "over", "seconds")
    MODE_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    POWER_W_FIELD_NUMBER: _ClassVar[int]
    TIME_MS_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_POWER_W_HI_FIELD_NUMBER: _ClassVar[int]
    OVER_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    mode: str
    device_id: str
    power_w: float
    time_ms: float
    predicted_power_w_hi: float
    over: bool
    seconds: float
    def __init__(self, mode: _Optional[str] = ..., device_id: _Optional[str] = ..., power_w: _Optional[float] = ..., time_ms: _Optional[float] = ..., predicted_power_w_hi: _Optional[float] = ..., over: bool = ..., seconds: _Optional[float] = ...) -> None: ...

class JobRun(_message.Message):
    __slots__ = ("run_id", "device_id", "base_done", "trained", "elapsed_s", "energy_j", "ended")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    BASE_DONE_FIELD_NUMBER: _ClassVar[int]
    TRAINED_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_S_FIELD_NUMBER: _ClassVar[int]
    ENERGY_J_FIELD_NUMBER: _ClassVar[int]
    ENDED_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    device_id: str
    base_done: int
    trained: int
    elapsed_s: float
    energy_j: float
    ended: str
    def __init__(self, run_id: _Optional[str] = ..., device_id: _Optional[str] = ..., base_done: _Optional[int] = ..., trained: _Optional[int] = ..., elapsed_s: _Optional[float] = ..., energy_j: _Optional[float] = ..., ended: _Optional[str] = ...) -> None: ...

class JobInference(_message.Message):
    __slots__ = ("workload", "arrival_rate", "trace", "latency_budget_s", "batch_size", "choice", "predicted_p95_ms", "served", "late", "dropped", "p50_ms", "p95_ms", "p99_ms", "latency_kept", "fastest_ms")
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    ARRIVAL_RATE_FIELD_NUMBER: _ClassVar[int]
    TRACE_FIELD_NUMBER: _ClassVar[int]
    LATENCY_BUDGET_S_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    CHOICE_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_P95_MS_FIELD_NUMBER: _ClassVar[int]
    SERVED_FIELD_NUMBER: _ClassVar[int]
    LATE_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    P50_MS_FIELD_NUMBER: _ClassVar[int]
    P95_MS_FIELD_NUMBER: _ClassVar[int]
    P99_MS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_KEPT_FIELD_NUMBER: _ClassVar[int]
    FASTEST_MS_FIELD_NUMBER: _ClassVar[int]
    workload: str
    arrival_rate: float
    trace: bool
    latency_budget_s: float
    batch_size: int
    choice: str
    predicted_p95_ms: float
    served: int
    late: int
    dropped: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    latency_kept: bool
    fastest_ms: float
    def __init__(self, workload: _Optional[str] = ..., arrival_rate: _Optional[float] = ..., trace: bool = ..., latency_budget_s: _Optional[float] = ..., batch_size: _Optional[int] = ..., choice: _Optional[str] = ..., predicted_p95_ms: _Optional[float] = ..., served: _Optional[int] = ..., late: _Optional[int] = ..., dropped: _Optional[int] = ..., p50_ms: _Optional[float] = ..., p95_ms: _Optional[float] = ..., p99_ms: _Optional[float] = ..., latency_kept: bool = ..., fastest_ms: _Optional[float] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListJobsResponse(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[Job]
    def __init__(self, jobs: _Optional[_Iterable[_Union[Job, _Mapping]]] = ...) -> None: ...

class GetJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class CancelJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class RooflineRequest(_message.Message):
    __slots__ = ("board_model", "workload", "modes", "measure", "device_id", "seconds", "minibatch_size", "phase", "remeasure", "profile_fit")
    BOARD_MODEL_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    MODES_FIELD_NUMBER: _ClassVar[int]
    MEASURE_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    MINIBATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    REMEASURE_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIT_FIELD_NUMBER: _ClassVar[int]
    board_model: str
    workload: str
    modes: _containers.RepeatedScalarFieldContainer[str]
    measure: bool
    device_id: str
    seconds: float
    minibatch_size: int
    phase: str
    remeasure: bool
    profile_fit: bool
    def __init__(self, board_model: _Optional[str] = ..., workload: _Optional[str] = ..., modes: _Optional[_Iterable[str]] = ..., measure: bool = ..., device_id: _Optional[str] = ..., seconds: _Optional[float] = ..., minibatch_size: _Optional[int] = ..., phase: _Optional[str] = ..., remeasure: bool = ..., profile_fit: bool = ...) -> None: ...

class RooflinePoint(_message.Message):
    __slots__ = ("mode", "mode_name", "peak_flops", "peak_bytes_per_s", "eps_flop_j", "eps_byte_j", "pi0_w", "idle_w", "measured_s", "device_id", "method", "workload_flops", "workload_bytes", "time_s", "energy_j", "memory_bound", "observed_time_s", "observed_energy_j", "observed_profiles", "profile_eps_flop_j", "profile_eps_byte_j", "profile_pi0_w", "profile_fit_mape", "bench_fit_mape", "profile_energy_j", "profiled")
    MODE_FIELD_NUMBER: _ClassVar[int]
    MODE_NAME_FIELD_NUMBER: _ClassVar[int]
    PEAK_FLOPS_FIELD_NUMBER: _ClassVar[int]
    PEAK_BYTES_PER_S_FIELD_NUMBER: _ClassVar[int]
    EPS_FLOP_J_FIELD_NUMBER: _ClassVar[int]
    EPS_BYTE_J_FIELD_NUMBER: _ClassVar[int]
    PI0_W_FIELD_NUMBER: _ClassVar[int]
    IDLE_W_FIELD_NUMBER: _ClassVar[int]
    MEASURED_S_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FLOPS_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_BYTES_FIELD_NUMBER: _ClassVar[int]
    TIME_S_FIELD_NUMBER: _ClassVar[int]
    ENERGY_J_FIELD_NUMBER: _ClassVar[int]
    MEMORY_BOUND_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_TIME_S_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_ENERGY_J_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_PROFILES_FIELD_NUMBER: _ClassVar[int]
    PROFILE_EPS_FLOP_J_FIELD_NUMBER: _ClassVar[int]
    PROFILE_EPS_BYTE_J_FIELD_NUMBER: _ClassVar[int]
    PROFILE_PI0_W_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIT_MAPE_FIELD_NUMBER: _ClassVar[int]
    BENCH_FIT_MAPE_FIELD_NUMBER: _ClassVar[int]
    PROFILE_ENERGY_J_FIELD_NUMBER: _ClassVar[int]
    PROFILED_FIELD_NUMBER: _ClassVar[int]
    mode: _common_pb2.PowerMode
    mode_name: str
    peak_flops: float
    peak_bytes_per_s: float
    eps_flop_j: float
    eps_byte_j: float
    pi0_w: float
    idle_w: float
    measured_s: float
    device_id: str
    method: str
    workload_flops: float
    workload_bytes: float
    time_s: float
    energy_j: float
    memory_bound: bool
    observed_time_s: float
    observed_energy_j: float
    observed_profiles: int
    profile_eps_flop_j: float
    profile_eps_byte_j: float
    profile_pi0_w: float
    profile_fit_mape: float
    bench_fit_mape: float
    profile_energy_j: float
    profiled: _containers.RepeatedCompositeFieldContainer[ProfiledWorkload]
    def __init__(self, mode: _Optional[_Union[_common_pb2.PowerMode, _Mapping]] = ..., mode_name: _Optional[str] = ..., peak_flops: _Optional[float] = ..., peak_bytes_per_s: _Optional[float] = ..., eps_flop_j: _Optional[float] = ..., eps_byte_j: _Optional[float] = ..., pi0_w: _Optional[float] = ..., idle_w: _Optional[float] = ..., measured_s: _Optional[float] = ..., device_id: _Optional[str] = ..., method: _Optional[str] = ..., workload_flops: _Optional[float] = ..., workload_bytes: _Optional[float] = ..., time_s: _Optional[float] = ..., energy_j: _Optional[float] = ..., memory_bound: bool = ..., observed_time_s: _Optional[float] = ..., observed_energy_j: _Optional[float] = ..., observed_profiles: _Optional[int] = ..., profile_eps_flop_j: _Optional[float] = ..., profile_eps_byte_j: _Optional[float] = ..., profile_pi0_w: _Optional[float] = ..., profile_fit_mape: _Optional[float] = ..., bench_fit_mape: _Optional[float] = ..., profile_energy_j: _Optional[float] = ..., profiled: _Optional[_Iterable[_Union[ProfiledWorkload, _Mapping]]] = ...) -> None: ...

class ProfiledWorkload(_message.Message):
    __slots__ = ("workload", "flops", "bytes", "time_s", "energy_j", "profiles", "profile_fit_energy_j", "bench_fit_energy_j")
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    FLOPS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    TIME_S_FIELD_NUMBER: _ClassVar[int]
    ENERGY_J_FIELD_NUMBER: _ClassVar[int]
    PROFILES_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIT_ENERGY_J_FIELD_NUMBER: _ClassVar[int]
    BENCH_FIT_ENERGY_J_FIELD_NUMBER: _ClassVar[int]
    workload: str
    flops: float
    bytes: float
    time_s: float
    energy_j: float
    profiles: int
    profile_fit_energy_j: float
    bench_fit_energy_j: float
    def __init__(self, workload: _Optional[str] = ..., flops: _Optional[float] = ..., bytes: _Optional[float] = ..., time_s: _Optional[float] = ..., energy_j: _Optional[float] = ..., profiles: _Optional[int] = ..., profile_fit_energy_j: _Optional[float] = ..., bench_fit_energy_j: _Optional[float] = ...) -> None: ...

class RooflineResponse(_message.Message):
    __slots__ = ("board_model", "workload", "points", "measured", "intensity", "phase", "minibatch_size")
    BOARD_MODEL_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    POINTS_FIELD_NUMBER: _ClassVar[int]
    MEASURED_FIELD_NUMBER: _ClassVar[int]
    INTENSITY_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    MINIBATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    board_model: str
    workload: str
    points: _containers.RepeatedCompositeFieldContainer[RooflinePoint]
    measured: int
    intensity: float
    phase: str
    minibatch_size: int
    def __init__(self, board_model: _Optional[str] = ..., workload: _Optional[str] = ..., points: _Optional[_Iterable[_Union[RooflinePoint, _Mapping]]] = ..., measured: _Optional[int] = ..., intensity: _Optional[float] = ..., phase: _Optional[str] = ..., minibatch_size: _Optional[int] = ...) -> None: ...

class SetDeviceLabelsRequest(_message.Message):
    __slots__ = ("device_id", "labels")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    device_id: str
    labels: _containers.ScalarMap[str, str]
    def __init__(self, device_id: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ...) -> None: ...

class SetFleetCapRequest(_message.Message):
    __slots__ = ("cap_w", "group")
    CAP_W_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    cap_w: float
    group: str
    def __init__(self, cap_w: _Optional[float] = ..., group: _Optional[str] = ...) -> None: ...

class ClearFleetCapRequest(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: str
    def __init__(self, group: _Optional[str] = ...) -> None: ...

class GetFleetPlanRequest(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: str
    def __init__(self, group: _Optional[str] = ...) -> None: ...

class FleetBoard(_message.Message):
    __slots__ = ("device_id", "model", "group", "online", "power_w", "job_id", "workload", "mode", "predicted_w")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    ONLINE_FIELD_NUMBER: _ClassVar[int]
    POWER_W_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_W_FIELD_NUMBER: _ClassVar[int]
    device_id: str
    model: str
    group: str
    online: bool
    power_w: float
    job_id: str
    workload: str
    mode: str
    predicted_w: float
    def __init__(self, device_id: _Optional[str] = ..., model: _Optional[str] = ..., group: _Optional[str] = ..., online: bool = ..., power_w: _Optional[float] = ..., job_id: _Optional[str] = ..., workload: _Optional[str] = ..., mode: _Optional[str] = ..., predicted_w: _Optional[float] = ...) -> None: ...

class FleetCap(_message.Message):
    __slots__ = ("group", "cap_w", "power_w", "idle_w", "headroom_w", "predicted_w", "boards")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    CAP_W_FIELD_NUMBER: _ClassVar[int]
    POWER_W_FIELD_NUMBER: _ClassVar[int]
    IDLE_W_FIELD_NUMBER: _ClassVar[int]
    HEADROOM_W_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_W_FIELD_NUMBER: _ClassVar[int]
    BOARDS_FIELD_NUMBER: _ClassVar[int]
    group: str
    cap_w: float
    power_w: float
    idle_w: float
    headroom_w: float
    predicted_w: float
    boards: _containers.RepeatedCompositeFieldContainer[FleetBoard]
    def __init__(self, group: _Optional[str] = ..., cap_w: _Optional[float] = ..., power_w: _Optional[float] = ..., idle_w: _Optional[float] = ..., headroom_w: _Optional[float] = ..., predicted_w: _Optional[float] = ..., boards: _Optional[_Iterable[_Union[FleetBoard, _Mapping]]] = ...) -> None: ...

class FleetPlan(_message.Message):
    __slots__ = ("caps", "queued_jobs")
    CAPS_FIELD_NUMBER: _ClassVar[int]
    QUEUED_JOBS_FIELD_NUMBER: _ClassVar[int]
    caps: _containers.RepeatedCompositeFieldContainer[FleetCap]
    queued_jobs: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, caps: _Optional[_Iterable[_Union[FleetCap, _Mapping]]] = ..., queued_jobs: _Optional[_Iterable[str]] = ...) -> None: ...
