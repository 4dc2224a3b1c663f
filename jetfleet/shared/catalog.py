"""Power-mode catalogs: what a power mode is on each board model.

A power mode is (online CPU cores, CPU MHz, GPU MHz, memory/EMC MHz), written ``CORES/CPU/GPU/MEM``
(``12/2201.6/1300.5/3199``) or by a preset name (``MAXN``). Each board model is described by a
TOML file in ``jetfleet/shared/boards/``; adding a board means adding a file, no code.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from jetfleet.shared.bounds import DEFAULT_MAX_POWER_W
from jetfleet.shared.compat import toml_reader
from jetfleet.shared.errors import InvalidArgument, NotFound

KNOBS = ("cores", "cpu_mhz", "gpu_mhz", "mem_mhz")
# A catalog is the product of four knobs. Real boards have 1,800 (Orin Nano) to 29,232 (AGX Xavier)
# modes; a catalog from a hello or an import may have at most this many.
MAX_CATALOG_MODES = 1_000_000
# ``grid()`` builds the list of modes; larger grids are counted and sampled by index (``mode_at``).
MAX_GRID_MODES = 200_000


def format_mhz(value: float) -> str:
    """1300.5 -> '1300.5', 3199.0 -> '3199' (the way operators write frequencies)."""
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return text or "0"


@dataclass(frozen=True, order=True)
class PowerMode:
    """A power mode: online CPU cores and CPU, GPU and memory (EMC) clocks in MHz; ``str()`` gives CORES/CPU/GPU/MEM."""

    cores: int
    cpu_mhz: float
    gpu_mhz: float
    mem_mhz: float

    def __str__(self) -> str:
        return "/".join([str(self.cores), format_mhz(self.cpu_mhz), format_mhz(self.gpu_mhz),
                         format_mhz(self.mem_mhz)])

    def as_tuple(self) -> tuple[int, float, float, float]:
        """(cores, CPU MHz, GPU MHz, memory MHz): the knob vector the models train on."""
        return (self.cores, self.cpu_mhz, self.gpu_mhz, self.mem_mhz)


@dataclass(frozen=True)
class Rail:
    """One power rail as the board reports it, and which twin components feed it."""

    label: str
    parts: tuple[str, ...]
    in_total: bool


def _short(name: str) -> str:
    """A lower-case preset name without NVIDIA's ``mode_`` prefix: ``mode_30w`` -> ``30w``."""
    return name[len("mode_"):] if name.startswith("mode_") else name


def _builtin_aliases(model: str) -> Mapping[str, str]:
    cat = builtin_catalogs().get(model)
    return cat.preset_aliases if cat is not None else {}


def _nearest(values: Sequence[float], x: float, n: int = 2) -> list[float]:
    return sorted(sorted(values, key=lambda v: (abs(v - x), v))[:n])


