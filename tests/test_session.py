"""The board-side training session (jetfleet.session) against the agent's real session socket
(jetfleet.agent.sessions) on an emulated board: steps counted and paced by the twin, timing asked for by the agent,
energy windows from the board's rails, the socket's permissions, and the faults: no agent, a second session on a
held board, bad input, a process killed mid-training, the boards' Pythons."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from jetfleet.agent.sessions import SessionConfig, SessionServer
from jetfleet.session import NoAgentError, Session, SessionError
from jetfleet.session.client import MIN_GROUP_S
from jetfleet.shared import session_wire as wire
from jetfleet.shared.errors import AlreadyExists, InvalidArgument
from jetfleet.twin import EmulatedBoard

from . import procs
from .waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]


class Agent:
    """A SessionServer on its own event loop thread (the agent's side), started and stopped by the test."""

    def __init__(self, board, path: Path, **config):
        self.board = board
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = SessionServer(board, SessionConfig(path=str(path), **config), busy=lambda: self.busy)
        self.busy = ""

    def call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def session(self):
        (s,) = self.server.sessions.values()
        return s

    def close(self):
        try:
            self.call(self.server.stop())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


@pytest.fixture
def sock(tmp_path):
    return tmp_path / "jf" / "session.sock"


@pytest.fixture
def agent(sock):
    a = Agent(EmulatedBoard("agx-xavier", 1, speed=float("inf")), sock)
    a.call(a.server.start())
    yield a
    a.close()


def test_no_agent_is_a_clear_error_and_strict_false_trains_unmanaged(tmp_path):
    path = tmp_path / "nobody.sock"
    with pytest.raises(NoAgentError) as e:
        Session("mine", path=str(path))
    assert str(path) in e.value.message and "jetfleet agent run" in e.value.message and e.value.field == "path"
    with pytest.warns(RuntimeWarning, match="UNMANAGED"):
        s = Session("mine", path=str(path), strict=False)
    with s:
        for _ in range(5):
            s.step()
        s.begin("w")
        w = s.end("w")
    assert not s.managed and s.steps == 5
    assert w.seconds >= 0 and w.energy_j is None and w.mean_w is None   # no rails without the agent: not invented


def test_the_socket_is_the_boards_users_only_and_never_displaces_a_live_agent(tmp_path, sock, agent):
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o660 and stat.S_ISSOCK(os.stat(sock).st_mode)
    second = Agent(agent.board, sock)
    try:
        with pytest.raises(AlreadyExists):
            second.call(second.server.start())
        assert stat.S_ISSOCK(os.stat(sock).st_mode)    # the first agent's socket is still there
    finally:
        second.loop.call_soon_threadsafe(second.loop.stop)
        second.thread.join(10)
        second.loop.close()
    own = Agent(agent.board, tmp_path / "own.sock", mode=0o600)
    try:
        own.call(own.server.start())
        assert stat.S_IMODE(os.stat(tmp_path / "own.sock").st_mode) == 0o600
    finally:
        own.close()
    with pytest.raises(InvalidArgument, match="0o600"):
        SessionConfig(path=str(sock), mode=0o666).check()


def test_steps_are_counted_by_the_agent_paced_by_the_twin_and_timed_when_asked(agent, sock):
    board = agent.board
    per_step_s, power_w = board.expected("resnet18", board.read_mode())
    t0 = board.now_s()
    with Session("resnet18", path=str(sock), power_budget_w=30) as s:
        s.begin("train")
        for _ in range(150):
            sum(range(20_000))      # the "training step": real work of a fraction of a millisecond
            s.step()
        s.step(50)
        w = s.end("train")
        live = agent.session()
        assert live.pid == os.getpid() and live.power_budget_w == 30 and not live.ended
    assert live.steps == 200 == s.steps and live.ended == "closed"
    # each reported step took the twin's time for resnet18 in the current mode (jitter of a few %, no warm-up)
    assert 200 * per_step_s * 0.9 < board.now_s() - t0 < 200 * per_step_s * 1.1
    assert 200 * per_step_s * 0.9 < w.seconds < 200 * per_step_s * 1.1
    assert w.energy_j == pytest.approx(w.mean_w * w.seconds)
    assert power_w * 0.9 < w.mean_w < power_w * 1.1                     # the board's rails while it trained
    assert live.timed and all(seconds >= MIN_GROUP_S for _, seconds in live.timed)   # short steps: in groups
    assert sum(n for n, _ in live.timed) < 200             # only when the agent asked (and then to a group's end)


def test_a_users_own_model_is_characterised_and_the_twin_times_it(agent, sock):
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    before = [p.clone() for p in model.parameters()]
    with Session("my-mlp", path=str(sock), model=model, example_input=torch.randn(32, 64)) as s:
        for _ in range(20):
            s.step()
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))   # measured on a copy
    spec = agent.board.emulated_workload("my-mlp")
    assert spec is not None and spec.minibatch_size == 32
    small, _ = agent.board.expected("my-mlp", agent.board.read_mode())
    big, _ = agent.board.expected("resnet18", agent.board.read_mode())
    assert 0 < small < big / 10        # an MLP step is far cheaper than ResNet-18's on the same board
    with pytest.raises(SessionError, match="pass model= and example_input="):
        Session("unknown-model", path=str(sock))


