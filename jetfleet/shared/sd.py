"""Prometheus service discovery of the agents' metrics endpoints: the JSON both file_sd (``jetfleet
prometheus targets``) and http_sd (the controller's ``/sd/agents``) expect."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SdAgent:
    """An online agent as Prometheus discovers it: its device id, board model, rack (``''``: none) and metrics
    HOST:PORT (``''``: it serves no metrics)."""

    device_id: str
    board_model: str
    rack: str
    address: str


def sd_groups(agents: Iterable[SdAgent]) -> list[dict[str, Any]]:
    """One target group per agent serving metrics, labelled ``device``, ``board_model`` and (where it has one)
    ``rack``: every series scraped from it carries them, so a dashboard filters agents by model and rack. The
    agents' own series already say ``device`` (the same value): the shipped scrape job honours their labels."""
    out = []
    for a in sorted(agents, key=lambda a: a.device_id):
        if a.address:
            labels = {"device": a.device_id, "board_model": a.board_model}
            if a.rack:
                labels["rack"] = a.rack
            out.append({"targets": [a.address], "labels": labels})
    return out
