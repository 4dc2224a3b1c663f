"""Prometheus service discovery of the agents' metrics endpoints: the JSON both file_sd (``jetfleet
prometheus targets``) and http_sd (the controller's ``/sd/agents``) expect."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def sd_groups(agents: Iterable[tuple[str, str]]) -> list[dict[str, Any]]:
    """(board model, metrics HOST:PORT) pairs as target groups: one per board model, labelled ``board_model``."""
    groups: dict[str, list[str]] = {}
    for model, address in agents:
        if address:
            groups.setdefault(model, []).append(address)
    return [{"targets": sorted(t), "labels": {"board_model": m}} for m, t in sorted(groups.items())]
