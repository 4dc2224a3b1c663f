"""The test run's own promises (issue 30): what a test starts ends with it, also when it fails; a test that forks
this process fails; and `make test`'s last sweep lists and kills whatever outlived the run."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from . import procs
from .waiting import wait_until

REPO = Path(__file__).resolve().parents[1]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def inner_run(tmp_path: Path, body: str) -> procs.subprocess.CompletedProcess:
    """Run ``body`` as a test file of its own under this suite's conftest (its fixtures and hooks)."""
    (tmp_path / "conftest.py").write_text("from tests.conftest import *  # noqa: F403\n"
                                          "from tests.conftest import _children_end_with_their_test  # noqa: F401\n")
    (tmp_path / "test_inner.py").write_text(body)
    env = {**os.environ, "PYTHONPATH": str(REPO), "CI": ""}
    return procs.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                      "--rootdir", str(tmp_path), str(tmp_path / "test_inner.py")], env=env, cwd=tmp_path, timeout=300)


def test_a_failing_test_still_ends_the_processes_it_started_and_their_group(tmp_path):
    pids = tmp_path / "pids"
    r = inner_run(tmp_path, f"""
from pathlib import Path

from tests import procs
from tests.waiting import wait_until

def alive(pid):
    try:
        with open(f"/proc/{{pid}}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False

def test_a_fails_with_children_running():
    procs.spawn(["sh", "-c", "sleep 300 & echo $$ $! > {pids}.tmp && mv {pids}.tmp {pids}; wait"])
    wait_until(lambda: Path("{pids}").exists(), 60, "the child's pids")
    assert False, "fails on purpose"

def test_b_runs_after_it():   # the failed test's teardown has run: its child and grandchild are gone
    shell, sleeper = (int(x) for x in Path("{pids}").read_text().split())
    assert not alive(shell) and not alive(sleeper), "a failing test's child (or its child) outlived the test"
""")
    assert "1 failed, 1 passed" in r.stdout and "fails on purpose" in r.stdout, r.stdout + r.stderr


def test_a_test_that_forks_the_test_process_fails_naming_the_cause(tmp_path):
    r = inner_run(tmp_path, """
import subprocess, sys

def test_forks():
    subprocess.run([sys.executable, "-c", "pass"], preexec_fn=lambda: None, check=True)
""")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "this test forked the test process 1 time(s)" in r.stdout and "tests/procs.py" in r.stdout


def test_the_last_sweep_lists_and_kills_what_outlived_the_command_however_it_detached(tmp_path):
    pids = tmp_path / "pids"
    # one leftover in the command's group, one in a session of its own: both are below the sweep
    r = procs.run([sys.executable, str(REPO / ".ci/sweep.py"), "sh", "-c",
                   f"sleep 300 & a=$!; setsid sleep 301 & echo $a $! > {pids}; exit 0"], timeout=120)
    left = [int(x) for x in pids.read_text().split()]
    assert r.returncode == 1, r.stderr             # leftovers fail the run, even though the command passed
    assert "2 process(es) left running" in r.stderr and "sleep 300" in r.stderr and "sleep 301" in r.stderr
    wait_until(lambda: not any(alive(p) for p in left), 30, "the leftovers to end")


def test_the_sweep_keeps_a_clean_commands_status(tmp_path):
    assert procs.run([sys.executable, str(REPO / ".ci/sweep.py"), "sh", "-c", "exit 0"]).returncode == 0
    r = procs.run([sys.executable, str(REPO / ".ci/sweep.py"), "sh", "-c", "exit 3"])
    assert r.returncode == 3 and "nothing left running" in r.stderr
