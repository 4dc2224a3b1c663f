"""Exactly once, judged on the board (issue 24): a job's minibatches are trained once whatever breaks between the
controller and the board, and a command the job gave up on stops on its board. Real processes and real faults: a
controller process killed with SIGKILL and started again, an agent process frozen (SIGSTOP) until the controller
takes its board for gone, then let go on. What the boards trained is read from their own /metrics
(``jetfleet_agent_trained_minibatches_total``), as an outsider would, not from the controller's record."""

from __future__ import annotations

import re
import signal
import sys
import urllib.request

import pytest

from jetfleet.client import OperatorClient
from jetfleet.shared.proto import operator_pb2 as op

from . import procs
from .harness import free_port, wait_until

JETFLEET = [sys.executable, "-m", "jetfleet.cli"]
NANO = "orin-nano"
# a minute or more each, with real processes: run by `make test-slow` (CI runs it)
pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]


def seeded_store(path, reference_nets) -> str:
    """A data directory holding the reference a job transfers from (written before the controller opens it)."""
    from jetfleet.controller.powertrain.artifacts import ModelRepo
    from jetfleet.controller.store import open_store

    store = open_store(path)
    modes, (tn, pn) = reference_nets
    ModelRepo(store).save("reference", NANO, "resnet18", "", modes, tn, pn, {}, (0.0, 0.0, 0.0), None)
    store.close()
    return str(path)


def controller(store: str, port: int) -> procs.Child:
    c = procs.spawn([*JETFLEET, "controller", "serve", "--listen", f"127.0.0.1:{port}", "--store", store],
                    stdout=procs.PIPE, stderr=procs.STDOUT)
    line = c.stdout.readline()
    assert "listening on" in line, line + c.stdout.read()
    return c


def agent(port: int, device_id: str, speed: float) -> procs.Child:
    return procs.spawn([*JETFLEET, "agent", "run", "--controller", f"127.0.0.1:{port}", "--device",
                        f"emulated:{NANO}:{len(device_id)}", "--id", device_id, "--speed", str(speed),
                        "--metrics-port", "0", "--metrics-address", "127.0.0.1"], stdout=procs.DEVNULL,
                       stderr=procs.DEVNULL)


def devices(port: int) -> dict[str, op.Device]:
    try:
        with OperatorClient(f"127.0.0.1:{port}", timeout_s=5) as c:
            return {d.device_id: d for d in c.call("ListDevices", op.ListDevicesRequest()).devices}
    except Exception:  # noqa: BLE001 - the controller is starting again
        return {}


def job(address: int | str, job_id: str) -> op.Job | None:
    """The job from the controller at ``address`` (a local port, or addresses), or None while none answers (it is
    starting again, or a takeover is under way)."""
    try:
        with OperatorClient(f"127.0.0.1:{address}" if isinstance(address, int) else address, timeout_s=5) as c:
            return c.call("GetJob", op.GetJobRequest(job_id=job_id))
    except Exception:  # noqa: BLE001 - the controller is starting again
        return None


def job_end(address: int | str, job_id: str, what: str = "the job to end") -> op.Job:
    """Wait (up to 300 s) for the job to be done, failed or cancelled; the job as it ended."""
    seen: list[op.Job] = []

    def ended() -> bool:
        j = job(address, job_id)
        seen[:] = [j] if j is not None else []
        return j is not None and j.state in ("done", "failed", "cancelled")

    wait_until(ended, 300, what)
    return seen[0]


def trained(metrics_address: str, device_id: str) -> int:
    """What the board says it trained (its own counter, read from its /metrics)."""
    text = urllib.request.urlopen(f"http://{metrics_address}/metrics", timeout=10).read().decode()
    m = re.search(r'jetfleet_agent_trained_minibatches_total\{device="' + re.escape(device_id)
                  + r'",workload="mobilenet_v3"\} ([0-9.e+]+)', text)
    return int(float(m.group(1))) if m else 0


def submit(port: int, minibatches: int, **target: str) -> str:
    with OperatorClient(f"127.0.0.1:{port}") as c:
        return c.call("SubmitJob", op.SubmitJobRequest(workload="mobilenet_v3", power_budget_w=11,
                                                       minibatches=minibatches, profile_modes=10, **target)).job_id


