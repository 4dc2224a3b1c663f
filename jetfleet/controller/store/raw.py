"""A profile's raw samples as the stores keep them.

A campaign's result is stored as the board sent it: the ``ProfileResult`` message serialized
(protobuf, one C call for the whole window, no per-sample reshaping on the write path). Readers
get the dict every caller knows, decoded only when raw samples are asked for. Rows written before
(JSON text, values rounded to the sensors' resolution) read back unchanged."""

from __future__ import annotations

import base64
import json
from typing import Any

from jetfleet.shared.columns import samples_from_columns
from jetfleet.shared.proto import agent_pb2

TEXT_PREFIX = "pb64:"   # a serialized ProfileResult in a text store (Redis): base64 after this prefix


def raw_from_pb(blob: bytes) -> dict[str, Any]:
    """A serialized ProfileResult as the raw dict: minibatch times, the window, and [t_s, total_w, {rail: W}]
    per power sample."""
    p = agent_pb2.ProfileResult.FromString(blob)
    power = [[s.t_s, s.total_w, dict(s.rails_w)] for s in list(p.power) + samples_from_columns(p.power_columns)]
    return {"minibatch_times_s": list(p.minibatch_times_s), "window": [p.window_start_s, p.window_end_s],
            "power": power}


def raw_to_text(raw: dict[str, Any] | None, raw_pb: bytes) -> str:
    """What a text store keeps: the serialized result in base64 behind TEXT_PREFIX, else JSON ('' = none)."""
    if raw_pb:
        return TEXT_PREFIX + base64.b64encode(raw_pb).decode("ascii")
    return json.dumps(raw) if raw is not None else ""


def raw_from_text(text: str | None) -> dict[str, Any] | None:
    """The raw dict of what ``raw_to_text`` wrote (or of an older JSON row); None for nothing."""
    if not text:
        return None
    if text.startswith(TEXT_PREFIX):
        return raw_from_pb(base64.b64decode(text[len(TEXT_PREFIX):]))
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def raw_from_column(value: bytes | str | None) -> dict[str, Any] | None:
    """The raw dict of a SQLite column: a BLOB is a serialized result, text is JSON (rows of older versions)."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return raw_from_pb(value)
    return raw_from_text(value)
