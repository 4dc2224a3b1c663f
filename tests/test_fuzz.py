"""Issue 13's closing check: generated and mutated messages fed to every agent-session handler and every
operator handler in-process. Zero crashes (only typed errors come back), no hangs, the controller keeps
serving, and nothing invalid is stored. A short run is part of `make test`; `make eval` runs a long one."""

import asyncio
import os
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jetfleet.controller.server import Controller
from jetfleet.shared.errors import JetfleetError

from .fuzzing import AGENT_MESSAGE, OPERATOR, call_operator, check_state, mutated, real_messages
from .harness import FAST_CONTROLLER
from .hostile import hello

HANG_S = 10.0    # a handler that takes longer than this is a hang
SHORT = int(os.environ.get("JETFLEET_FUZZ_EXAMPLES", "150"))


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


class Harness:
    """A controller's parts without its gRPC server, on a loop of their own; counts what the fuzz did."""

    def __init__(self, data: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.ctl = Controller(replace(FAST_CONTROLLER, store=data))
        self.run(self.ctl.registry.load())
        self.run(self.ctl.campaigns.start())
        self.tried = self.refused = self.crashes = 0
        self.rss_before = rss_mib()

    def run(self, coro):
        return self.loop.run_until_complete(asyncio.wait_for(coro, HANG_S))

    async def agent_session(self, messages) -> None:
        sessions = self.ctl.sessions
        try:
            session = await sessions.open(messages[0], "ipv4:127.0.0.1:1")
        except JetfleetError:
            self.refused += 1
            return
        try:
            for msg in messages[1:]:
                await sessions.handle(session, msg)   # never raises: a bad message gets a notice
        finally:
            await sessions.close(session, "fuzz")

    def close(self) -> None:
        self.run(self.ctl.stop(0))
        self.loop.close()


@pytest.fixture(scope="module")
def fuzz(tmp_path_factory):
    h = Harness(str(tmp_path_factory.mktemp("fuzz") / "data"))
    yield h
    # the controller still serves: a genuine agent registers, an operator lists it
    session = h.run(h.ctl.sessions.open(hello("genuine-1"), "ipv4:127.0.0.1:2"))
    assert [d.device_id for d in h.ctl.service.list_devices("tx2").devices if d.online] == ["genuine-1"]
    h.run(h.ctl.sessions.close(session, "done"))
    state = check_state(h.ctl)
    print(f"\nfuzz: {h.tried} inputs tried, {h.refused} sessions refused at hello, {h.crashes} crashes, 0 hangs; "
          f"stored {state}; RSS {h.rss_before:.0f} -> {rss_mib():.0f} MiB")
    h.close()


SEEDS = real_messages()
# Half the sessions start with a real hello, so the messages after it reach every handler of an open session.
FIRST = st.builds(lambda real, other: SEEDS[0] if real else other, st.booleans(), st.one_of(AGENT_MESSAGE,
                                                                                        mutated(SEEDS)))
REST = st.lists(st.one_of(AGENT_MESSAGE, mutated(SEEDS), st.sampled_from(SEEDS[1:])), max_size=6)
FUZZ_SETTINGS = dict(deadline=None, database=None, derandomize=True, print_blob=True,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                            HealthCheck.function_scoped_fixture, HealthCheck.large_base_example])


def _agent_case(fuzz, first, rest):
    fuzz.tried += 1 + len(rest)
    messages = [m for m in [first, *rest] if m is not None]
    if messages:
        fuzz.run(fuzz.agent_session(messages))


def _operator_case(fuzz, calls):
    for name, req in calls:
        fuzz.tried += 1
        try:
            fuzz.run(call_operator(fuzz.ctl, name, req))
        except JetfleetError:
            pass


@settings(max_examples=SHORT, **FUZZ_SETTINGS)
@given(first=FIRST, rest=REST)
def test_agent_sessions_survive_any_message(fuzz, first, rest):
    _agent_case(fuzz, first, rest)


@settings(max_examples=SHORT, **FUZZ_SETTINGS)
@given(calls=st.lists(OPERATOR, min_size=1, max_size=4))
def test_operator_handlers_survive_any_request(fuzz, calls):
    _operator_case(fuzz, calls)


@pytest.mark.slow
@settings(max_examples=3000, **{**FUZZ_SETTINGS, "derandomize": False})
@given(first=FIRST, rest=REST)
def test_agent_sessions_survive_any_message_long(fuzz, first, rest):
    _agent_case(fuzz, first, rest)


@pytest.mark.slow
@settings(max_examples=3000, **{**FUZZ_SETTINGS, "derandomize": False})
@given(calls=st.lists(OPERATOR, min_size=1, max_size=6))
def test_operator_handlers_survive_any_request_long(fuzz, calls):
    _operator_case(fuzz, calls)
