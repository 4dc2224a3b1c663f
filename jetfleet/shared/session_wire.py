"""The wire between a training process and its board's agent (``jetfleet.session`` and ``jetfleet.agent.sessions``):
one JSON object per line over a Unix socket the agent opens, each request answered by one reply, in order.

Requests (``op``): ``hello`` (workload, optional goal, length, the model's cost), ``steps`` (n optimiser steps
since the last report and the timings the agent asked for), ``begin``/``end`` (an energy window), ``close``.
Replies: ``{"ok": true, ...}`` or ``{"ok": false, "error": message, "field": name}``. Everything here runs on the
boards' Pythons (3.8+) and imports nothing but the standard library and ``shared.errors``."""

from __future__ import annotations

import json
import math
from typing import Any, Dict

from jetfleet.shared.errors import InvalidArgument

VERSION = 1
DEFAULT_SOCKET = "/run/jetfleet/session.sock"   # the agent's default; ``agent run --session-socket`` changes it
SOCKET_ENV = "JETFLEET_SESSION_SOCKET"          # where a training process looks when not told
MAX_LINE_BYTES = 256 * 1024                     # one message (a hello with a large model's cost bins fits)
MAX_STEPS_PER_REPORT = 1_000_000
MAX_TIMINGS_PER_REPORT = 4096
MAX_WINDOWS = 64                                # energy windows open at once in one session
MAX_NAME = 64
OPS = ("hello", "steps", "begin", "end", "close")

Message = Dict[str, Any]   # typing.Dict: evaluated at run time on Python 3.8


def encode(msg: Message) -> bytes:
    """One message as its line (compact JSON, no NaN)."""
    return json.dumps(msg, separators=(",", ":"), allow_nan=False).encode() + b"\n"


def decode(line: bytes) -> Message:
    """One line as a message; InvalidArgument naming what is wrong with it."""
    if len(line) > MAX_LINE_BYTES:
        raise InvalidArgument(f"message of {len(line)} bytes; allowed at most {MAX_LINE_BYTES}", field="message")
    try:
        msg = json.loads(line)
    except ValueError as e:
        raise InvalidArgument(f"message is not JSON: {e}", field="message") from None
    if not isinstance(msg, dict):
        raise InvalidArgument("message is not a JSON object", field="message")
    return msg


def check_name(value: Any, field: str) -> str:
    """A workload or window name: 1..64 printable characters without spaces."""
    ok = isinstance(value, str) and 1 <= len(value) <= MAX_NAME and value.isprintable() and " " not in value
    if not ok:
        raise InvalidArgument(f"{field}={str(value)[:40]!r}: 1..{MAX_NAME} printable characters without spaces",
                              field=field)
    return str(value)


def check_count(value: Any, field: str, low: int, high: int) -> int:
    """An integer in low..high (booleans are not integers here)."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgument(f"{field}={str(value)[:40]!r} is out of range; allowed integers {low}..{high}",
                              field=field)
    return int(value)


def check_timings(value: Any) -> list[list[float]]:
    """Timed steps as [[steps, seconds], ...]: steps 1..10**6, seconds finite and > 0."""
    field = "timed"
    if not isinstance(value, list) or len(value) > MAX_TIMINGS_PER_REPORT:
        raise InvalidArgument(f"{field} must be a list of at most {MAX_TIMINGS_PER_REPORT} [steps, seconds] pairs",
                              field=field)
    out = []
    for pair in value:
        if not (isinstance(pair, list) and len(pair) == 2):
            raise InvalidArgument(f"{field} entry {str(pair)[:40]} is not a [steps, seconds] pair", field=field)
        n = check_count(pair[0], field, 1, MAX_STEPS_PER_REPORT)
        s = pair[1]
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not (math.isfinite(s) and 0 < s < 86400):
            raise InvalidArgument(f"{field} seconds {str(s)[:40]} must be finite and in (0, 86400)", field=field)
        out.append([float(n), float(s)])
    return out


def optional_float(msg: Message, key: str, low: float, high: float) -> float | None:
    """``msg[key]`` as a float in [low, high], or None when absent or null."""
    value = msg.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (low <= value <= high):
        raise InvalidArgument(f"{key}={str(value)[:40]!r} is out of range; allowed {low:g}..{high:g}", field=key)
    return float(value)


_COST_NUMBERS = {"kernels": (1, 10_000_000), "memory_kernels": (0, 10_000_000), "flops": (0.0, 1e18),
                 "param_bytes": (0.0, 1e12), "memory_bytes": (0.0, 1e15), "minibatch_size": (1, 65536)}
_MAX_BINS = 16


def check_cost(value: Any) -> Message:
    """A model's characterisation from a training process (``characterise_module``'s shape), every figure
    bounded: the twin turns it into time and power, so nothing unbounded or non-finite gets through."""
    field = "cost"
    if not isinstance(value, dict):
        raise InvalidArgument("cost must be an object (jetfleet.session measures it from the model)", field=field)
    out: Message = {}
    for key, (low, high) in _COST_NUMBERS.items():
        v = value.get(key)
        integer = isinstance(low, int)
        ok = (not isinstance(v, bool) and isinstance(v, int if integer else (int, float))
              and math.isfinite(v) and low <= v <= high)
        if not ok:
            raise InvalidArgument(f"cost.{key}={str(v)[:40]!r} is out of range; allowed {low:g}..{high:g}",
                                  field=f"cost.{key}")
        out[key] = v
    text = value.get("input")
    parts = text.split() if isinstance(text, str) else []
    if len(parts) != 2 or parts[0] not in ("image", "tokens") or not parts[1].isdigit():
        raise InvalidArgument(f"cost.input={str(text)[:40]!r}: 'image SIDE' or 'tokens LENGTH'", field="cost.input")
    out["input"] = text
    for key in ("conv_bins", "matmul_bins"):
        bins = value.get(key)
        if not isinstance(bins, list) or len(bins) > _MAX_BINS:
            raise InvalidArgument(f"cost.{key} must be a list of at most {_MAX_BINS} [flops, bytes, kernels]",
                                  field=f"cost.{key}")
        for b in bins:
            ok = (isinstance(b, list) and len(b) == 3
                  and all(not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x)
                          and 0 <= x <= 1e18 for x in b))
            if not ok:
                raise InvalidArgument(f"cost.{key} entry {str(b)[:60]} is not [flops, bytes, kernels] >= 0",
                                      field=f"cost.{key}")
        out[key] = bins
    return out
