"""Thermal-zone names and readings normalised the way jetson-stats shows them, for every telemetry source.

Boards name the same sensor differently per JetPack (``CPU-therm`` on JetPack 4, ``cpu-thermal`` on 5
and 6, ``CPU`` in tegrastats and jtop): each becomes its base name in lower case (``cpu``, ``gpu``,
``soc0``, ``tj``, ``tboard``). Sensors that are switched off report -256 °C and are dropped, and so
are PMIC die readings (a fixed trip value on TX-class boards, not a temperature)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

OFF_C = -256.0          # what a switched-off zone reports (jetson-stats treats it as offline)
_BASE = re.compile(r"^([A-Za-z]+\d*)")


def zone_name(raw: str) -> str:
    """``CPU-therm``/``cpu-thermal``/``CPU`` -> ``cpu``; ``SOC0-therm`` -> ``soc0``; ``Tboard_tegra`` -> ``tboard``."""
    text = raw.strip()
    m = _BASE.match(text)
    return (m.group(1) if m else text).lower()


def is_pmic(raw: str) -> bool:
    """True for PMIC die sensors, which jetson-stats hides."""
    return "pmic" in raw.lower()


def normalise(readings: Iterable[tuple[str, float]]) -> dict[str, float]:
    """Raw (zone name, °C) pairs as {normalised name: °C}, without off sensors and PMIC readings.

    Two zones with the same base name keep both: the second becomes ``name1``, the third ``name2``."""
    out: dict[str, float] = {}
    for raw, temp_c in readings:
        if is_pmic(raw) or temp_c <= OFF_C:
            continue
        name = zone_name(raw)
        key, n = name, 1
        while key in out:
            key, n = f"{name}{n}", n + 1
        out[key] = float(temp_c)
    return out


def normalise_mapping(temps_c: Mapping[str, float]) -> dict[str, float]:
    """``normalise`` over a {raw name: °C} mapping (tegrastats, a jtop snapshot)."""
    return normalise(temps_c.items())
