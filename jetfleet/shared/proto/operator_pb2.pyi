from jetfleet.shared.proto import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Device(_message.Message):
    __slots__ = ("device_id", "model", "serial", "online", "current_mode", "current_mode_name", "last_seen_s", "software", "emulated", "last_telemetry", "catalog", "first_seen_s")
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
    def __init__(self, device_id: _Optional[str] = ..., model: _Optional[str] = ..., serial: _Optional[str] = ..., online: _Optional[bool] = ..., current_mode: _Optional[_Union[_common_pb2.PowerMode, _Mapping]] = ..., current_mode_name: _Optional[str] = ..., last_seen_s: _Optional[float] = ..., software: _Optional[_Mapping[str, str]] = ..., emulated: _Optional[bool] = ..., last_telemetry: _Optional[_Union[_common_pb2.TelemetrySample, _Mapping]] = ..., catalog: _Optional[_Union[_common_pb2.Catalog, _Mapping]] = ..., first_seen_s: _Optional[float] = ...) -> None: ...

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
