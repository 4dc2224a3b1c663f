"""What `jetfleet top` shows, gathered through the typed operator client (``jetfleet.client``): the only module
of top that talks to the controller. It joins the client's ``Device``, ``Job`` and ``Campaign`` into the view's
frozen dataclasses below (a board with the work running on it; a job or campaign as one kind of ``Work``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from jetfleet.shared.errors import JetfleetError

if TYPE_CHECKING:
    from jetfleet.client import Campaign, Device, Job, OperatorClient

ACTIVE_JOB_STATES = ("queued", "profiling", "modelling", "applying", "running")
ACTIVE_CAMPAIGN_STATES = ("running", "paused")


@dataclass(frozen=True)
class Work:
    """A campaign or a job that is not over: what it is, how far it got, and the boards it uses."""

    kind: str                 # "job" or "campaign"
    work_id: str
    workload: str
    target: str               # a device id or a board model
    state: str                # a job's stage, or a campaign's status
    detail: str               # what a job does or waits for now; a campaign's modes and failures
    progress: float           # 0..1
    eta_s: float | None       # board seconds (job) or seconds (campaign) left; None while unknown
    boards: tuple[str, ...]   # the boards working on it now
    power_w: float | None = None          # a job: its last full window's mean power
    power_budget_w: float | None = None   # a job with a power budget


@dataclass(frozen=True)
class Board:
    """One board as its last telemetry sample and the registry describe it."""

    device_id: str
    model: str
    online: bool
    mode: str                 # CORES/CPU/GPU/MEM, or "" if unknown
    preset: str               # the preset's name when the mode is one
    power_w: float | None     # None without a sample (or offline: a dead board reports nothing)
    rails_w: dict[str, float] = field(default_factory=dict)
    temps_c: dict[str, float] = field(default_factory=dict)
    cpu_mhz: float = 0.0
    gpu_mhz: float = 0.0
    mem_mhz: float = 0.0
    cores_online: int = 0
    cpu_util: float = 0.0
    gpu_util: float = 0.0
    emulated: bool = False
    last_seen_s: float = 0.0
    work: tuple[Work, ...] = ()

    @property
    def max_temp_c(self) -> float | None:
        """The hottest sensor, or None without temperatures."""
        return max(self.temps_c.values()) if self.temps_c else None

    @property
    def mode_text(self) -> str:
        """The mode as an operator names it: ``MODE_30W (8/1728/624.75/3199)`` or the knobs alone."""
        if not self.mode:
            return "-"
        return f"{self.preset} ({self.mode})" if self.preset else self.mode


@dataclass(frozen=True)
class BoardDetail:
    """A board in detail: the summary plus what only GetDevice tells (serial, software, presets)."""

    board: Board
    serial: str
    software: dict[str, str]
    presets: dict[str, str]   # name -> CORES/CPU/GPU/MEM
    modes: int                # size of its catalog
    workloads: tuple[str, ...]
    first_seen_s: float


@dataclass(frozen=True)
class Fleet:
    """One look at the fleet: every board and the work that is not over, or why it could not be had."""

    taken_s: float
    boards: tuple[Board, ...] = ()
    work: tuple[Work, ...] = ()
    error: str = ""           # the controller could not be asked (unreachable, refused): shown, retried

    @property
    def online(self) -> int:
        """Boards online now."""
        return sum(b.online for b in self.boards)

    @property
    def power_w(self) -> float:
        """Fleet power: the sum over online boards that reported a sample."""
        return sum(b.power_w for b in self.boards if b.online and b.power_w is not None)


def job_work(j: Job) -> Work:
    """A client ``Job`` as Work (a queued job uses no board yet)."""
    return Work("job", j.job_id, j.workload, j.target, j.state, j.detail, j.progress, j.eta_s,
                (j.device_id,) if j.device_id and j.state != "queued" else (), j.observed_power_w, j.power_budget_w)


def campaign_work(c: Campaign) -> Work:
    """A client ``Campaign`` as Work."""
    detail = f"{c.done}/{c.total} modes" + (f", {c.failed} failed" if c.failed else "") + (
        f", {c.in_flight} in flight" if c.in_flight else "") + (f"; {c.waiting}" if c.waiting else "")
    return Work("campaign", c.campaign_id, c.workload, c.target, c.status, detail,
                (c.done + c.failed) / c.total if c.total else 0.0, c.eta_s, tuple(c.boards))


def board_of(d: Device, work: tuple[Work, ...] = ()) -> Board:
    """A client ``Device`` as a Board with the work on it (its telemetry only while it is online)."""
    s = d.last_telemetry if d.online else None
    common = dict(device_id=d.device_id, model=d.model, online=d.online,
                  mode=str(d.current_mode) if d.current_mode else "", preset=d.current_mode_name or "",
                  emulated=d.emulated, last_seen_s=d.last_seen_s, work=tuple(w for w in work if d.device_id in w.boards))
    if s is None:
        return Board(power_w=None, **common)  # type: ignore[arg-type]
    return Board(power_w=s.total_w, rails_w=dict(s.rails_w), temps_c=dict(s.temps_c), cpu_mhz=s.cpu_mhz,
                 gpu_mhz=s.gpu_mhz, mem_mhz=s.mem_mhz, cores_online=s.cores_online, cpu_util=s.cpu_util,
                 gpu_util=s.gpu_util, **common)  # type: ignore[arg-type]


class FleetSource:
    """Asks the controller for the fleet (blocking calls: run them off the UI's event loop).

    ``connect`` makes the client (``jetfleet.cli.common.client``: TLS from the environment like every command);
    a failed look is returned as a Fleet with ``error`` set, never raised, so the view keeps retrying."""

    def __init__(self, connect: Callable[[], OperatorClient], clock: Callable[[], float] = time.time) -> None:
        self._connect = connect
        self._client: OperatorClient | None = None
        self.clock = clock

    @property
    def client(self) -> OperatorClient:
        """The client, made on first use (and again after ``close``)."""
        if self._client is None:
            self._client = self._connect()
        return self._client

    @property
    def address(self) -> str:
        """The controller's address."""
        return self.client.address

    def fleet(self) -> Fleet:
        """Every board, and every job and campaign that is not over."""
        try:
            work = tuple([job_work(j) for j in self.client.list_jobs() if j.state in ACTIVE_JOB_STATES]
                         + [campaign_work(c) for c in self.client.list_campaigns() if c.status in ACTIVE_CAMPAIGN_STATES])
            boards = tuple(board_of(d, work) for d in self.client.list_devices())
        except JetfleetError as e:
            return Fleet(self.clock(), error=f"{e.code}: {e.message}")
        return Fleet(self.clock(), boards, work)

    def board(self, device_id: str, work: tuple[Work, ...] = ()) -> BoardDetail:
        """One board in detail; a JetfleetError (NOT_FOUND once it is forgotten, UNAVAILABLE) is the caller's."""
        d = self.client.get_device(device_id)
        c = d.catalog
        presets = {name: str(m) for name, m in c.presets.items()} if c else {}
        return BoardDetail(board_of(d, work), d.serial, dict(d.software), presets, c.modes if c else 0,
                           tuple(d.workloads), d.first_seen_s)

    def close(self) -> None:
        """Close the client's channel."""
        if self._client is not None:
            self._client.close()
            self._client = None

