"""A training command that adopts the operator's own training (RunTraining.attach, jetfleet/agent/attach.py), on
the agent's real executor and session socket with an emulated board: the user's steps are the command's
minibatches (the board's own count), progress carries the board's energy, a job's mode step applies between the
user's steps, and the faults each fail the command naming why: no session, a process that never calls step(), a
process killed mid-run."""

from __future__ import annotations

import asyncio
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from jetfleet.agent.executor import CommandExecutor
from jetfleet.agent.sessions import SessionConfig, SessionServer
from jetfleet.session import Session
from jetfleet.shared.convert import mode_to_pb
from jetfleet.shared.proto import agent_pb2
from jetfleet.twin import EmulatedBoard

from . import procs
from .waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]


class Board:
    """An emulated board's executor and session socket on their own event loop thread, ended by the test."""

    def __init__(self, sock: Path):
        self.board = EmulatedBoard("agx-xavier", 5, speed=float("inf"))
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = SessionServer(self.board, SessionConfig(path=str(sock)),
                                    busy=lambda: self.executor.busy_with_own_work)
        self.executor = CommandExecutor(self.board, sessions=self.server)
        self.reports: list[agent_pb2.TrainingProgress] = []
        self.executor.on_progress = self.reports.append
        self.run(self.server.start()).result(30)

    def run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def attach(self, cid: str, workload: str, minibatches: int, timeout_s: float = 30.0):
        return self.run(self.executor.execute(agent_pb2.Command(command_id=cid, run_training=agent_pb2.RunTraining(
            workload=workload, minibatches=minibatches, attach=True, attach_timeout_s=timeout_s,
            progress_interval_s=0.5))))

    def close(self):
        try:
            self.executor.close()
            self.run(self.server.stop()).result(30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


@pytest.fixture
def board(tmp_path):
    b = Board(tmp_path / "s.sock")
    yield b
    b.close()


def test_the_users_steps_are_the_commands_minibatches_and_a_job_step_applies_between_them(board, tmp_path):
    b = board.board
    low = b.catalog.parse_mode("2/1190.4/624.75/1600")
    result = board.attach("job-1-r1", "resnet18", 120)
    with Session("resnet18", path=str(tmp_path / "s.sock")) as s:
        for _ in range(60):
            s.step()
        s.flush()
        wait_until(lambda: board.executor.trained.get("job-1-r1") == 60, 10, "60 steps counted")
        fast_s = b.expected("resnet18", b.read_mode())[0]
        step = board.run(board.executor.execute(agent_pb2.Command(command_id="step-1", set_mode=agent_pb2.SetMode(
            mode=mode_to_pb(low), during_command_id="job-1-r1")))).result(30)
        assert step.ok and b.read_mode() == low          # applied while the user's training runs
        for _ in range(100):                             # the user trains on past the command's length
            s.step()
        r = result.result(30)
    assert r.ok, r.error.message
    t = r.training
    assert len(t.minibatch_times_s) == 120 and board.executor.trained["job-1-r1"] == 120   # the board's own count
    slow_s = b.expected("resnet18", low)[0]
    assert slow_s > 2 * fast_s
    # the steps after the mode step took the slow mode's time on the twin: board time says so
    assert t.elapsed_s == pytest.approx(60 * fast_s + 60 * slow_s, rel=0.1)
    assert t.energy_j > 0 and board.reports and board.reports[-1].final
    assert board.reports[-1].minibatches_done == 120


def test_no_session_joining_fails_the_command_naming_it(board):
    r = board.attach("job-2-r1", "never-started", 10, timeout_s=0.3).result(30)
    assert not r.ok and "no training session named 'never-started'" in r.error.message
    assert r.error.code == "DEADLINE_EXCEEDED"


def test_a_process_that_never_calls_step_fails_the_command_naming_it(board, tmp_path):
    result = board.attach("job-3-r1", "mobilenet_v3", 10, timeout_s=0.5)
    with Session("mobilenet_v3", path=str(tmp_path / "s.sock")) as s:   # joins, then never steps
        r = result.result(30)
        assert s.managed
    assert not r.ok and r.error.code == "DEADLINE_EXCEEDED"
    assert "'mobilenet_v3'" in r.error.message and "has not called step() for 0.5 s (after 0 of 10" in r.error.message


def test_a_session_that_stops_stepping_fails_the_command_naming_the_process(board, tmp_path):
    result = board.attach("job-4-r1", "resnet18", 50, timeout_s=0.5)
    with Session("resnet18", path=str(tmp_path / "s.sock")) as s:
        s.step(3)
        s.flush()
        r = result.result(30)                            # no step() for 0.5 s: the command fails
        assert not r.ok and "has not called step() for 0.5 s (after 3 of 50 steps)" in r.error.message
        assert str(s.session_id) and board.executor.trained["job-4-r1"] == 3


def test_a_process_killed_mid_run_fails_the_command_and_frees_the_board(board, tmp_path):
    sock = tmp_path / "s.sock"
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from jetfleet.session import Session
        s = Session("resnet18", path={str(sock)!r})
        print("joined", flush=True)
        while True:
            s.step()
    """))
    result = board.attach("job-5-r1", "resnet18", 10**5)
    child = procs.spawn([sys.executable, str(script)], stdout=procs.PIPE, stderr=procs.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "joined", child.stderr.read()
        wait_until(lambda: board.executor.trained.get("job-5-r1", 0) > 200, 30, "the process's steps")
        child.kill()
        r = result.result(30)
    finally:
        child.end()
    assert not r.ok and "went away (exited or killed)" in r.error.message and f"pid {child.pid}" in r.error.message
    mode = board.board.read_mode()
    assert board.board.catalog.validate(mode) == mode    # the board is in one of its modes
    again = board.run(board.executor.execute(agent_pb2.Command(command_id="next", run_training=agent_pb2.RunTraining(
        workload="lstm", minibatches=3)))).result(30)
    assert again.ok and len(again.training.minibatch_times_s) == 3   # and free for the next work


def test_bad_attach_commands_are_refused_naming_the_field(board):
    for cmd, field in ((agent_pb2.RunTraining(workload="has space", minibatches=1, attach=True), "workload"),
                       (agent_pb2.RunTraining(workload="mine", minibatches=0, attach=True), "minibatches"),
                       (agent_pb2.RunTraining(workload="mine", minibatches=1, attach=True, attach_timeout_s=-1),
                        "attach_timeout_s")):
        r = board.run(board.executor.execute(agent_pb2.Command(command_id=f"bad-{field}", run_training=cmd))).result(30)
        assert not r.ok and field in r.error.field
    no_sessions = CommandExecutor(EmulatedBoard("agx-xavier", 6))
    r = asyncio.run(no_sessions.execute(agent_pb2.Command(command_id="x", run_training=agent_pb2.RunTraining(
        workload="mine", minibatches=1, attach=True))))
    assert not r.ok and "--session-socket" in r.error.message


def test_a_process_gone_between_two_commands_is_named_when_the_next_one_times_out(board, tmp_path):
    first = board.attach("job-6-r1", "resnet18", 5)
    with Session("resnet18", path=str(tmp_path / "s.sock")) as s:
        s.step(5)
        s.flush()
        assert first.result(30).ok
        s._drop()     # the process's socket closes without a goodbye, as when it is killed
    wait_until(lambda: board.server.live is None, 10, "the agent to see the process go")
    r = board.attach("job-6-r2", "resnet18", 5, timeout_s=0.3).result(30)
    assert not r.ok and "went away (exited or killed) after 5 steps" in r.error.message
