"""What surprised a newcomer, each fixed: an address without a port, a deadline without a unit, an epoch length
that defaulted to one minibatch, a CSV typo creating a board model, modes-file errors without line numbers, a
campaign waiting silently for a board model none of whose boards is online, raw epoch timestamps, overlapping
plot labels."""

import json
import re

import numpy as np
import pytest
from click.testing import CliRunner

from jetfleet.cli.common import controller_address
from jetfleet.cli.main import cli
from jetfleet.client import connect

from .harness import LabThread

HEADER = "board_model,workload,cpu_cores,cpu_mhz,gpu_mhz,mem_mhz,minibatch_time_ms,power_w"


@pytest.fixture
def lab(tmp_path):
    lt = LabThread(str(tmp_path / "data"), ["orin-nano"]).start()
    yield lt
    lt.close()


def run(lab, *args):
    return CliRunner().invoke(cli, list(args), env={"JETFLEET_CONTROLLER": lab.address})


def test_a_controller_address_without_a_port_means_50051():
    r = CliRunner().invoke(cli, ["config", "show", "--controller", "127.0.0.1", "--output", "json"])
    assert json.loads(r.stdout)["settings"]["controller"] == {"value": "127.0.0.1:50051", "source": "flag"}
    r = CliRunner().invoke(cli, ["config", "show", "--output", "json"], env={"JETFLEET_CONTROLLER": "ctl.lab"})
    assert json.loads(r.stdout)["settings"]["controller"]["value"] == "ctl.lab:50051"
    assert controller_address("10.0.0.5") == "10.0.0.5:50051"      # `agent run --controller 10.0.0.5`
    r = CliRunner().invoke(cli, ["devices", "ls", "--controller", "127.0.0.1:http"])
    assert r.exit_code == 3 and "the port must be a number 1..65535" in r.stderr


def test_a_deadline_needs_a_unit_and_an_epoch_its_length(lab):
    r = run(lab, "job", "submit", "--workload", "lstm", "--device", "orin-nano-0", "--deadline", "2", "--minibatches", "99")
    assert r.exit_code == 3 and "'2' has no unit: write 2s, 2m or 2h" in r.stderr
    assert run(lab, "job", "ls", "--output", "json").stdout.strip() == "[]"      # nothing was submitted
    r = run(lab, "optimize", "orin-nano-0", "--workload", "lstm", "--deadline", "2h")
    assert r.exit_code == 2 and "give --minibatches-per-epoch" in r.stderr
    r = run(lab, "job", "submit", "--workload", "lstm", "--device", "orin-nano-0", "--power-budget", "9W", "--epochs", "3")
    assert r.exit_code == 2 and "--epochs needs --minibatches-per-epoch" in r.stderr


