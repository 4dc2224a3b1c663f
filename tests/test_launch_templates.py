"""Job templates (``job submit --template``): the agent launches only the commands its configuration names
(``jetfleet/agent/templates.py``, ``launcher.py``), on its real executor and session socket with an emulated board,
with real processes. A launched process is adopted exactly as an attached one and must exit 0 once it trained the
job's length; it exits 3 -> the command fails naming 3 and the last line it printed; a cancel stops its process
group (a child that ignores SIGTERM is SIGKILLed after the grace period); a template or arg the configuration does
not name is refused and nothing starts, as is a value its arg's rule does not allow (an integer or a number within
bounds, one of a list); a bad configuration is refused naming the template and the field."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from jetfleet.agent.executor import CommandExecutor
from jetfleet.agent.launcher import Launcher
from jetfleet.agent.sessions import SessionConfig, SessionServer
from jetfleet.agent.templates import parse_templates
from jetfleet.shared.errors import InvalidArgument
from jetfleet.shared.proto import agent_pb2
from jetfleet.twin import EmulatedBoard

from .waiting import wait_until

pytestmark = pytest.mark.boards
ROOT = Path(__file__).resolve().parents[1]

# The user's training: joins the session named by the agent, steps, prints, then ends as told.
TRAIN = textwrap.dedent("""
    import os, signal, subprocess, sys, time
    sys.path.insert(0, {root!r})
    from jetfleet.session import Session
    steps, end = int(sys.argv[1]), sys.argv[2]
    if end == "stubborn":   # a child that ignores SIGTERM, in the same process group
        child = subprocess.Popen([sys.executable, "-c", "import signal, time\\n"
                                  "signal.signal(signal.SIGTERM, signal.SIG_IGN)\\nprint('child up', flush=True)\\n"
                                  "while True: signal.pause()"])
        print("pids", os.getpid(), child.pid, flush=True)
    with Session(os.environ["JETFLEET_WORKLOAD"]) as s:
        for i in range(steps):
            s.step()
        while end == "untilstop" and not s.stop_requested:   # trains on until the agent says the job is done
            s.step()
        print("trained", s.steps, "of", os.environ["JETFLEET_JOB_MINIBATCHES"], flush=True)
        if end == "stubborn":
            while True:
                s.step()
    if end.startswith("exit"):
        print("boom: loss is nan at step", steps, file=sys.stderr, flush=True)
        sys.exit(int(end[4:]))
""")


def templates_doc(script: Path, grace_s: float = 0.5) -> dict:
    return {"kill_grace_s": grace_s, "templates": {
        "resnet18": {"command": [sys.executable, str(script), "{minibatches}", "{end}"], "args": ["end"],
                     "cwd": str(script.parent), "env": {"PYTHONUNBUFFERED": "1"}, "exit_wait_s": 30},
        "typed": {"command": [sys.executable, str(script), "{minibatches}", "exit0", "{epochs}", "{lr}", "{opt}"],
                  "args": {"epochs": {"type": "int", "min": 1, "max": 100}, "lr": {"type": "float", "min": 0, "max": 1},
                           "opt": {"choices": ["sgd", "adam"]}}}}}


class Board:
    """An emulated board's executor, session socket and launcher on their own event loop thread."""

    def __init__(self, tmp: Path):
        script = tmp / "train.py"
        script.write_text(TRAIN.format(root=str(ROOT)))
        sock = str(tmp / "s.sock")
        self.board = EmulatedBoard("agx-xavier", 5, speed=float("inf"))
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = SessionServer(self.board, SessionConfig(path=sock), busy=lambda: self.executor.busy_with_own_work)
        self.launcher = Launcher(parse_templates(templates_doc(script), euid=os.geteuid()), sock)

        async def make() -> CommandExecutor:   # in its loop: on Python 3.8 its locks bind to the loop they start in
            return CommandExecutor(self.board, sessions=self.server, launcher=self.launcher)

        self.executor = self.run(make()).result(30)
        self.run(self.server.start()).result(30)

    def run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def launch(self, cid: str, job: str, minibatches: int, args: dict, template: str = "resnet18",
               timeout_s: float = 60.0, command_steps: int = 0, done: int = 0):
        return self.run(self.executor.execute(agent_pb2.Command(command_id=cid, run_training=agent_pb2.RunTraining(
            workload=template, minibatches=command_steps or minibatches, attach=True, attach_timeout_s=timeout_s,
            launch=agent_pb2.LaunchTemplate(template=template, args=args, launch_id=job, minibatches=minibatches,
                                          done=done)))))

    def cancel(self, target: str):
        return self.run(self.executor.execute(agent_pb2.Command(command_id=f"cancel-{target}",
                                                                cancel=agent_pb2.Cancel(target_command_id=target))))

    def close(self):
        try:
            self.executor.close()
            self.run(self.launcher.stop_all("the test ended")).result(30)
            self.run(self.server.stop()).result(30)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


