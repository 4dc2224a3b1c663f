from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PowerMode(_message.Message):
    __slots__ = ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz")
    CORES_FIELD_NUMBER: _ClassVar[int]
    CPU_MHZ_FIELD_NUMBER: _ClassVar[int]
    GPU_MHZ_FIELD_NUMBER: _ClassVar[int]
    MEM_MHZ_FIELD_NUMBER: _ClassVar[int]
    cores: int
    cpu_mhz: float
    gpu_mhz: float
    mem_mhz: float
    def __init__(self, cores: _Optional[int] = ..., cpu_mhz: _Optional[float] = ..., gpu_mhz: _Optional[float] = ..., mem_mhz: _Optional[float] = ...) -> None: ...

class Rail(_message.Message):
    __slots__ = ("label", "parts", "in_total")
    LABEL_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    IN_TOTAL_FIELD_NUMBER: _ClassVar[int]
    label: str
    parts: _containers.RepeatedScalarFieldContainer[str]
    in_total: bool
    def __init__(self, label: _Optional[str] = ..., parts: _Optional[_Iterable[str]] = ..., in_total: bool = ...) -> None: ...

class Catalog(_message.Message):
    __slots__ = ("model", "name", "cores", "cpu_mhz", "gpu_mhz", "mem_mhz", "presets", "rails", "grids")
    class PresetsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: PowerMode
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[PowerMode, _Mapping]] = ...) -> None: ...
    class GridsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Grid
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Grid, _Mapping]] = ...) -> None: ...
    MODEL_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CORES_FIELD_NUMBER: _ClassVar[int]
    CPU_MHZ_FIELD_NUMBER: _ClassVar[int]
    GPU_MHZ_FIELD_NUMBER: _ClassVar[int]
    MEM_MHZ_FIELD_NUMBER: _ClassVar[int]
    PRESETS_FIELD_NUMBER: _ClassVar[int]
    RAILS_FIELD_NUMBER: _ClassVar[int]
    GRIDS_FIELD_NUMBER: _ClassVar[int]
    model: str
    name: str
    cores: _containers.RepeatedScalarFieldContainer[int]
    cpu_mhz: _containers.RepeatedScalarFieldContainer[float]
    gpu_mhz: _containers.RepeatedScalarFieldContainer[float]
    mem_mhz: _containers.RepeatedScalarFieldContainer[float]
    presets: _containers.MessageMap[str, PowerMode]
    rails: _containers.RepeatedCompositeFieldContainer[Rail]
    grids: _containers.MessageMap[str, Grid]
    def __init__(self, model: _Optional[str] = ..., name: _Optional[str] = ..., cores: _Optional[_Iterable[int]] = ..., cpu_mhz: _Optional[_Iterable[float]] = ..., gpu_mhz: _Optional[_Iterable[float]] = ..., mem_mhz: _Optional[_Iterable[float]] = ..., presets: _Optional[_Mapping[str, PowerMode]] = ..., rails: _Optional[_Iterable[_Union[Rail, _Mapping]]] = ..., grids: _Optional[_Mapping[str, Grid]] = ...) -> None: ...

class Grid(_message.Message):
    __slots__ = ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz")
    CORES_FIELD_NUMBER: _ClassVar[int]
    CPU_MHZ_FIELD_NUMBER: _ClassVar[int]
    GPU_MHZ_FIELD_NUMBER: _ClassVar[int]
    MEM_MHZ_FIELD_NUMBER: _ClassVar[int]
    cores: _containers.RepeatedScalarFieldContainer[float]
    cpu_mhz: _containers.RepeatedScalarFieldContainer[float]
    gpu_mhz: _containers.RepeatedScalarFieldContainer[float]
    mem_mhz: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, cores: _Optional[_Iterable[float]] = ..., cpu_mhz: _Optional[_Iterable[float]] = ..., gpu_mhz: _Optional[_Iterable[float]] = ..., mem_mhz: _Optional[_Iterable[float]] = ...) -> None: ...

