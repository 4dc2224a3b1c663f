"""Quantities on the command line: a power budget (``30W``) and a duration (``2h``, ``90m``, ``45s``)."""

from __future__ import annotations

import re

from jetfleet.shared.errors import InvalidArgument

MAX_BUDGET_W = 10_000.0           # no lab of Jetsons draws more per board
MAX_DEADLINE_S = 365 * 86400.0
_SCALE = {"W": {"": 1, "w": 1}, "s": {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}}


def parse_quantity(text: str, unit: str) -> float:
    """'30W' / '30' -> 30.0 W; '2h', '90m', '45s', '1d' -> seconds for a duration, whose unit is required (a bare
    ``2`` would be read as 2 s where 2 h was meant). InvalidArgument for anything else, for zero, and for more than
    MAX_BUDGET_W or MAX_DEADLINE_S."""
    field = "power_budget" if unit == "W" else "deadline"
    m = re.fullmatch(r"\s*([0-9]{1,12}\.?[0-9]{0,12}|\.[0-9]{1,12})\s*([a-zA-Z]{0,3})\s*", text)
    scale = _SCALE[unit]
    if m and unit == "s" and not m.group(2):
        raise InvalidArgument(f"{text.strip()[:40]!r} has no unit: write {m.group(1)}s, {m.group(1)}m or "
                              f"{m.group(1)}h (seconds, minutes, hours of board time)", field=field)
    if not m or m.group(2).lower() not in scale:
        raise InvalidArgument(f"{text[:40]!r} is not a {'power like 30W' if unit == 'W' else 'duration like 2h, 90m, 45s'}",
                              field=field)
    value = float(m.group(1)) * scale[m.group(2).lower()]
    hi = MAX_BUDGET_W if unit == "W" else MAX_DEADLINE_S
    if not 0 < value <= hi:
        what = "power budget" if unit == "W" else "deadline"
        raise InvalidArgument(f"the {what} {text.strip()!r} must be more than 0 and at most {hi:g} {unit}", field=field)
    return value