def test_a_second_session_on_a_held_board_is_refused_naming_the_holder(agent, sock):
    with Session("resnet18", path=str(sock)) as first:
        with pytest.raises(SessionError) as e:
            Session("mobilenet_v3", path=str(sock))
        assert first.session_id in e.value.message and f"pid {os.getpid()}" in e.value.message
        assert e.value.field == "session"
        agent.busy = ""
    agent.busy = "running command job-1-r1 for the controller"
    with pytest.raises(SessionError, match="job-1-r1"):
        Session("resnet18", path=str(sock))
    assert len(agent.server.sessions) == 1    # the refused ones changed nothing


def test_bad_input_names_the_field_and_changes_nothing(agent, sock):
    with Session("resnet18", path=str(sock)) as s:
        s.step(3)
        s.flush()
        for bad in ({"op": "steps", "n": -1}, {"op": "steps", "n": True}, {"op": "steps", "n": 1, "timed": [[1, -2]]},
                    {"op": "nope"}, {"op": "end", "name": "never-opened"}, {"op": "begin", "name": "has space"}):
            with pytest.raises(SessionError) as e:
                s._call(bad)
            assert e.value.field in ("n", "timed", "op", "name"), (bad, e.value.field)
        with pytest.raises(InvalidArgument, match="n must be an integer"):
            s.step(0)
        assert agent.session().steps == 3
    with pytest.raises(InvalidArgument, match="one goal"):
        Session("resnet18", path=str(sock), power_budget_w=30, deadline_s=60)
    cost = {"kernels": 10, "memory_kernels": 1, "flops": float("inf"), "param_bytes": 1, "memory_bytes": 1,
            "minibatch_size": 8, "input": "image 32", "conv_bins": [], "matmul_bins": []}
    with pytest.raises(InvalidArgument) as e:
        wire.check_cost(cost)
    assert e.value.field == "cost.flops"