class BoardInfo(_message.Message):
    __slots__ = ("device_id", "model", "serial", "software", "catalog", "emulated", "workloads", "broken_workloads", "speed", "templates")
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
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SERIAL_FIELD_NUMBER: _ClassVar[int]
    SOFTWARE_FIELD_NUMBER: _ClassVar[int]
    CATALOG_FIELD_NUMBER: _ClassVar[int]
    EMULATED_FIELD_NUMBER: _ClassVar[int]
    WORKLOADS_FIELD_NUMBER: _ClassVar[int]
    BROKEN_WORKLOADS_FIELD_NUMBER: _ClassVar[int]
    SPEED_FIELD_NUMBER: _ClassVar[int]
    TEMPLATES_FIELD_NUMBER: _ClassVar[int]
    device_id: str
    model: str
    serial: str
    software: _containers.ScalarMap[str, str]
    catalog: Catalog
    emulated: bool
    workloads: _containers.RepeatedScalarFieldContainer[str]
    broken_workloads: _containers.ScalarMap[str, str]
    speed: float
    templates: _containers.RepeatedCompositeFieldContainer[TemplateInfo]
    def __init__(self, device_id: _Optional[str] = ..., model: _Optional[str] = ..., serial: _Optional[str] = ..., software: _Optional[_Mapping[str, str]] = ..., catalog: _Optional[_Union[Catalog, _Mapping]] = ..., emulated: bool = ..., workloads: _Optional[_Iterable[str]] = ..., broken_workloads: _Optional[_Mapping[str, str]] = ..., speed: _Optional[float] = ..., templates: _Optional[_Iterable[_Union[TemplateInfo, _Mapping]]] = ...) -> None: ...

class TemplateInfo(_message.Message):
    __slots__ = ("name", "args", "arg_rules")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    ARG_RULES_FIELD_NUMBER: _ClassVar[int]
    name: str
    args: _containers.RepeatedScalarFieldContainer[str]
    arg_rules: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., args: _Optional[_Iterable[str]] = ..., arg_rules: _Optional[_Iterable[str]] = ...) -> None: ...

class SampleColumns(_message.Message):
    __slots__ = ("samples", "rails", "temps", "values")
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    RAILS_FIELD_NUMBER: _ClassVar[int]
    TEMPS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    samples: int
    rails: _containers.RepeatedScalarFieldContainer[str]
    temps: _containers.RepeatedScalarFieldContainer[str]
    values: bytes
    def __init__(self, samples: _Optional[int] = ..., rails: _Optional[_Iterable[str]] = ..., temps: _Optional[_Iterable[str]] = ..., values: _Optional[bytes] = ...) -> None: ...

class TelemetrySample(_message.Message):
    __slots__ = ("t_s", "rails_w", "total_w", "cpu_mhz", "gpu_mhz", "mem_mhz", "cores_online", "temps_c", "cpu_util", "gpu_util")
    class RailsWEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class TempsCEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    T_S_FIELD_NUMBER: _ClassVar[int]
    RAILS_W_FIELD_NUMBER: _ClassVar[int]
    TOTAL_W_FIELD_NUMBER: _ClassVar[int]
    CPU_MHZ_FIELD_NUMBER: _ClassVar[int]
    GPU_MHZ_FIELD_NUMBER: _ClassVar[int]
    MEM_MHZ_FIELD_NUMBER: _ClassVar[int]
    CORES_ONLINE_FIELD_NUMBER: _ClassVar[int]
    TEMPS_C_FIELD_NUMBER: _ClassVar[int]
    CPU_UTIL_FIELD_NUMBER: _ClassVar[int]
    GPU_UTIL_FIELD_NUMBER: _ClassVar[int]
    t_s: float
    rails_w: _containers.ScalarMap[str, float]
    total_w: float
    cpu_mhz: float
    gpu_mhz: float
    mem_mhz: float
    cores_online: int
    temps_c: _containers.ScalarMap[str, float]
    cpu_util: float
    gpu_util: float
    def __init__(self, t_s: _Optional[float] = ..., rails_w: _Optional[_Mapping[str, float]] = ..., total_w: _Optional[float] = ..., cpu_mhz: _Optional[float] = ..., gpu_mhz: _Optional[float] = ..., mem_mhz: _Optional[float] = ..., cores_online: _Optional[int] = ..., temps_c: _Optional[_Mapping[str, float]] = ..., cpu_util: _Optional[float] = ..., gpu_util: _Optional[float] = ...) -> None: ...

class Error(_message.Message):
    __slots__ = ("code", "message", "field")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    field: str
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ..., field: _Optional[str] = ...) -> None: ...