@dataclass(frozen=True)
class Catalog:
    """A board model's power modes (each knob's allowed values), its presets, rails, named grids and twin parameters."""

    model: str
    name: str
    cores: tuple[int, ...]
    cpu_mhz: tuple[float, ...]
    gpu_mhz: tuple[float, ...]
    mem_mhz: tuple[float, ...]
    presets: Mapping[str, PowerMode] = field(default_factory=dict)
    rails: tuple[Rail, ...] = ()
    grid_specs: Mapping[str, Mapping[str, tuple[float, ...]]] = field(default_factory=dict)
    device_tree_match: tuple[str, ...] = ()
    twin: Mapping[str, Any] = field(default_factory=dict)
    max_power_w: float = DEFAULT_MAX_POWER_W   # physically possible board power ([limits] in the TOML file)
    # other names operators use for a preset ([preset_aliases] in the TOML file: nano's 10W is its MAXN); a
    # catalog from the wire finds its board model's here through builtin_catalogs()
    preset_aliases: Mapping[str, str] = field(default_factory=dict)

    # --- knobs -------------------------------------------------------------------------------
    def knob_values(self, knob: str) -> tuple[float, ...]:
        """The allowed values of one knob (``cores``, ``cpu_mhz``, ``gpu_mhz`` or ``mem_mhz``), ascending."""
        return tuple(getattr(self, knob))

    @property
    def size(self) -> int:
        """The number of modes in the full grid (the product of the knobs' value counts)."""
        return len(self.cores) * len(self.cpu_mhz) * len(self.gpu_mhz) * len(self.mem_mhz)

    @property
    def maxn(self) -> PowerMode:
        """The MAXN preset, or every knob at its maximum when the catalog has no MAXN."""
        return self.presets.get("MAXN") or PowerMode(
            max(self.cores), max(self.cpu_mhz), max(self.gpu_mhz), max(self.mem_mhz))

    # --- validation and parsing --------------------------------------------------------------
    @cached_property
    def _knob_index(self) -> Mapping[str, Mapping[float, float]]:
        """Each knob's allowed values, each mapped to itself as ``validate`` returns it (computed once per catalog)."""
        return {k: {a: (int(a) if k == "cores" else float(a)) for a in self.knob_values(k)} for k in KNOBS}

    def validate(self, mode: PowerMode) -> PowerMode:
        """Return ``mode`` if every knob is in this catalog, else raise naming the bad knob."""
        index = self._knob_index
        try:   # a mode of this catalog, as it came (a board's commands, the wire's doubles): one lookup a knob
            return PowerMode(*(index[k][getattr(mode, k)] for k in KNOBS))  # type: ignore[arg-type]
        except (KeyError, TypeError):
            pass   # off by a rounding, or not a value at all: the tolerant search below says which knob
        for knob in KNOBS:
            allowed = self.knob_values(knob)
            value = getattr(mode, knob)
            if not any(abs(value - a) < 1e-6 for a in allowed):
                near = ", ".join(format_mhz(v) for v in _nearest(allowed, value))
                raise InvalidArgument(
                    f"{knob}={format_mhz(value)} is not a value of {self.model}; nearest allowed: {near} "
                    f"(range {format_mhz(min(allowed))}..{format_mhz(max(allowed))}, {len(allowed)} values)",
                    field=knob)
        # Normalise to the catalog's exact floats so equal modes compare equal.
        return PowerMode(*(self._exact(k, getattr(mode, k)) for k in KNOBS))  # type: ignore[arg-type]

    def _exact(self, knob: str, value: float) -> float:
        for a in self.knob_values(knob):
            if abs(value - a) < 1e-6:
                return int(a) if knob == "cores" else float(a)
        raise AssertionError(knob)

    def preset_named(self, text: str) -> str | None:
        """The catalog's one name for the preset ``text`` names, or None if it names none. Case-insensitive, and
        NVIDIA's spellings are interchangeable: ``30w``, ``30W``, ``MODE_30W`` all name AGX Orin's ``MODE_30W``
        and Orin Nano's ``15W`` answers to ``MODE_15W`` (the prefix ``MODE_`` is optional where it is unique);
        a board model's aliases (``10W`` for the Nano's ``MAXN``); ``MAXN`` names the preset that is the board's
        maximum where the board calls it otherwise (Orin Nano's ``15W``)."""
        text = text.strip().lower()
        if "/" in text:
            return None   # CORES/CPU/GPU/MEM, never a name
        exact = next((name for name in self.presets if name.lower() == text), None)
        if exact is not None:
            return exact
        short = _short(text)
        same = [name for name in self.presets if _short(name.lower()) == short]
        if len(same) == 1:
            return same[0]
        aliases = self.preset_aliases or _builtin_aliases(self.model)
        target = next((t for a, t in aliases.items() if a.lower() == text), None)
        if target in self.presets:
            return target
        if text == "maxn":
            return self.preset_name(self.maxn)
        return None

    def parse_mode(self, text: str) -> PowerMode:
        """Parse ``CORES/CPU/GPU/MEM`` (MHz) or a preset name (case-insensitive)."""
        name = self.preset_named(text)
        if name is not None:
            return self.presets[name]
        if text.strip().lower() == "maxn":
            return self.maxn   # every knob at its maximum (a board whose presets name none of them so)
        text = text.strip()
        parts = text.split("/")
        if len(parts) != 4:
            names = ", ".join(self.presets) or "none"
            raise InvalidArgument(
                f"mode {text[:64]!r} is neither CORES/CPU_MHZ/GPU_MHZ/MEM_MHZ (e.g. {self.maxn}) "
                f"nor a preset of {self.model} ({names})", field="mode")
        values: list[float] = []
        for knob, part in zip(KNOBS, parts):
            try:
                values.append(float(part))
            except ValueError:
                raise InvalidArgument(f"{knob} {part[:32]!r} is not a number in mode {text[:64]!r}", field=knob) from None
        if not all(math.isfinite(v) for v in values):
            raise InvalidArgument(f"mode {text[:64]!r} has a value that is not a finite number", field="mode")
        if values[0] != int(values[0]):
            raise InvalidArgument(f"cores must be a whole number, got {parts[0][:32]!r}", field="cores")
        return self.validate(PowerMode(int(values[0]), values[1], values[2], values[3]))

    def preset_name(self, mode: PowerMode) -> str | None:
        """The name of the preset equal to ``mode``, or None."""
        for name, preset in self.presets.items():
            if preset == mode:
                return name
        return None

    # --- grids ---------------------------------------------------------------------------------
    @property
    def grid_names(self) -> tuple[str, ...]:
        """The grids a campaign can name: ``full``, the catalog's own, and ``presets``."""
        return ("full", *sorted(self.grid_specs), "presets")

    def _axes(self, name: str) -> list[tuple[float, ...]]:
        if name == "full":
            spec: Mapping[str, tuple[float, ...]] = {}
        elif name in self.grid_specs:
            spec = self.grid_specs[name]
        else:
            raise InvalidArgument(
                f"grid {name[:64]!r} is not defined for {self.model}; allowed: {', '.join(self.grid_names)}",
                field="grid")
        return [tuple(spec.get(k) or self.knob_values(k)) for k in KNOBS]

    def grid_size(self, name: str) -> int:
        """How many modes a named grid has, counted without building it."""
        if name == "presets":
            return len(set(self.presets.values()))
        n = 1
        for axis in self._axes(name):
            n *= len(axis)
        return n

    def grid(self, name: str) -> list[PowerMode]:
        """The modes of a named grid (``full``, ``presets`` or one of the catalog's); InvalidArgument otherwise,
        or when the grid has more than MAX_GRID_MODES modes (count and sample those with ``grid_size``/``sample``)."""
        if name == "presets":
            return list(dict.fromkeys(self.presets.values()))
        size = self.grid_size(name)
        if size > MAX_GRID_MODES:
            raise InvalidArgument(f"grid {name!r} of {self.model} has {size} modes; at most {MAX_GRID_MODES} can be "
                                  "listed at once (sample it with random:K)", field="grid")
        axes = self._axes(name)
        return [PowerMode(int(c), float(f), float(g), float(m)) for c, f, g, m in itertools.product(*axes)]

    def mode_at(self, index: int) -> PowerMode:
        """The mode at ``index`` of the ``full`` grid (the inverse of ``index_of``), by mixed-radix arithmetic."""
        if not 0 <= index < self.size:
            raise InvalidArgument(f"mode index {index} is outside 0..{self.size - 1}", field="index")
        values = []
        for knob in reversed(KNOBS):
            axis = self.knob_values(knob)
            index, i = divmod(index, len(axis))
            values.append(axis[i])
        m, g, f, c = values
        return PowerMode(int(c), float(f), float(g), float(m))

    def sample(self, k: int, seed: int) -> list[PowerMode]:
        """``k`` distinct modes of the full grid drawn with ``seed``, without building the grid.

        The same modes ``random.Random(seed).sample(self.grid("full"), k)`` picks: sampling works on indices."""
        if not 1 <= k <= self.size:
            raise InvalidArgument(f"K must be 1..{self.size} for {self.model}, got {k}", field="modes")
        return [self.mode_at(i) for i in random.Random(seed).sample(range(self.size), k)]

    def index_of(self, mode: PowerMode) -> int:
        """Position of a mode in the ``full`` grid (a dense id for storage and arrays)."""
        self.validate(mode)
        idx = [bisect.bisect_left(self.knob_values(k), getattr(mode, k) - 1e-6) for k in KNOBS]
        n = [len(self.knob_values(k)) for k in KNOBS]
        return ((idx[0] * n[1] + idx[1]) * n[2] + idx[2]) * n[3] + idx[3]

    # --- rails ---------------------------------------------------------------------------------
    def rail_labels(self) -> list[str]:
        """The labels of the board's power rails, in catalog order."""
        return [r.label for r in self.rails]

    @cached_property
    def rail_label_set(self) -> frozenset[str]:
        """The labels of the board's power rails as a set (computed once per catalog: telemetry checks use it)."""
        return frozenset(r.label for r in self.rails)

    def total_power_w(self, rail_power_w: Mapping[str, float]) -> float:
        """Board power (W): the sum of the given rails that count towards the total; others are ignored."""
        counted = _total_labels(self.rails)
        return sum(w for label, w in rail_power_w.items() if label in counted)

    def to_dict(self) -> dict[str, Any]:
        """The catalog as JSON-ready data for the store, without its device-tree matches or twin parameters."""
        return {
            "model": self.model, "name": self.name, "cores": list(self.cores),
            "cpu_mhz": list(self.cpu_mhz), "gpu_mhz": list(self.gpu_mhz), "mem_mhz": list(self.mem_mhz),
            "presets": {k: str(v) for k, v in self.presets.items()},
            "rails": [{"label": r.label, "parts": list(r.parts), "in_total": r.in_total} for r in self.rails],
            "grids": {k: {kk: list(vv) for kk, vv in v.items()} for k, v in self.grid_specs.items()},
            "modes": self.size,
        }