def test_a_process_killed_mid_training_leaves_its_session_lost_and_the_board_free(agent, sock, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from jetfleet.session import Session
        s = Session("resnet18", path={str(sock)!r})
        s.begin("forever")
        print("joined", flush=True)
        while True:
            s.step()
    """))
    child = procs.spawn([sys.executable, str(script)], stdout=procs.PIPE, stderr=procs.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "joined", child.stderr.read()
        wait_until(lambda: agent.server.live is not None and agent.server.live.steps > 100, 30, "steps reported")
        child.kill()
        child.wait(10)
        wait_until(lambda: agent.server.live is None, 10, "the agent to see the process go")
    finally:
        child.end()
    (lost,) = agent.server.sessions.values()
    assert lost.ended.startswith("lost") and "killed" in lost.ended and not lost.windows
    with Session("resnet18", path=str(sock)) as s:     # the board is free for the next training
        s.step()


@pytest.mark.parametrize("version", ["3.8", "3.10"])
def test_the_session_runs_on_the_boards_pythons_without_torch_or_grpc(agent, sock, version):
    found = sorted(Path.home().glob(f".pyenv/versions/{version}.*/bin/python"))
    if not found:
        pytest.skip(f"no pyenv Python {version} here")
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from jetfleet.session import Session
        import jetfleet.session.callbacks   # the frameworks' callbacks: importable without them
        with Session("resnet18", path={str(sock)!r}) as s:
            for _ in range(10):
                s.step()
            s.begin("w")
            s.step(5)
            w = s.end("w")
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "grpc", "numpy", "google", "transformers",
                                                                      "lightning", "pytorch_lightning"))
        print(sys.version_info[:2], s.steps, w.energy_j > 0, heavy)
    """)
    out = procs.run([str(found[-1]), "-c", code], timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"({version.replace('.', ', ')}) 15 True []"
    assert agent.session().steps == 15


def test_an_agent_process_serves_sessions_and_refuses_the_controllers_work_while_one_holds_the_board(tmp_path):
    """The real agent (`jetfleet agent run --session-socket`) with no controller reachable: the session works, and
    while it holds the board the executor refuses a training command naming it."""
    from jetfleet.agent.config import AgentConfig
    from jetfleet.agent.link import AgentLink
    from jetfleet.shared.proto import agent_pb2

    sock = tmp_path / "agent.sock"
    board = EmulatedBoard("orin-nano", 2, speed=float("inf"))
    link = AgentLink(board, AgentConfig(controller="127.0.0.1:9", session_socket=str(sock), backoff_max_s=0.5))
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    thread = threading.Thread(target=loop.run_until_complete, args=(link.run(stop),), daemon=True)
    thread.start()
    try:
        wait_until(lambda: sock.exists(), 10, "the agent's session socket")
        with Session("lstm", path=str(sock)) as s:
            s.step(7)
            s.flush()
            cmd = agent_pb2.Command(command_id="c1", run_training=agent_pb2.RunTraining(workload="lstm",
                                                                                        minibatches=2))
            result = asyncio.run_coroutine_threadsafe(link.executor.execute(cmd), loop).result(30)
            assert not result.ok and s.session_id in result.error.message and "one training at a time" in \
                result.error.message
            # a campaign's profile, checked by the link before it is handed over, is refused the same way
            from jetfleet.controller.campaigns.results import profile_command
            prof = profile_command("lstm", board.catalog.maxn, 40, "p1")
            refused = asyncio.run_coroutine_threadsafe(link.executor.execute(prof, link.executor.check(prof)),
                                                       loop).result(30)
            assert not refused.ok and s.session_id in refused.error.message, refused.error
        assert link.executor.trained.get("c1", 0) == 0     # the board trained nothing for the refused command
        assert link.executor.profiles_run == 0             # nor profiled anything
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(30)
        loop.close()
    assert not sock.exists()     # the agent removed its socket when it stopped


def timed_groups(tmp_path, time_steps: int, work) -> list[tuple[int, float]]:
    """300 steps of ``work`` each with an agent that asks for ``time_steps`` to be timed at the start (and never
    again): the (steps, seconds) groups it was sent."""
    a = Agent(EmulatedBoard("agx-xavier", 3, speed=float("inf")), tmp_path / "t.sock", time_steps=time_steps,
              time_every=10_000)
    try:
        a.call(a.server.start())
        with Session("resnet18", path=str(tmp_path / "t.sock")) as s:
            for _ in range(300):
                work()
                s.step()
        return list(a.session().timed)
    finally:
        a.close()


def test_only_the_steps_the_agent_asks_for_are_timed(tmp_path):
    timed = timed_groups(tmp_path, 4, lambda: sum(range(20_000)))
    # asked for 4 at the start: timed to the end of the group that holds them (groups last >= MIN_GROUP_S)
    assert 4 <= sum(n for n, _ in timed) < 100, timed


class QueuedDevice:
    """An asynchronous device as CUDA is one, on a clock of its own that the session reads (injected: no sleeping):
    ``launch`` queues ``seconds`` of work and returns after ``launch_s`` of the loop's time, ``sync`` returns when
    the queue has drained (the session's synchronisation; there is no CUDA here)."""

    def __init__(self, launch_s: float = 1e-5) -> None:
        self.now = 0.0
        self.busy_until = 0.0
        self.launch_s = launch_s
        self.syncs = 0

    def perf_counter(self) -> float:
        return self.now

    def launch(self, seconds: float) -> None:
        self.busy_until = max(self.now, self.busy_until) + seconds
        self.now += self.launch_s

    def sync(self) -> None:
        self.syncs += 1
        self.now = max(self.now, self.busy_until)


def test_short_gpu_steps_are_timed_in_groups_synchronised_only_at_their_ends(tmp_path, monkeypatch):
    """Steps that queue 1 ms of device work each and return at once: the timed groups measure the device's time
    (1 ms a step, not the loop's microseconds), and the device is synchronised at each group's end, not per step."""
    dev = QueuedDevice()
    monkeypatch.setattr("jetfleet.session.client._cuda_sync", lambda: dev.sync)
    monkeypatch.setattr("jetfleet.session.client.time", dev)     # the session's clock is the device's
    timed = timed_groups(tmp_path, 300, lambda: dev.launch(0.001))
    steps = sum(n for n, _ in timed)
    # all 300 timed, but for a last group shorter than MIN_GROUP_S when the session closed (at most 5 steps of 1 ms)
    assert steps >= 300 - 5 and all(sec >= MIN_GROUP_S for _, sec in timed), timed
    assert 0.001 <= sum(sec for _, sec in timed) / steps < 0.0013, timed      # the device's time per step
    assert dev.syncs <= len(timed) + 1 < 300 // 3, (dev.syncs, len(timed))    # once to start, once per group