@pytest.fixture
def board(tmp_path):
    b = Board(tmp_path)
    yield b
    b.close()


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:   # reaped between the two looks
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"   # a zombie its new parent has not reaped yet


def test_a_launched_template_trains_the_jobs_length_on_the_board_is_asked_to_stop_and_exits_0(board):
    first = board.launch("job-a-r1", "job-a", 150, {"end": "untilstop"}, command_steps=100).result(60)
    assert first.ok, first.error.message
    r = board.launch("job-a-r2", "job-a", 150, {"end": "untilstop"}, command_steps=50).result(60)   # the same process
    assert r.ok, r.error.message
    assert len(r.training.minibatch_times_s) == 50 and board.executor.trained["job-a-r1"] == 100   # the board's count
    launched = board.launcher.launches["job-a"]
    assert launched.returncode == 0 and launched.trained == 150 and len(board.launcher.launches) == 1
    trained = [line for line in r.training.output_tail if line.startswith("trained ")]   # stdout and stderr, one tail
    assert trained and int(trained[0].split()[1]) > 150 and trained[0].endswith("of 150")   # its own steps between
    assert r.training.output_tail[-1] == trained[0]          # to its last line


def test_a_launch_after_an_agent_restart_trains_what_is_left_of_the_job(board):
    r = board.launch("job-e-r3", "job-e", 150, {"end": "untilstop"}, command_steps=50, done=100).result(60)
    assert r.ok, r.error.message
    launched = board.launcher.launches["job-e"]
    assert launched.returncode == 0 and launched.trained == 50 == board.executor.trained["job-e-r3"]
    assert r.training.output_tail[-1].endswith(" of 50")                  # $JETFLEET_JOB_MINIBATCHES: what is left


def test_a_command_that_exits_3_fails_naming_its_status_and_its_last_line(board):
    r = board.launch("job-b-r1", "job-b", 80, {"end": "exit3"}).result(60)
    assert not r.ok and r.error.field == "run_training.launch"
    assert "exited with status 3" in r.error.message, r.error.message
    assert "its output ends: boom: loss is nan at step 80" in r.error.message
    assert board.launcher.launches["job-b"].returncode == 3


def test_a_template_or_arg_the_configuration_does_not_name_is_refused_and_nothing_starts(board):
    cases = (("mobilenet_v3", {"end": "exit0"}, "template", "not in this agent's configuration"),
             ("resnet18", {}, "template_args.end", "needs --arg end=VALUE"),
             ("resnet18", {"end": "exit0", "rm": "x"}, "template_args.rm", "takes no arg 'rm'"),
             ("resnet18", {"end": "--help"}, "template_args.end", "not starting with '-'"),
             ("resnet18", {"end": "a b"}, "template_args.end", "letters, digits"),
             ("typed", {"epochs": "0", "lr": "0.1", "opt": "sgd"}, "template_args.epochs", "an integer in 1..100"),
             ("typed", {"epochs": "1e1", "lr": "0.1", "opt": "sgd"}, "template_args.epochs", "an integer in 1..100"),
             ("typed", {"epochs": "5", "lr": "nan", "opt": "sgd"}, "template_args.lr", "a number in 0..1"),
             ("typed", {"epochs": "5", "lr": "1.5", "opt": "sgd"}, "template_args.lr", "a number in 0..1"),
             ("typed", {"epochs": "5", "lr": "0.1", "opt": "rmsprop"}, "template_args.opt", "one of sgd, adam"))
    for i, (template, args, field, words) in enumerate(cases):
        r = board.launch(f"bad-{i}", f"job-bad-{i}", 10, args, template=template).result(30)
        assert not r.ok and r.error.field.endswith(field) and words in r.error.message, r.error.message
    assert board.launcher.launches == {}                  # nothing started

    async def without_templates():
        return await CommandExecutor(EmulatedBoard("agx-xavier", 6)).execute(agent_pb2.Command(
            command_id="x", run_training=agent_pb2.RunTraining(workload="resnet18", minibatches=1, attach=True,
                                                               launch=agent_pb2.LaunchTemplate(
                                                                   template="resnet18", launch_id="j", minibatches=1))))

    r = asyncio.run(without_templates())
    assert not r.ok and "--templates FILE" in r.error.message


