"""What a peer may send: identifiers, labels, text and physical values, each with a documented limit.

Identifiers (device ids, board models, workloads, campaign and model ids, request ids,
certificate names) use one character set, ``[a-z0-9][a-z0-9._-]{0,63}``: lower-case ASCII letters,
digits, '.', '_' and '-', 1..64 characters, starting with a letter or a digit. No Unicode
look-alikes (``аgx-orin-0`` with a Cyrillic a), no path separators, no spaces. Command ids, which
the controller composes from a campaign id, a mode's position and a device id, use the same
characters up to 160 long.

Labels (rails, presets, temperature sensors, software keys, grid names) are what boards and
vendors call things (``VDD_GPU_SOC``, ``MODE_15W``): ASCII letters, digits, '.', '_', '+', '-',
1..64 characters. Free text (software versions, a catalog's display name) is printable and
bounded in bytes.

Physical bounds refuse what no Jetson can measure: negative or non-finite values, power above a
board model's limit (``max_power_w`` in its TOML file, 200 W for models without one),
temperatures outside -100..200 °C, utilisation outside 0..1, more online cores than the catalog
has, a minibatch longer than an hour.
"""

from __future__ import annotations

import math
import re

from jetfleet.shared.errors import InvalidArgument

ID_RULE = "[a-z0-9][a-z0-9._-]{0,63}"
_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}\Z")
COMMAND_ID_MAX = 160
_COMMAND_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,159}\Z")
LABEL_RULE = "[A-Za-z0-9][A-Za-z0-9._+-]{0,63}"
_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}\Z")

MAX_TEXT_BYTES = 256          # a software version, an agent version
MAX_NAME_BYTES = 128          # a catalog's display name
MAX_MAP_ENTRIES = 32          # software versions, temperatures, rails of one sample
MAX_WORKLOADS = 64            # workloads an agent says it can run
MAX_REASON_BYTES = 1200       # why a workload plugin is broken (300 characters of UTF-8)

DEFAULT_MAX_POWER_W = 200.0   # board models without a limit of their own: no Jetson draws this much
MIN_TEMP_C, MAX_TEMP_C = -100.0, 200.0
MAX_MHZ = 100_000.0
MAX_MINIBATCH_S = 3600.0
MAX_TIMESTAMP_S = 4.1e9       # seconds since the epoch (year 2099)


def shown(value: object, limit: int = 40) -> str:
    """A value as it may appear in an error message: ASCII-escaped and cut to ``limit`` characters."""
    text = ascii(value)
    return text if len(text) <= limit else text[:limit] + "...'"


def check_id(value: str, field: str) -> str:
    """Return ``value`` if it is an identifier (``[a-z0-9][a-z0-9._-]{0,63}``); else InvalidArgument naming ``field``."""
    if not isinstance(value, str) or not _ID.match(value):
        raise InvalidArgument(f"{field} must match {ID_RULE} (lower-case ASCII letters, digits, '.', '_', '-'; "
                              f"1..64 characters, first a letter or digit), got {shown(value)}", field=field)
    return value


def check_command_id(value: str, field: str) -> str:
    """Return ``value`` if it is a command id: the identifier characters, 1..160 long."""
    if not isinstance(value, str) or not _COMMAND_ID.match(value):
        raise InvalidArgument(f"{field} must be 1..{COMMAND_ID_MAX} lower-case ASCII letters, digits, '.', '_' or '-' "
                              f"(first a letter or digit), got {shown(value)}", field=field)
    return value


def check_label(value: str, field: str) -> str:
    """Return ``value`` if it is a label (``[A-Za-z0-9][A-Za-z0-9._+-]{0,63}``, e.g. VDD_GPU_SOC); else InvalidArgument."""
    if not isinstance(value, str) or not _LABEL.match(value):
        raise InvalidArgument(f"{field} must match {LABEL_RULE} (ASCII letters, digits, '.', '_', '+', '-'; "
                              f"1..64 characters), got {shown(value)}", field=field)
    return value


def check_text(value: str, field: str, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """Return ``value`` if it is printable and at most ``max_bytes`` long in UTF-8; else InvalidArgument."""
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > max_bytes or not value.isprintable():
        raise InvalidArgument(f"{field} must be printable text of at most {max_bytes} bytes, got {size} bytes "
                              f"starting {shown(value)}", field=field)
    return value


def check_count(n: int, limit: int, field: str) -> None:
    """InvalidArgument naming ``field`` when a repeated field or map has more than ``limit`` entries."""
    if n > limit:
        raise InvalidArgument(f"{field} has {n} entries; at most {limit} are allowed", field=field)


def check_range(value: float, lo: float, hi: float, field: str, unit: str = "", *, lo_open: bool = False) -> float:
    """Return ``value`` if it is finite and within [lo, hi] ((lo, hi] with ``lo_open``); else InvalidArgument."""
    ok = math.isfinite(value) and (value > lo if lo_open else value >= lo) and value <= hi
    if not ok:
        left = "(" if lo_open else "["
        raise InvalidArgument(f"{field}={value!r}{unit} is outside {left}{lo:g}, {hi:g}]{unit}", field=field)
    return value