@lru_cache(maxsize=None)
def _total_labels(rails: tuple[Rail, ...]) -> frozenset[str]:
    return frozenset(r.label for r in rails if r.in_total)


def catalog_from_knobs(model: str, cores: Iterable[int], cpu_mhz: Iterable[float],
                       gpu_mhz: Iterable[float], mem_mhz: Iterable[float], *, name: str = "",
                       presets: Mapping[str, str] | None = None, rails: Sequence[Rail] = ()) -> Catalog:
    """Build a catalog from knob values (a board model reported by an agent, or an import)."""
    base = Catalog(model=model, name=name or model, cores=tuple(sorted({int(c) for c in cores})),
                   cpu_mhz=tuple(sorted({float(v) for v in cpu_mhz})),
                   gpu_mhz=tuple(sorted({float(v) for v in gpu_mhz})),
                   mem_mhz=tuple(sorted({float(v) for v in mem_mhz})), rails=tuple(rails))
    for knob in KNOBS:
        if not base.knob_values(knob):
            raise InvalidArgument(f"catalog for {model} has no {knob} values", field=knob)
    if base.size > MAX_CATALOG_MODES:
        counts = " x ".join(str(len(base.knob_values(k))) for k in KNOBS)
        raise InvalidArgument(f"catalog for {model} has {base.size} modes ({counts}); at most {MAX_CATALOG_MODES} "
                              "are allowed", field="catalog")
    parsed = {k: base.parse_mode(v) for k, v in (presets or {}).items()}
    return replace(base, presets=parsed)   # fields only: what base computed and cached is not carried