def test_a_stalled_agent_and_a_killed_controller_leave_the_board_trained_exactly_the_jobs_length(tmp_path,
                                                                                                 reference_nets):
    n = 6000
    store, port = seeded_store(tmp_path / "data", reference_nets), free_port()
    ctl = controller(store, port)
    board = agent(port, "nano-a", speed=100.0)
    wait_until(lambda: devices(port).get("nano-a", op.Device()).online, 60, "the agent online")
    metrics = devices(port)["nano-a"].metrics_address
    jid = submit(port, n, device_id="nano-a")
    wait_until(lambda: (job(port, jid) or op.Job()).minibatches_done > 1000, 120, "the job to train a while")

    # 1. the agent freezes until the controller takes its board for gone, then goes on
    board.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: not devices(port)["nano-a"].online, 30, "the controller to take the board offline")
    finally:
        board.send_signal(signal.SIGCONT)
    wait_until(lambda: (job(port, jid) or op.Job()).state == "running" and devices(port)["nano-a"].online, 60,
               "the job running again on the board")
    before_kill = job(port, jid).minibatches_done

    # 2. the controller dies mid-run (SIGKILL: nothing flushed) and comes back where the agent dials
    wait_until(lambda: (job(port, jid) or op.Job()).minibatches_done > before_kill + 500, 120, "more progress")
    ctl.kill()
    ctl.wait(30)
    ctl = controller(store, port)
    done = job_end(port, jid, "the job to end")
    assert done.state == "done" and done.minibatches_done == n, done.detail
    assert trained(metrics, "nano-a") == n, "the board trained minibatches the job counted once"   # the board's word
    assert done.board_minibatches == n and [r.ended for r in done.runs] == ["done"], done.runs   # one command
    assert done.verdict.judged and "again after a move" not in done.detail
    ctl.send_signal(signal.SIGTERM)
    board.send_signal(signal.SIGTERM)
    assert board.wait(30) == 0 and ctl.wait(30) == 0


def test_a_command_the_job_moved_away_from_is_stopped_on_its_board_when_the_board_comes_back(tmp_path,
                                                                                                reference_nets):
    n = 8000
    store, port = seeded_store(tmp_path / "data", reference_nets), free_port()
    ctl = controller(store, port)
    boards = {d: agent(port, d, speed=100.0) for d in ("nano-a", "nano-bb")}
    wait_until(lambda: all(d.online for d in devices(port).values()) and len(devices(port)) == 2, 60, "both online")
    addresses = {d: v.metrics_address for d, v in devices(port).items()}
    jid = submit(port, n, board_model=NANO)
    wait_until(lambda: (job(port, jid) or op.Job()).minibatches_done > 1000, 120, "the job to train a while")
    first = job(port, jid).device_id
    other = next(d for d in boards if d != first)
    frozen = boards[first]
    frozen.send_signal(signal.SIGSTOP)                   # the board stalls; the job moves to the other board
    try:
        wait_until(lambda: (job(port, jid) or op.Job()).device_id == other and job(port, jid).state == "running", 60,
                   "the job to move to the other board")
    finally:
        frozen.send_signal(signal.SIGCONT)              # ... and the first comes back with its old command running
    old = job(port, jid).runs[0]
    assert old.device_id == first and old.ended == "stopped"
    # the board that came back is told to cancel what nobody wants: it goes idle, far from that command's end
    wait_until(lambda: devices(port)[first].online and devices(port)[first].busy_command == "", 60,
               "the old command to stop on the board that came back")
    stopped_at = trained(addresses[first], first)
    done = job_end(port, jid, "the job to end")
    assert done.state == "done" and done.minibatches_done == n, done.detail
    assert trained(addresses[first], first) == stopped_at < n   # it never trained its old command to the end
    boards_total = trained(addresses[first], first) + trained(addresses[other], other)
    # the job's accounting is the boards': what both reported, the overlap of the move said in the summary
    assert done.board_minibatches <= boards_total and done.board_minibatches >= n
    for p in (*boards.values(), ctl):
        p.send_signal(signal.SIGTERM)
        assert p.wait(30) == 0
