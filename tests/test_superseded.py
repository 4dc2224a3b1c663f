"""The router's superseded commands, kept per board: a heartbeat naming one is answered with a cancel, and the
heartbeat of a board with none is not read further (the bookkeeping that lets it skip must stay true through a
resend, a second supersede and the bound on how many are remembered)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from jetfleet.controller import commands
from jetfleet.controller.commands import CommandRouter
from jetfleet.controller.config import ControllerConfig
from jetfleet.controller.metrics import ControllerMetrics
from jetfleet.controller.registry import Registry, Session
from jetfleet.controller.store import open_store
from jetfleet.shared.errors import NotFound
from jetfleet.shared.proto import agent_pb2


def session(device_id: str) -> Session:
    return Session(uuid.uuid4().hex, device_id, f"SN-{device_id}", asyncio.Queue(), 0.0)


def beat(busy: str = "", launches: tuple[str, ...] = ()) -> agent_pb2.Heartbeat:
    return agent_pb2.Heartbeat(t_s=1.0, busy_command_id=busy, launch_ids=list(launches))


@pytest.fixture
def router(tmp_path):
    store = open_store(tmp_path / "data")
    metrics = ControllerMetrics()
    r = CommandRouter(Registry(store, ControllerConfig(store=str(tmp_path / "data")), metrics), metrics)
    yield r
    store.close()


def cancels(router: CommandRouter, s: Session, hb: agent_pb2.Heartbeat) -> int:
    """Cancels the router starts for one heartbeat (each goes to a task; the board is unknown here, so it fails
    and is logged: the count is what the heartbeat decided)."""
    async def run() -> int:
        before = router.superseded_cancels
        router._cancelled_at.clear()   # each heartbeat here is judged on its own, not against CANCEL_EVERY_S
        router.seen_heartbeat(s, hb)
        await asyncio.gather(*router._cancels, return_exceptions=True)
        return router.superseded_cancels - before
    return asyncio.run(run())


def test_a_superseded_command_or_launch_seen_on_its_board_is_cancelled_and_only_there(router):
    a, b = session("board-a"), session("board-b")
    assert cancels(router, a, beat("c1", ("job-1",))) == 0   # nothing superseded anywhere
    router.supersede("board-a", "c1")
    router.supersede("board-a", "job-1")
    assert cancels(router, a, beat("c1")) == 1
    assert cancels(router, a, beat("", ("job-1",))) == 1
    assert cancels(router, a, beat("c1", ("job-1",))) == 2
    assert cancels(router, b, beat("c1", ("job-1",))) == 0   # another board running that id: not its command
    assert cancels(router, a, beat("c2")) == 0


def test_superseding_again_for_another_board_moves_it_there(router):
    a, b = session("board-a"), session("board-b")
    router.supersede("board-a", "c1")
    router.supersede("board-b", "c1")
    assert cancels(router, b, beat("c1")) == 1
    assert cancels(router, a, beat("c1")) == 0
    assert router._superseded_on == {"board-b": 1}


def test_a_command_sent_again_is_wanted_again_and_its_board_not_read_for_it(router):
    a = session("board-a")
    router.supersede("board-a", "c1")
    router.supersede("board-a", "c2")

    async def resend() -> None:   # the board is unknown here: the send fails after it took c1 back
        with pytest.raises(NotFound):
            await router.send("board-a", agent_pb2.Command(cancel=agent_pb2.Cancel(target_command_id="x")),
                              command_id="c1", timeout_s=1)
    asyncio.run(resend())
    assert cancels(router, a, beat("c1")) == 0
    assert cancels(router, a, beat("c2")) == 1
    assert router._superseded_on == {"board-a": 1}


def test_the_oldest_superseded_commands_are_forgotten_past_the_bound_and_their_board_with_them(router, monkeypatch):
    monkeypatch.setattr(commands, "MAX_SUPERSEDED", 3)
    a, b = session("board-a"), session("board-b")
    router.supersede("board-a", "old")
    for i in range(3):
        router.supersede("board-b", f"c{i}")
    assert cancels(router, a, beat("old")) == 0     # forgotten: board-a has none left
    assert router._superseded_on == {"board-b": 3}
    assert cancels(router, b, beat("c0", ("c1", "c2"))) == 3


class Unreadable:
    """A heartbeat that fails the test if any of its fields is read."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"heartbeat field {name} read")


def test_the_heartbeat_of_a_board_with_nothing_superseded_is_not_read(router):
    a, b = session("board-a"), session("board-b")
    router.seen_heartbeat(a, Unreadable())   # nothing superseded anywhere
    router.supersede("board-b", "c1")
    router.seen_heartbeat(a, Unreadable())   # only another board's
    with pytest.raises(AssertionError, match="read"):
        router.seen_heartbeat(b, Unreadable())
