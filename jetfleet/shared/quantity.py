"""Quantities an operator writes, one rule for all of them: a number and its unit, the unit required.

A power (``30W``, ``30 W``), a duration (``2h``, ``90m``, ``45s``, ``1d``) and a latency (``50ms``, ``0.2s``) are
read by one grammar; a bare number is refused for each alike (``30`` could be watts or a share, ``2`` two seconds
or two hours), naming the units it could have. The limits live here too, so the CLI and the controller refuse
the same values: the CLI before it sends, the controller whatever a client sends."""

from __future__ import annotations

import math
import re

from jetfleet.shared.errors import InvalidArgument

MAX_POWER_BUDGET_W = 1_000.0      # one board's budget: no Jetson draws a fifth of it (the largest limit is 200 W)
MAX_CAP_W = 1_000_000.0           # a lab's or a rack's cap: a thousand racks of boards
MAX_DEADLINE_S = 365 * 86400.0    # a job's or an epoch's deadline
MAX_LATENCY_S = 3600.0            # an inference latency budget

POWER = {"w": 1.0}
DURATION = {"ms": 1e-3, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
_QUANTITY = re.compile(r"\s*([0-9]{1,12}\.?[0-9]{0,12}|\.[0-9]{1,12})\s*([a-zA-Z]{0,3})\s*")
# per field: what it is, examples, and the units a bare number N is offered with
_KINDS = {"power_budget": ("a power", "30W", ("W",)), "cap": ("a power", "200W", ("W",)),
          "deadline": ("a duration", "2h, 90m, 45s", ("s", "m", "h")),
          "latency_budget": ("a latency", "50ms or 0.2s", ("ms", "s"))}


def check_range(value: float, limit: float, field: str, unit: str, text: str = "") -> float:
    """``value`` if it is finite, more than 0 and at most ``limit``; else InvalidArgument naming ``field`` (and
    ``text``, the operator's own spelling of it, where there is one)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value)
                                                                              and 0 < value <= limit):
        if text:   # the operator's own spelling: "power budget '0W' must be ..."
            noun = re.sub(r"_(w|s)$", "", field).replace("_", " ")
            raise InvalidArgument(f"{noun} {text.strip()[:40]!r} must be more than 0 and at most {limit:g} {unit}",
                                  field=field)
        shown = f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else repr(value)[:40]
        raise InvalidArgument(f"{field}={shown} {unit} is out of range: more than 0 and at most {limit:g} {unit}",
                              field=field)
    return float(value)


def check_power_budget_w(value: float, field: str = "power_budget_w") -> float:
    """A board's power budget in watts: 0 < W <= MAX_POWER_BUDGET_W (the CLI's limit and the controller's)."""
    return check_range(value, MAX_POWER_BUDGET_W, field, "W")


def check_cap_w(value: float, field: str = "cap_w") -> float:
    """A lab's or a rack's power cap in watts: 0 < W <= MAX_CAP_W."""
    return check_range(value, MAX_CAP_W, field, "W")


def check_deadline_s(value: float, field: str = "deadline_s") -> float:
    """A deadline in seconds: 0 < s <= MAX_DEADLINE_S."""
    return check_range(value, MAX_DEADLINE_S, field, "s")


def parse(text: str, units: dict[str, float], field: str) -> float:
    """``text`` as a number with one of ``units`` (case-insensitive), scaled to the base unit; InvalidArgument
    naming ``field`` for a missing or unknown unit or for something that is not a number."""
    what, example, offered = _KINDS.get(field, ("a quantity", "", tuple(units)))
    m = _QUANTITY.fullmatch(text or "")
    if m and not m.group(2):
        n = m.group(1)
        options = [n + u for u in offered]
        raise InvalidArgument(f"{text.strip()[:40]!r} has no unit: write "
                              + (", ".join(options[:-1]) + " or " + options[-1] if len(options) > 1 else options[0]),
                              field=field)
    if not m or m.group(2).lower() not in units:
        raise InvalidArgument(f"{(text or '')[:40]!r} is not {what} like {example}", field=field)
    return float(m.group(1)) * units[m.group(2).lower()]


def parse_power_budget(text: str) -> float:
    """``30W`` -> 30.0 (W), refused as the controller would refuse it."""
    return check_range(parse(text, POWER, "power_budget"), MAX_POWER_BUDGET_W, "power_budget", "W", text)


def parse_cap(text: str) -> float:
    """``200W`` -> 200.0 (W), a lab's or a rack's cap."""
    return check_range(parse(text, POWER, "cap"), MAX_CAP_W, "cap", "W", text)


def parse_deadline(text: str) -> float:
    """``2h``, ``90m``, ``45s``, ``1d`` -> seconds."""
    return check_range(parse(text, DURATION, "deadline"), MAX_DEADLINE_S, "deadline", "s", text)


def parse_latency(text: str) -> float:
    """``50ms``, ``0.2s`` -> seconds, at most MAX_LATENCY_S."""
    return check_range(parse(text, DURATION, "latency_budget"), MAX_LATENCY_S, "latency_budget", "s", text)