def test_cancel_stops_the_process_group_and_a_child_ignoring_sigterm_is_killed(board):
    result = board.launch("job-c-r1", "job-c", 10**5, {"end": "stubborn"})
    wait_until(lambda: "job-c" in board.launcher.launches and "child up" in board.launcher.launches["job-c"].lines(),
               30, "the child to ignore SIGTERM")
    launched = board.launcher.launches["job-c"]
    pids = [int(p) for p in next(x for x in launched.lines() if x.startswith("pids ")).split()[1:]]
    wait_until(lambda: board.executor.trained.get("job-c-r1", 0) > 50, 30, "the launched process's steps")
    assert board.cancel("job-c-r1").result(30).cancelled           # the job's command: cancelled...
    r = result.result(30)
    assert not r.ok and r.error.code == "CANCELLED"
    wait_until(lambda: all(gone(p) for p in pids), 30, "the launched group to be gone")   # ...and its process group
    assert launched.returncode == -15                              # the leader took SIGTERM
    assert launched.stopped.startswith("its job's command failed")
    # a cancel naming the launch (the controller's, when a job ends between its commands) stops it too
    again = board.launch("job-d-r1", "job-d", 10**5, {"end": "stubborn"})
    wait_until(lambda: board.executor.trained.get("job-d-r1", 0) > 20, 30, "the second launch's steps")
    assert board.cancel("job-d").result(30).cancelled
    assert not again.result(30).ok
    wait_until(lambda: all(gone(p) for p in [board.launcher.launches["job-d"].pid]), 30, "the second launch gone")


def bad(doc: dict, euid: int = 1000) -> InvalidArgument:
    with pytest.raises(InvalidArgument) as e:
        parse_templates(doc, euid)
    return e.value


def test_a_bad_template_configuration_is_refused_naming_the_template_and_the_field(tmp_path):
    ok = {"command": ["python3", "train.py", "{lr}"], "args": ["lr"]}
    cases = (({"t": {**ok, "command": "python3 train.py"}}, "templates.t.command", "never a shell string"),
             ({"t": {**ok, "command": ["python3", "{epochs}"]}}, "templates.t.command", "placeholder {epochs}"),
             ({"t": {**ok, "command": ["{lr}", "x"]}}, "templates.t.command", "takes no placeholder"),
             ({"t": {**ok, "command": ["python3", "{lr"]}}, "templates.t.command", "brace"),
             ({"t": {**ok, "user": "root"}}, "templates.t.user", "needs the agent to run as root"),
             ({"t": {**ok, "cwd": "relative"}}, "templates.t.cwd", "absolute"),
             ({"t": {**ok, "cwd": str(tmp_path / "none")}}, "templates.t.cwd", "not a directory"),
             ({"t": {**ok, "args": ["workload"]}}, "templates.t.args", "fills in"),
             ({"t": {**ok, "env": {"A B": "x"}}}, "templates.t.env", "NAME"),
             ({"t": {**ok, "shell": True}}, "templates.t.shell", "unknown setting"),
             ({"t": {**ok, "exit_wait_s": -1}}, "templates.t.exit_wait_s", "seconds"))
    for templates, field, words in cases:
        e = bad({"templates": templates})
        assert e.field == field and words in e.message, (field, e.message)
        assert "'t'" in e.message or field.endswith("exit_wait_s")
    assert bad({"kill_grace_s": 0}).field == "kill_grace_s"
    assert bad({"templats": {}}).field == "templats"
    assert parse_templates({"templates": {"t": {**ok, "user": "root"}}}, euid=0).templates[0].user == "root"


