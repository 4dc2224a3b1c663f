from jetfleet.shared.proto import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Device(_message.Message):
    __slots__ = ("device_id", "model", "serial", "online", "current_mode", "current_mode_name", "last_seen_s", "software", "emulated", "last_telemetry", "catalog", "first_seen_s", "metrics_address")
    class SoftwareEntry(_message.Message):
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
    def __init__(self, device_id: _Optional[str] = ..., model: _Optional[str] = ..., serial: _Optional[str] = ..., online: _Optional[bool] = ..., current_mode: _Optional[_Union[_common_pb2.PowerMode, _Mapping]] = ..., current_mode_name: _Optional[str] = ..., last_seen_s: _Optional[float] = ..., software: _Optional[_Mapping[str, str]] = ..., emulated: _Optional[bool] = ..., last_telemetry: _Optional[_Union[_common_pb2.TelemetrySample, _Mapping]] = ..., catalog: _Optional[_Union[_common_pb2.Catalog, _Mapping]] = ..., first_seen_s: _Optional[float] = ..., metrics_address: _Optional[str] = ...) -> None: ...

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
    __slots__ = ("device_id", "max_samples")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_SAMPLES_FIELD_NUMBER: _ClassVar[int]
    device_id: str
    max_samples: int
    def __init__(self, device_id: _Optional[str] = ..., max_samples: _Optional[int] = ...) -> None: ...

class CreateCampaignRequest(_message.Message):
    __slots__ = ("workload", "device_id", "board_model", "modes", "mode_list", "minibatches", "seed")
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    BOARD_MODEL_FIELD_NUMBER: _ClassVar[int]
    MODES_FIELD_NUMBER: _ClassVar[int]
    MODE_LIST_FIELD_NUMBER: _ClassVar[int]
    MINIBATCHES_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    workload: str
    device_id: str
    board_model: str
    modes: str
    mode_list: _containers.RepeatedScalarFieldContainer[str]
    minibatches: int
    seed: int
    def __init__(self, workload: _Optional[str] = ..., device_id: _Optional[str] = ..., board_model: _Optional[str] = ..., modes: _Optional[str] = ..., mode_list: _Optional[_Iterable[str]] = ..., minibatches: _Optional[int] = ..., seed: _Optional[int] = ...) -> None: ...

class Campaign(_message.Message):
    __slots__ = ("campaign_id", "workload", "target_device", "target_model", "modes", "minibatches", "status", "total", "done", "failed", "in_flight", "eta_s", "created_s", "finished_s", "boards", "errors", "retries")
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
    def __init__(self, campaign_id: _Optional[str] = ..., workload: _Optional[str] = ..., target_device: _Optional[str] = ..., target_model: _Optional[str] = ..., modes: _Optional[str] = ..., minibatches: _Optional[int] = ..., status: _Optional[str] = ..., total: _Optional[int] = ..., done: _Optional[int] = ..., failed: _Optional[int] = ..., in_flight: _Optional[int] = ..., eta_s: _Optional[float] = ..., created_s: _Optional[float] = ..., finished_s: _Optional[float] = ..., boards: _Optional[_Iterable[str]] = ..., errors: _Optional[_Iterable[str]] = ..., retries: _Optional[int] = ...) -> None: ...

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
    __slots__ = ("csv", "name")
    CSV_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    csv: str
    name: str
    def __init__(self, csv: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ImportProfilesResponse(_message.Message):
    __slots__ = ("rows", "source", "new_board_models")
    ROWS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    NEW_BOARD_MODELS_FIELD_NUMBER: _ClassVar[int]
    rows: int
    source: str
    new_board_models: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, rows: _Optional[int] = ..., source: _Optional[str] = ..., new_board_models: _Optional[_Iterable[str]] = ...) -> None: ...

class ModelInfo(_message.Message):
    __slots__ = ("model_id", "kind", "board_model", "workload", "parent_id", "version", "created_s", "training_modes", "metrics")
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
    model_id: str
    kind: str
    board_model: str
    workload: str
    parent_id: str
    version: int
    created_s: float
    training_modes: int
    metrics: _containers.ScalarMap[str, float]
    def __init__(self, model_id: _Optional[str] = ..., kind: _Optional[str] = ..., board_model: _Optional[str] = ..., workload: _Optional[str] = ..., parent_id: _Optional[str] = ..., version: _Optional[int] = ..., created_s: _Optional[float] = ..., training_modes: _Optional[int] = ..., metrics: _Optional[_Mapping[str, float]] = ...) -> None: ...

