"""examples/own-training: the operator's plain PyTorch script on scikit-learn's digits, run as its own process
against a lab's board (the real agent code on an emulated AGX Xavier, its session socket from `lab up`'s
--session-dir): it learns, the board counts its steps, and each epoch's energy window comes from the twin's rails
for that model."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from . import procs
from .harness import LabThread

ROOT = Path(__file__).resolve().parents[1]


def test_the_example_trains_on_a_lab_board_and_reports_energy_per_epoch(tmp_path):
    pytest.importorskip("sklearn", reason="the example's dataset ships with scikit-learn (the dev extra)")
    lab = LabThread(str(tmp_path / "store"), ["agx-xavier"])
    lab.lab.session_dir = str(tmp_path / "sessions")
    lab.start()
    try:
        (agent,) = lab.lab.agents
        sock = tmp_path / "sessions" / f"{agent.device_id}.sock"
        lab.wait(sock.exists, 10, "the board's session socket")
        out = procs.run([sys.executable, str(ROOT / "examples" / "own-training" / "train.py"), "--epochs", "4",
                         "--socket", str(sock)], timeout=180)
        assert out.returncode == 0, out.stderr[-3000:]
        sessions = agent.link.training_sessions.sessions
        (s,) = sessions.values()
    finally:
        lab.close()
    epochs = re.findall(r"epoch \d+: test accuracy ([\d.]+); board ([\d.e-]+) s, ([\d.e-]+) J, mean ([\d.]+) W", out.stdout)
    assert len(epochs) == 4, out.stdout
    assert float(epochs[-1][0]) > 0.9                            # real learning on real data
    assert s.steps == 4 * 44 and s.ended == "closed"             # 1,437 training digits / 32 per step, each epoch
    assert s.workload == "digits-mlp" and agent.board.emulated_workload("digits-mlp") is not None
    for _acc, seconds, joules, watts in epochs:                  # the twin's rails while the user's steps ran
        assert float(joules) == pytest.approx(float(seconds) * float(watts), rel=0.02)
        assert 5.0 < float(watts) < 60.0