def test_an_args_rule_is_read_from_its_table_and_a_bad_rule_is_refused_naming_the_arg(tmp_path):
    command = ["python3", "train.py", "{epochs}", "{lr}", "{opt}", "{tag}"]
    rules = {"epochs": {"type": "int", "min": 1, "max": 100}, "lr": {"type": "float", "max": 1}, "opt": {"choices":
             ["sgd", "adam"]}, "tag": {}}
    (t,) = parse_templates({"templates": {"t": {"command": command, "args": rules}}}, 1000).templates
    assert t.args == ("epochs", "lr", "opt", "tag")
    assert [r.text() for r in t.rules] == ["int 1..100", "float ..1", "one of sgd|adam", ""]
    values = {"epochs": "100", "lr": "-0.5", "opt": "adam", "tag": "run-7"}
    assert t.argv(values, {}) == ["python3", "train.py", "100", "-0.5", "adam", "run-7"]
    cases = (({"lr": {"type": "complex"}}, "templates.t.args.lr", "allowed text, int, float"),
             ({"lr": {"type": "float", "min": 1, "max": 0}}, "templates.t.args.lr", "min 1 is above max 0"),
             ({"lr": {"type": "int", "min": 0.5}}, "templates.t.args.lr.min", "a finite integer"),
             ({"lr": {"type": "float", "max": float("inf")}}, "templates.t.args.lr.max", "a finite number"),
             ({"lr": {"choices": []}}, "templates.t.args.lr", "1..32 different values"),
             ({"lr": {"choices": ["a", "a"]}}, "templates.t.args.lr", "1..32 different values"),
             ({"lr": {"choices": ["a|b"]}}, "templates.t.args.lr", "not an allowed --arg value"),
             ({"lr": {"choices": ["--rm"]}}, "templates.t.args.lr", "not an allowed --arg value"),
             ({"lr": {"choices": ["a"], "min": 1}}, "templates.t.args.lr", "no type, min or max"),
             ({"lr": {"min": 1}}, "templates.t.args.lr", "for type int or float"),
             ({"lr": {"default": 1}}, "templates.t.args.lr", "unknown setting 'default'"),
             ({"lr": "float"}, "templates.t.args.lr", "a table"))
    for args, field, words in cases:
        e = bad({"templates": {"t": {"command": ["python3", "train.py", "{lr}"], "args": args}}})
        assert e.field == field and words in e.message, (field, e.field, e.message)


def test_the_agent_refuses_to_start_with_a_bad_templates_file(tmp_path):
    from jetfleet.cli.main import cli

    path = tmp_path / "templates.toml"
    path.write_text('[templates.digits]\ncommand = "python3 train.py --epochs 3"\n')
    out = CliRunner().invoke(cli, ["agent", "run", "--controller", "127.0.0.1:1", "--device", "emulated:agx-xavier",
                                   "--session-socket", str(tmp_path / "s.sock"), "--templates", str(path)])
    assert out.exit_code != 0
    assert "template 'digits'" in out.output and "never a shell string" in out.output, out.output
    assert not (tmp_path / "s.sock").exists()              # it never started


@pytest.mark.skipif(os.geteuid() != 0, reason="a template's user needs the agent to run as root")
def test_a_templates_user_runs_its_command(tmp_path):
    import pwd

    nobody = pwd.getpwnam("nobody")
    config = parse_templates({"templates": {"whoami": {"command": ["id", "-u"], "user": "nobody",
                                                       "cwd": str(tmp_path)}}}, euid=0)

    async def launch():
        launcher = Launcher(config, str(tmp_path / "s.sock"))
        launched = launcher.ensure(agent_pb2.LaunchTemplate(template="whoami", launch_id="j", minibatches=1))
        await launcher.wait_exit(launched, 30)
        launched.drain(30)   # its output read to its end
        return launched

    launched = asyncio.run(launch())
    assert launched.returncode == 0 and launched.last_line() == str(nobody.pw_uid)
