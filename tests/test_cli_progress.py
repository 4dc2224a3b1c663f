"""Progress on long operations: a bar redrawn in place on a terminal, plain lines in a pipe (never a carriage
return), JSON lines with --output json; campaigns, reference training (its epochs streamed) and transfers."""

import io
import json

import numpy as np
import pytest
from click.testing import CliRunner

from jetfleet.cli.main import cli
from jetfleet.cli.progress import Progress
from jetfleet.client import connect

from .harness import LabThread


class Terminal(io.StringIO):
    def isatty(self):
        return True


class Pipe(io.StringIO):
    def isatty(self):
        return False


def test_a_terminal_gets_one_bar_redrawn_in_place():
    out = Terminal()
    p = Progress.for_output("campaign x", "text", stream=out)
    assert p.mode == "bar"
    for i in range(11):
        p.update(i, 10, "", eta_s=10 - i)
    p.note("paused")
    p.update(10, 10)
    p.close()
    text = out.getvalue()
    assert text.count("\r") >= 12 and text.count("\n") == 2       # the note's line, and the bar's last state
    assert "[########################] 10/10 (100%)" in text and "paused\n" in text


def test_a_pipe_gets_a_line_per_tenth_and_a_heartbeat_never_a_carriage_return():
    now = [0.0]
    out = Pipe()
    p = Progress.for_output("campaign x", "text", stream=out)
    p.clock = lambda: now[0]
    for i in range(101):
        p.update(i, 100)
        now[0] += 0.01
    for _ in range(30):                      # stuck at 100/100 for 30 s: a line every 10 s says it is alive
        now[0] += 1.0
        p.update(100, 100)
    p.close()
    text = out.getvalue()
    assert "\r" not in text and "\x1b" not in text
    lines = text.splitlines()
    assert [ln.split()[2] for ln in lines[:11]] == [f"{i * 10}/100" for i in range(11)]
    assert len(lines) == 11 + 3


def test_json_progress_is_one_object_per_line():
    out = Pipe()
    p = Progress.for_output("train", "json", stream=out)
    p.update(1, 4, "loss 0.3")
    p.update(4, 4, "loss 0.1", eta_s=0)
    objs = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [o["progress"]["done"] for o in objs] == [1, 4] and objs[-1]["progress"]["fraction"] == 1.0


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lt = LabThread(str(tmp_path_factory.mktemp("progress")), ["orin-nano"]).start()
    yield lt
    lt.close()


def run(lab, *args):
    return CliRunner().invoke(cli, list(args), env={"JETFLEET_CONTROLLER": lab.address})


def test_profile_start_wait_in_a_pipe_says_its_id_first_then_lines(lab):
    r = run(lab, "profile", "start", "--workload", "lstm", "--device", "orin-nano-0", "--modes", "random:30", "--wait")
    assert r.exit_code == 0, r.output
    assert "\r" not in r.output
    err = r.stderr.splitlines()
    cid = err[0].split()[1]
    assert err[0] == f"campaign {cid} started: 30 modes of lstm on orin-nano-0"
    assert err[1].startswith(f"campaign {cid}: ") and err[-1].startswith(f"campaign {cid}: 30/30 (100%)")
    assert f"campaign {cid}: lstm on orin-nano-0" in r.stdout and "30/30 measured" in r.stdout


def test_profile_start_wait_in_json_keeps_stderr_machine_readable(lab):
    r = run(lab, "profile", "start", "--workload", "lstm", "--device", "orin-nano-0", "--modes", "random:20", "--seed",
            "3", "--wait", "--output", "json")
    assert r.exit_code == 0, r.output
    lines = [json.loads(line) for line in r.stderr.splitlines()]
    cid = lines[0]["campaign_id"]
    assert lines[0]["note"].startswith(f"campaign {cid} started")
    assert lines[-1]["progress"]["fraction"] == 1.0
    assert json.loads(r.stdout)["campaign_id"] == cid and json.loads(r.stdout)["status"] == "done"


def test_training_streams_its_epochs_and_a_transfer_its_passes(lab):
    with connect(lab.address) as c:
        for workload, k in (("resnet18", 60), ("mobilenet_v3", 30)):
            camp = c.create_campaign(workload, device_id="orin-nano-0", modes=f"random:{k}", seed=1)
            c.wait_campaign(camp.campaign_id, poll_s=0.05)
    r = run(lab, "model", "train-reference", "--board-model", "orin-nano", "--workload", "resnet18", "--epochs", "8",
            "--output", "json")
    assert r.exit_code == 0, r.output
    steps = [json.loads(line)["progress"] for line in r.stderr.splitlines()]
    assert steps[0]["done"] == 1 and steps[-1]["done"] == steps[-1]["total"] == 8
    assert all("loss" in s["note"] for s in steps)
    assert json.loads(r.stdout)["kind"] == "reference"
    r = run(lab, "model", "transfer", "--board-model", "orin-nano", "--workload", "mobilenet_v3",
            "--reference-board-model", "orin-nano")
    assert r.exit_code == 0, r.output
    assert "\r" not in r.output
    notes = r.stderr
    for phase in ("transfer: time (1/4)", "transfer: power (2/4)", "baseline (3/4)", "baseline (4/4)"):
        assert phase in notes, (phase, notes)
    assert "transfer for mobilenet_v3 on orin-nano" in r.stdout


def test_the_quick_evaluation_counts_its_steps_exactly(monkeypatch, tmp_path):
    """Its progress plan (how many steps) is computed before it runs: it must reach its end exactly. The heavy
    parts are replaced by their results' shape (the evaluation's figures are the slow tests')."""
    from jetfleet.research.powertrain import evaluate, report

    def fake_refs(g):
        return None

    def fake_score(refs, target, k, repeats, strategy="random", trials=None):
        idx = np.arange(k)
        for _ in range(repeats):
            if trials is not None:
                trials.append(evaluate.Trial(idx, target.time_ms, target.power_w, target.time_ms, target.power_w))
        return evaluate.TransferScore([1.0] * repeats, [2.0] * repeats, [1.0] * repeats, [2.0] * repeats)

    class Net:
        def predict(self, x):
            return np.ones(len(x))

    monkeypatch.setattr(report, "train_references", lambda g: evaluate.References(Net(), Net()))
    monkeypatch.setattr(report, "score_transfer", fake_score)
    seen = []
    path = report.run_report(tmp_path, quick=True, progress=lambda i, n, what: seen.append((i, n, what)))
    assert path.is_file()
    total = seen[0][1]
    assert [i for i, _, _ in seen[:-1]] == list(range(1, total + 1))   # every step counted, none beyond the plan
    assert seen[-1] == (total, total, "report written")