def catalog_from_dict(d: Mapping[str, Any]) -> Catalog:
    """The inverse of ``Catalog.to_dict`` (stored catalogs, catalogs in JSON)."""
    rails = [Rail(r["label"], tuple(r["parts"]), bool(r["in_total"])) for r in d.get("rails", [])]
    cat = catalog_from_knobs(str(d["model"]), d["cores"], d["cpu_mhz"], d["gpu_mhz"], d["mem_mhz"],
                             name=str(d.get("name", "")), presets=d.get("presets"), rails=rails)
    grids = {g: {k: tuple(float(x) for x in v) for k, v in spec.items()} for g, spec in d.get("grids", {}).items()}
    return replace(cat, grid_specs=grids)


def _load(text: str) -> Catalog:
    data = toml_reader.loads(text)
    knobs = data["knobs"]
    rails = tuple(Rail(r["label"], tuple(r["parts"]), bool(r["in_total"])) for r in data.get("rails", []))
    cat = catalog_from_knobs(data["model"], knobs["cores"], knobs["cpu_mhz"], knobs["gpu_mhz"],
                             knobs["mem_mhz"], name=data.get("name", ""), presets=data.get("presets"),
                             rails=rails)
    grids = {g: {k: tuple(float(x) for x in v) for k, v in spec.items()}
             for g, spec in data.get("grids", {}).items()}
    for spec in grids.values():
        for knob, values in spec.items():
            for v in values:
                cat.validate(PowerMode(**{**cat.maxn.__dict__, knob: v}))
    return replace(cat, grid_specs=grids, device_tree_match=tuple(data.get("device_tree_match", ())),
                   twin=data.get("twin", {}),
                   max_power_w=float(data.get("limits", {}).get("max_power_w", DEFAULT_MAX_POWER_W)),
                   preset_aliases=_aliases(data, cat))


def _aliases(data: Mapping[str, Any], cat: Catalog) -> dict[str, str]:
    aliases = {str(k): str(v) for k, v in data.get("preset_aliases", {}).items()}
    for alias, target in aliases.items():
        if target not in cat.presets or alias.lower() in (n.lower() for n in cat.presets):
            raise ValueError(f"{cat.model}: preset alias {alias} must name a preset ({target}) and not be one")
    return aliases


@lru_cache(maxsize=None)
def builtin_catalogs() -> dict[str, Catalog]:
    """The catalogs of ``jetfleet/shared/boards/*.toml`` by board model, loaded once."""
    out: dict[str, Catalog] = {}
    for entry in sorted((Path(__file__).parent / "boards").iterdir()):  # package data (no importlib.resources.files on 3.8)
        if entry.name.endswith(".toml"):
            cat = _load(entry.read_text())
            out[cat.model] = cat
    return out


def load_catalog_file(path: Path) -> Catalog:
    """A catalog from a board TOML file laid out like the built-in ones."""
    return _load(path.read_text())


def power_limit_w(model: str) -> float:
    """The most power (W) a board of ``model`` can draw: its built-in catalog's limit, else DEFAULT_MAX_POWER_W."""
    cat = builtin_catalogs().get(model)
    return cat.max_power_w if cat is not None else DEFAULT_MAX_POWER_W


def get_catalog(model: str) -> Catalog:
    """The built-in catalog of ``model``; NotFound listing the known models otherwise."""
    cats = builtin_catalogs()
    if model not in cats:
        raise NotFound(f"unknown board model {model[:64]!r}; known: {', '.join(sorted(cats))}", field="board")
    return cats[model]
