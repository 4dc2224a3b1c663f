"""Profiling campaigns and the profiles they store (CSV export and import)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Callable

from jetfleet.shared.proto import operator_pb2

CHUNK_CHARS = 1024 * 1024           # import chunks (one message each)
ACTIVE_CAMPAIGN = ("running", "paused")


@dataclass(frozen=True)
class Campaign:
    """A campaign's target, modes and progress. ``eta_s`` is None while unknown; ``waiting`` says why no mode is
    measured now (no online target board), "" while work goes on."""

    campaign_id: str
    workload: str
    target_device: str
    board_model: str
    modes: str
    minibatches: int
    status: str              # running, paused, cancelled, done
    total: int
    done: int
    failed: int
    in_flight: int
    retries: int
    eta_s: float | None
    boards: list[str]
    errors: list[str]
    created_s: float
    finished_s: float
    waiting: str

    @classmethod
    def from_pb(cls, c: operator_pb2.Campaign) -> Campaign:
        """From the wire message."""
        return cls(c.campaign_id, c.workload, c.target_device, c.target_model, c.modes, c.minibatches, c.status,
                   c.total, c.done, c.failed, c.in_flight, c.retries, None if c.eta_s < 0 else c.eta_s, list(c.boards),
                   list(c.errors), c.created_s, c.finished_s, c.waiting)

    @property
    def target(self) -> str:
        """The device, or the board model whose online boards share the work."""
        return self.target_device or self.board_model

    @property
    def remaining(self) -> int:
        """Modes neither measured nor failed."""
        return self.total - self.done - self.failed

    @property
    def active(self) -> bool:
        """Running or paused: it may still measure modes."""
        return self.status in ACTIVE_CAMPAIGN

    def to_dict(self) -> dict[str, Any]:
        """As `profile start/ls/show --output json` print it."""
        return {"campaign_id": self.campaign_id, "workload": self.workload, "target": self.target,
                "board_model": self.board_model, "modes": self.modes, "minibatches": self.minibatches,
                "status": self.status, "total": self.total, "done": self.done, "failed": self.failed,
                "remaining": self.remaining, "in_flight": self.in_flight, "retries": self.retries,
                "eta_s": None if self.eta_s is None else round(self.eta_s, 1), "boards": self.boards,
                "errors": self.errors, "waiting": self.waiting or None, "created_s": self.created_s,
                "finished_s": self.finished_s or None}


@dataclass(frozen=True)
class ImportResult:
    """What an import stored: rows added, rows found stored already (the same file again), its source label, and
    the board models (catalogs built from the file) and workloads it introduced."""

    rows: int
    already_stored: int
    source: str
    new_board_models: list[str]
    new_workloads: list[str]

    @classmethod
    def from_pb(cls, r: operator_pb2.ImportProfilesResponse) -> ImportResult:
        """From the wire message."""
        return cls(r.rows, r.already_stored, r.source, list(r.new_board_models), list(r.new_workloads))

    def to_dict(self) -> dict[str, Any]:
        """As `profiles import --output json` prints it."""
        return {"rows": self.rows, "already_stored": self.already_stored, "source": self.source,
                "new_board_models": self.new_board_models, "new_workloads": self.new_workloads}


@dataclass(frozen=True)
class ExportedProfiles:
    """Profiles as CSV text (the header first) and the number of data rows."""

    csv: str
    rows: int


class CampaignMethods:
    """Campaigns and profiles: ``create_campaign``, ``list_campaigns``, ``get_campaign``, ``pause_campaign``,
    ``resume_campaign``, ``cancel_campaign``, ``wait_campaign``, ``export_profiles``, ``export_chunks``,
    ``import_profiles``."""

    _unary: Any
    _stream: Any

    def create_campaign(self, workload: str, *, device_id: str = "", board_model: str = "", modes: str = "",
                        mode_list: Iterable[str] = (), mode_lines: Iterable[int] = (), minibatches: int = 0,
                        seed: int = 0) -> Campaign:
        """Start profiling ``workload`` on one board (``device_id``) or a board model's online boards; ``modes`` is
        full, powertrain, presets, random:K (with ``seed``), or an explicit ``mode_list`` (``mode_lines``: each
        item's line in its file, for error messages). ``minibatches`` 0: the default (40)."""
        req = operator_pb2.CreateCampaignRequest(workload=workload, device_id=device_id, board_model=board_model,
                                                 modes=modes, mode_list=list(mode_list), mode_lines=list(mode_lines),
                                                 minibatches=minibatches, seed=seed)
        return Campaign.from_pb(self._unary("CreateCampaign", req, 120))

    def list_campaigns(self) -> list[Campaign]:
        """Every campaign the controller knows, with its progress."""
        return [Campaign.from_pb(c) for c in self._unary("ListCampaigns", operator_pb2.ListCampaignsRequest()).campaigns]

    def get_campaign(self, campaign_id: str) -> Campaign:
        """One campaign's progress, boards, ETA and recent errors; NotFound if unknown."""
        return Campaign.from_pb(self._unary("GetCampaign", operator_pb2.GetCampaignRequest(campaign_id=campaign_id)))

    def control_campaign(self, campaign_id: str, action: str) -> Campaign:
        """Pause, resume or cancel a campaign (``action``); returns its new state."""
        req = operator_pb2.ControlCampaignRequest(campaign_id=campaign_id, action=action)
        return Campaign.from_pb(self._unary("ControlCampaign", req))

    def pause_campaign(self, campaign_id: str) -> Campaign:
        """Pause a running campaign (the modes in flight finish)."""
        return self.control_campaign(campaign_id, "pause")

    def resume_campaign(self, campaign_id: str) -> Campaign:
        """Resume a paused campaign."""
        return self.control_campaign(campaign_id, "resume")

    def cancel_campaign(self, campaign_id: str) -> Campaign:
        """Cancel a campaign; its boards stop after their current minibatch."""
        return self.control_campaign(campaign_id, "cancel")

    def wait_campaign(self, campaign_id: str, *, on_update: Callable[[Campaign], None] | None = None,
                      poll_s: float = 1.0, sleep: Callable[[float], None] = time.sleep) -> Campaign:
        """Poll a campaign until it is neither running nor paused; ``on_update`` sees every state polled. Returns the
        final state. Interrupting the wait (Ctrl-C) leaves the campaign running on the controller."""
        camp = self.get_campaign(campaign_id)
        while True:
            if on_update is not None:
                on_update(camp)
            if not camp.active:
                return camp
            sleep(poll_s)
            camp = self.get_campaign(campaign_id)

    def export_chunks(self, *, board_model: str = "", workload: str = "", device_id: str = "",
                      campaign_id: str = "") -> Iterator[ExportedProfiles]:
        """Stored profiles as CSV chunks as they arrive (the header in the first), any number of rows."""
        req = operator_pb2.ExportProfilesRequest(board_model=board_model, workload=workload, device_id=device_id,
                                                 campaign_id=campaign_id)
        for chunk in self._stream("ExportProfilesStream", req, 3600):
            yield ExportedProfiles(chunk.csv, chunk.rows)

    def export_profiles(self, *, board_model: str = "", workload: str = "", device_id: str = "",
                        campaign_id: str = "") -> ExportedProfiles:
        """Stored profiles matching every filter given, as one CSV text."""
        parts = list(self.export_chunks(board_model=board_model, workload=workload, device_id=device_id,
                                        campaign_id=campaign_id))
        return ExportedProfiles("".join(p.csv for p in parts), sum(p.rows for p in parts))

    def import_profiles(self, csv_text: str, name: str = "input", *, allow_new: Iterable[str] = (),
                        allow_any_new: bool = False) -> ImportResult:
        """Import a profile CSV of any size (streamed in 1 MiB chunks), all or nothing; ``name`` labels the file in
        error messages. A board model or workload the controller does not know is refused (a typo would start a
        new one) unless named in ``allow_new`` or ``allow_any_new`` is set. Rows imported before are recognised,
        not doubled (``already_stored``)."""
        allowed = list(allow_new)

        def chunks() -> Iterator[operator_pb2.ProfilesChunk]:
            for i in range(0, max(1, len(csv_text)), CHUNK_CHARS):
                first = i == 0
                yield operator_pb2.ProfilesChunk(csv=csv_text[i:i + CHUNK_CHARS], name=name if first else "",
                                                 allow_new=allowed if first else [],
                                                 allow_any_new=allow_any_new and first)

        return ImportResult.from_pb(self._unary("ImportProfilesStream", chunks(), 600))