class TrainReferenceRequest(_message.Message):
    __slots__ = ("board_model", "workload", "campaign_id", "epochs", "no_dropout")
    BOARD_MODEL_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    CAMPAIGN_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCHS_FIELD_NUMBER: _ClassVar[int]
    NO_DROPOUT_FIELD_NUMBER: _ClassVar[int]
    board_model: str
    workload: str
    campaign_id: str
    epochs: int
    no_dropout: bool
    def __init__(self, board_model: _Optional[str] = ..., workload: _Optional[str] = ..., campaign_id: _Optional[str] = ..., epochs: _Optional[int] = ..., no_dropout: _Optional[bool] = ...) -> None: ...

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
    __slots__ = ("board_model", "workload", "model_id", "grid", "pareto_only")
    BOARD_MODEL_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    GRID_FIELD_NUMBER: _ClassVar[int]
    PARETO_ONLY_FIELD_NUMBER: _ClassVar[int]
    board_model: str
    workload: str
    model_id: str
    grid: str
    pareto_only: bool
    def __init__(self, board_model: _Optional[str] = ..., workload: _Optional[str] = ..., model_id: _Optional[str] = ..., grid: _Optional[str] = ..., pareto_only: _Optional[bool] = ...) -> None: ...

class Prediction(_message.Message):
    __slots__ = ("mode", "time_ms", "power_w", "pareto")
    MODE_FIELD_NUMBER: _ClassVar[int]
    TIME_MS_FIELD_NUMBER: _ClassVar[int]
    POWER_W_FIELD_NUMBER: _ClassVar[int]
    PARETO_FIELD_NUMBER: _ClassVar[int]
    mode: _common_pb2.PowerMode
    time_ms: float
    power_w: float
    pareto: bool
    def __init__(self, mode: _Optional[_Union[_common_pb2.PowerMode, _Mapping]] = ..., time_ms: _Optional[float] = ..., power_w: _Optional[float] = ..., pareto: _Optional[bool] = ...) -> None: ...

class PredictResponse(_message.Message):
    __slots__ = ("model_id", "predictions", "pareto_size")
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    PREDICTIONS_FIELD_NUMBER: _ClassVar[int]
    PARETO_SIZE_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    predictions: _containers.RepeatedCompositeFieldContainer[Prediction]
    pareto_size: int
    def __init__(self, model_id: _Optional[str] = ..., predictions: _Optional[_Iterable[_Union[Prediction, _Mapping]]] = ..., pareto_size: _Optional[int] = ...) -> None: ...

class OptimizeRequest(_message.Message):
    __slots__ = ("device_id", "board_model", "workload", "model_id", "power_budget_w", "deadline_s", "min_energy", "minibatches_per_epoch", "apply", "verify_minibatches", "refine")
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
    def __init__(self, device_id: _Optional[str] = ..., board_model: _Optional[str] = ..., workload: _Optional[str] = ..., model_id: _Optional[str] = ..., power_budget_w: _Optional[float] = ..., deadline_s: _Optional[float] = ..., min_energy: _Optional[bool] = ..., minibatches_per_epoch: _Optional[int] = ..., apply: _Optional[bool] = ..., verify_minibatches: _Optional[int] = ..., refine: _Optional[bool] = ...) -> None: ...

class Applied(_message.Message):
    __slots__ = ("device_id", "confirmed", "observed_time_ms", "observed_power_w", "time_error_pct", "power_error_pct", "decision_id")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_POWER_W_FIELD_NUMBER: _ClassVar[int]
    TIME_ERROR_PCT_FIELD_NUMBER: _ClassVar[int]
    POWER_ERROR_PCT_FIELD_NUMBER: _ClassVar[int]
    DECISION_ID_FIELD_NUMBER: _ClassVar[int]
    device_id: str
    confirmed: _common_pb2.PowerMode
    observed_time_ms: float
    observed_power_w: float
    time_error_pct: float
    power_error_pct: float
    decision_id: str
    def __init__(self, device_id: _Optional[str] = ..., confirmed: _Optional[_Union[_common_pb2.PowerMode, _Mapping]] = ..., observed_time_ms: _Optional[float] = ..., observed_power_w: _Optional[float] = ..., time_error_pct: _Optional[float] = ..., power_error_pct: _Optional[float] = ..., decision_id: _Optional[str] = ...) -> None: ...

class OptimizeResponse(_message.Message):
    __slots__ = ("model_id", "goal", "mode", "mode_name", "predicted_time_ms", "predicted_power_w", "epoch_s", "energy_per_epoch_j", "applied")
    MODEL_ID_FIELD_NUMBER: _ClassVar[int]
    GOAL_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    MODE_NAME_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_POWER_W_FIELD_NUMBER: _ClassVar[int]
    EPOCH_S_FIELD_NUMBER: _ClassVar[int]
    ENERGY_PER_EPOCH_J_FIELD_NUMBER: _ClassVar[int]
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    model_id: str
    goal: str
    mode: _common_pb2.PowerMode
    mode_name: str
    predicted_time_ms: float
    predicted_power_w: float
    epoch_s: float
    energy_per_epoch_j: float
    applied: _containers.RepeatedCompositeFieldContainer[Applied]
    def __init__(self, model_id: _Optional[str] = ..., goal: _Optional[str] = ..., mode: _Optional[_Union[_common_pb2.PowerMode, _Mapping]] = ..., mode_name: _Optional[str] = ..., predicted_time_ms: _Optional[float] = ..., predicted_power_w: _Optional[float] = ..., epoch_s: _Optional[float] = ..., energy_per_epoch_j: _Optional[float] = ..., applied: _Optional[_Iterable[_Union[Applied, _Mapping]]] = ...) -> None: ...
