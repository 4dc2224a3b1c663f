"""Admission control on agents' hellos: a bounded number handled at once, the rest turned away before their hello is
looked at with a time to dial again that grows with the crowd, and agents that honour it (with jitter on top, never
sooner) and come online once there is room."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import grpc
import pytest

from jetfleet.controller.admission import HelloAdmission
from jetfleet.shared.backoff import admission_delay_s
from jetfleet.shared.errors import InvalidArgument, ResourceExhausted
from jetfleet.shared.grpc_errors import error_field, retry_after_s
from jetfleet.shared.proto import agent_pb2, agent_pb2_grpc

from .harness import FAST_CONTROLLER, LabThread
from .hostile import hello
from .waiting import wait_until


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_hellos_past_the_bound_are_turned_away_with_a_wait_that_grows_with_the_crowd():
    clock = Clock()
    a = HelloAdmission(2, min_retry_s=1.0, max_retry_s=30.0, clock=clock)
    a.enter()
    a.enter()
    with pytest.raises(ResourceExhausted, match="admitting 2 agents at a time") as first:
        a.enter()
    # the 2 in flight and the one turned away (its refusal rate 0.5/s x the 1 s last told), admitted at the floor 1/s
    assert first.value.field == "hello" and first.value.retry_after_s == pytest.approx(2.5)
    waits = []
    for _ in range(40):     # 40 agents turned away within 2 s while nobody is admitted: the wait grows
        clock.t += 0.05
        with pytest.raises(ResourceExhausted) as e:
            a.enter()
        waits.append(e.value.retry_after_s)
    assert waits[-1] > 5 * waits[0] and max(waits) <= 30.0 and a.refused == 41
    a.leave(welcomed=True)                                     # a place frees: the next hello is admitted
    a.enter()
    for _ in range(200):    # then hellos flow (200 a second) and nobody is turned away: the wait falls with the crowd
        clock.t += 0.005
        a.leave(welcomed=True)
        a.enter()
    assert a.retry_after_s() < waits[-1] / 5
    a.leave(welcomed=True)
    a.leave(welcomed=True)
    clock.t += 60.0         # a quiet minute, nothing in flight: the floor
    assert a.in_flight == 0 and a.retry_after_s() == pytest.approx(1.0)
    with pytest.raises(InvalidArgument, match="max_hellos_in_flight=0"):
        HelloAdmission(0)


def test_an_agent_waits_at_least_what_it_was_told_and_agents_told_alike_spread_out():
    rng = random.Random(7)
    waits = [admission_delay_s(3.0, rng) for _ in range(1000)]
    assert min(waits) >= 3.0 and max(waits) <= 6.0
    assert sum(w < 4.5 for w in waits) == pytest.approx(500, abs=60)   # uniform over [3, 6]


def test_agents_turned_away_honour_the_wait_and_come_online_once_there_is_room(tmp_path):
    lab = LabThread(str(tmp_path / "data"), [], config=replace(FAST_CONTROLLER, max_hellos_in_flight=1)).start()
    try:
        sessions = lab.lab.controller.sessions
        lab.do(sessions.admit)          # the one place is taken (a hello in flight): every agent is turned away
        agents = [lab.do(lambda i=i: lab.lab.add_agent("orin-nano", seed=i)) for i in range(3)]
        lab.wait(lambda: all(a.link.admission_waits for a in agents), 20, "every agent told when to dial again")
        assert not any(lab.online(a.device_id) for a in agents)
        refused = lab.lab.controller.metrics.registry.get_sample_value("jetfleet_agent_hellos_refused_total")
        assert refused >= 3
        lab.do(lambda: sessions.admitted(welcomed=False))    # room again: they come back after their waits
        lab.wait(lambda: all(lab.online(a.device_id) for a in agents), 30, "every agent online")
        for a in agents:
            for told, taken in a.link.admission_waits:
                assert 1.0 <= told <= 60.0 and told <= taken <= 2 * told
            assert not [n for n in a.link.notices if n.code == "RESOURCE_EXHAUSTED"]   # not an error of theirs
        # a place is given back once the welcome is sent, which may be just after the board shows online
        lab.wait(lambda: lab.do(lambda: sessions.admission.in_flight) == 0, 30, "every place given back")
    finally:
        lab.close()


def _raw_session(target: str, first: agent_pb2.AgentMessage | None, before_hello: Callable[[], None] = lambda: None,
                 timeout_s: float = 20.0) -> grpc.aio.AioRpcError | str:
    """One agent session by hand: ``before_hello`` runs on the client's event loop just before ``first`` is written
    (blocking it, as a busy agent's loop is), then the controller's first message is read. ``first=None``: nothing
    is written. Returns the call's error, or the kind of the first message."""
    async def out() -> Any:
        before_hello()
        if first is not None:
            yield first
        await asyncio.Event().wait()      # the session stays open from the agent's side

    async def run() -> grpc.aio.AioRpcError | str:
        async with grpc.aio.insecure_channel(target) as channel:
            call = agent_pb2_grpc.AgentLinkStub(channel).Session(out())
            try:
                got = await asyncio.wait_for(call.read(), timeout_s)
            except grpc.aio.AioRpcError as e:
                return e
            finally:
                call.cancel()
            return "EOF" if got is grpc.aio.EOF else got.WhichOneof("kind")

    return asyncio.run(run())


def test_an_agent_busy_as_it_is_turned_away_is_told_resource_exhausted_and_the_wait_not_internal(tmp_path):
    # The agent's loop is held from the moment the controller counts the refusal until the controller's loop has moved
    # past it (answered it, or waits for the hello), then the hello is written: refused before its hello arrived, the
    # refusal crossed the write and gRPC's client library reported INTERNAL ("Internal error from Core"), without the
    # wait (10 runs in 10, here). Refused once it arrived: the status.
    lab = LabThread(str(tmp_path / "data"), [], config=replace(FAST_CONTROLLER, max_hellos_in_flight=1)).start()
    try:
        sessions = lab.lab.controller.sessions
        lab.do(sessions.admit)          # the one place is taken
        for k in range(1, 4):
            def busy(k: int = k) -> None:
                wait_until(lambda: lab.do(lambda: sessions.admission.refused) >= k, 10, "the refusal counted")
                for _ in range(3):      # the agent's loop still held (a busy agent) while the controller's turns
                    lab.call(asyncio.sleep(0))
            e = _raw_session(lab.address, hello(f"raw/{k}"), busy)
            assert isinstance(e, grpc.aio.AioRpcError), e
            assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, (e.code(), e.details(), e.debug_error_string())
            assert 1.0 <= (retry_after_s(e) or 0.0) <= 60.0 and error_field(e) == "hello"
    finally:
        lab.close()


def test_a_session_without_a_hello_is_closed_after_the_hello_timeout_and_holds_no_place(tmp_path):
    config = replace(FAST_CONTROLLER, max_hellos_in_flight=1, hello_timeout_s=0.5)
    lab = LabThread(str(tmp_path / "data"), [], config=config).start()
    try:
        sessions = lab.lab.controller.sessions
        e = _raw_session(lab.address, None)          # admitted, silent: closed, its place given back
        assert isinstance(e, grpc.aio.AioRpcError), e
        assert e.code() == grpc.StatusCode.DEADLINE_EXCEEDED and error_field(e) == "hello"
        assert "no hello within 0.5 s" in (e.details() or "")
        lab.wait(lambda: lab.do(lambda: sessions.admission.in_flight) == 0, 10, "the place given back")
        lab.do(sessions.admit)                       # the place taken: a silent session turned away is still ended
        e = _raw_session(lab.address, None)
        assert isinstance(e, grpc.aio.AioRpcError) and e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e
        lab.do(lambda: sessions.admitted(welcomed=False))
        agent = lab.do(lambda: lab.lab.add_agent("orin-nano", seed=1))    # an agent that speaks is admitted
        lab.wait(lambda: lab.online(agent.device_id), 20, "the agent online")
    finally:
        lab.close()