def test_a_typo_in_an_imported_name_is_refused_with_a_suggestion_and_a_new_name_needs_a_flag(lab, tmp_path):
    typo = tmp_path / "typo.csv"
    typo.write_text(f"{HEADER}\norin-nano,resnet18,4,960,408,2133,210,9.5\norin-nan,resnet18,4,960,408,2133,200,9\n")
    r = run(lab, "profiles", "import", str(typo))
    assert r.exit_code == 3 and "typo.csv line 3: board model 'orin-nan' is unknown to the controller" in r.stderr
    assert "did you mean 'orin-nano'?" in r.stderr and "--new orin-nan" in r.stderr
    r = run(lab, "profiles", "import", str(typo), "--new", "resnet81")   # allowing another name lets no typo through
    assert r.exit_code == 3
    assert lab.do(lambda: lab.lab.controller.store.query_profiles()) == []
    wl = tmp_path / "wl.csv"
    wl.write_text(f"{HEADER}\norin-nano,resnet81,4,960,408,2133,210,9.5\n")
    r = run(lab, "profiles", "import", str(wl), "--output", "json")
    err = json.loads(r.stderr.splitlines()[-1])["error"]
    assert (err["field"], r.exit_code) == ("workload", 3) and "did you mean 'resnet18'?" in err["message"]
    new = tmp_path / "new.csv"
    new.write_text(f"{HEADER}\njetson-x,squeeze,4,960,408,2133,210,9.5\njetson-x,squeeze,2,960,408,2133,300,7\n")
    r = run(lab, "profiles", "import", str(new), "--new", "jetson-x", "--new", "squeeze")
    assert r.exit_code == 0, r.output
    assert "warning: new board model 'jetson-x' created by this import" in r.stderr
    assert "warning: new workload 'squeeze' created by this import" in r.stderr
    more = tmp_path / "more.csv"
    more.write_text(f"{HEADER}\njetson-x,squeeze,4,960,408,2133,205,9.4\n")
    r = run(lab, "profiles", "import", str(more))                 # known now: no flag, no warning
    assert r.exit_code == 0 and "warning" not in r.stderr
    r = run(lab, "profiles", "import", str(typo), "--allow-new", "--output", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["new_board_models"] == ["orin-nan"]


def test_modes_file_errors_name_their_line(lab, tmp_path):
    f = tmp_path / "modes.txt"
    f.write_text("# my modes\n6/1510.4/624.75/2133\n\n4/960/408/2133   # 7W by hand\n4/960/999/2133\n")
    r = run(lab, "profile", "start", "--workload", "lstm", "--device", "orin-nano-0", "--modes", str(f))
    assert r.exit_code == 3 and "modes file modes.txt line 5: '4/960/999/2133': gpu_mhz=999" in r.stderr, r.stderr
    f.write_text("# my modes\n6/1510.4/624.75/2133\n\n4/960/408/2133\n7W\n")
    r = run(lab, "profile", "start", "--workload", "lstm", "--device", "orin-nano-0", "--modes", str(f))
    assert r.exit_code == 3 and "modes file modes.txt line 5: '7W' repeats line 4 ('4/960/408/2133' = " in r.stderr
    assert run(lab, "profile", "ls", "--output", "json").stdout.strip() == "[]"


def test_a_campaign_for_a_board_model_with_none_online_says_it_waits(lab):
    r = run(lab, "profile", "start", "--workload", "lstm", "--board-model", "tx2", "--modes", "random:3", "--output",
            "json")
    assert r.exit_code == 0, r.output
    notes = [json.loads(line) for line in r.stderr.splitlines()]
    cid = notes[0]["campaign_id"]
    assert any("waiting for an online tx2 board (none has ever connected)" in n["note"] for n in notes)
    assert "waiting for an online tx2 board" in run(lab, "profile", "show", cid).stdout
    lab.do(lambda: lab.lab.add_agent("tx2"))
    with connect(lab.address) as c:
        done = c.wait_campaign(cid, poll_s=0.05)
    assert done.status == "done" and done.done == 3 and done.waiting == ""


def test_devices_show_prints_dates_not_epoch_seconds(lab):
    r = run(lab, "devices", "show", "orin-nano-0")
    assert re.search(r"last seen 20\d\d-\d\d-\d\d \d\d:\d\d:\d\d \(\d+ s ago\)", r.stdout), r.stdout
    assert re.search(r"first seen: 20\d\d-\d\d-\d\d", r.stdout) and not re.search(r"\d{10}\.\d", r.stdout)
    d = json.loads(run(lab, "devices", "show", "orin-nano-0", "--output", "json").stdout)
    assert isinstance(d["last_seen_s"], float) and d["last_seen_s"] > 1e9    # scripts keep seconds


@pytest.mark.parametrize("lo_ms,hi_ms", [(10, 2000), (50, 90), (55, 62), (57, 58), (80, 400), (1, 100000), (900, 60000)])
def test_pareto_plot_tick_labels_never_overlap(lo_ms, hi_ms):
    import matplotlib.pyplot as plt

    from jetfleet.research.plots import front_figure

    rng = np.random.default_rng(0)
    t = np.exp(rng.uniform(np.log(lo_ms), np.log(hi_ms), 300))
    rows = [{"time_ms": a, "power_w": b, "pareto": i < 20} for i, (a, b) in enumerate(zip(t, rng.uniform(5, 40, 300)))]
    fig = front_figure(rows, "t")
    try:
        ax = fig.axes[0]
        fig.canvas.draw()
        x0, x1 = ax.get_xlim()
        labels = [lab for lab in ax.get_xticklabels(which="both")
                  if lab.get_visible() and lab.get_text() and x0 <= lab.get_position()[0] <= x1]
        boxes = sorted((lab.get_window_extent() for lab in labels), key=lambda b: b.x0)
        assert len(boxes) >= 2, [lab.get_text() for lab in labels]
        assert all(a.x1 + 2 <= b.x0 for a, b in zip(boxes, boxes[1:])), [lab.get_text() for lab in labels]
        assert all("times" not in lab.get_text() for lab in labels)     # plain numbers, not 5x10^1
    finally:
        plt.close(fig)
