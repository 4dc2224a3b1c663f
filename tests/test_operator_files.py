"""Issue 29: every file the CLI takes is read with a bound and may be standard input (``-``); the files it writes
get their folders (Prometheus's targets/) and the lab's PKI directory is private whatever the umask."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from jetfleet.cli.common import MAX_SMALL_FILE_BYTES
from jetfleet.cli.main import cli
from jetfleet.research.powertrain.evaluate import csv_text, twin_truth
from jetfleet.shared.errors import InvalidArgument
from jetfleet.shared.files import read_bounded
from jetfleet.shared.tls import TlsFiles, init_ca, issue

from .harness import LabThread

UNREACHABLE = "127.0.0.1:1"   # nothing listens there: a command that reads its file first never gets further


class Fifo:
    """A named pipe fed ``total`` bytes of ``pattern`` by a thread: a file whose size ``stat`` reports as 0."""

    def __init__(self, path: Path, pattern: bytes, total: int) -> None:
        os.mkfifo(path)
        self.path, self.pattern, self.total, self.written = path, pattern, total, 0
        self.thread = threading.Thread(target=self._feed, daemon=True)
        self.thread.start()

    def _feed(self) -> None:
        block = self.pattern * (65536 // len(self.pattern))
        try:
            with open(self.path, "wb") as f:
                while self.written < self.total:
                    f.write(block)
                    self.written += len(block)
        except BrokenPipeError:   # the reader stopped at its bound and closed the pipe
            pass

    def close(self) -> None:
        try:   # a reader that never opened the pipe: open it once so the writer's open returns
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
            os.close(fd)
        except OSError:
            pass
        self.thread.join(10)
        assert not self.thread.is_alive()


@pytest.fixture
def fifo(tmp_path):
    made: list[Fifo] = []

    def make(pattern: bytes, total: int) -> Fifo:
        made.append(Fifo(tmp_path / f"pipe{len(made)}", pattern, total))
        return made[-1]

    yield make
    for f in made:
        f.close()


def test_a_trace_that_never_ends_is_refused_at_its_bound_not_read_to_the_end(fifo):
    # /dev/zero was read without limit (7.1 GB in 10 s): stat says 0 bytes for it and for a pipe
    pipe = fifo(b"0.5\n", 4 * MAX_SMALL_FILE_BYTES)
    r = CliRunner().invoke(cli, ["job", "submit", "--workload", "resnet18", "--device", "d", "--power-budget", "30W",
                                 "--minibatches", "100", "--with-inference", "lstm", "--trace", str(pipe.path),
                                 "--latency-budget", "50ms", "--controller", UNREACHABLE])
    assert r.exit_code == 3, r.output
    assert f"more than {MAX_SMALL_FILE_BYTES} bytes" in r.output and "trace" in r.output
    assert pipe.written < 2 * MAX_SMALL_FILE_BYTES   # it stopped reading near the bound


def test_dev_zero_as_a_modes_file_is_refused_with_its_bound():
    # a character device is not a regular file: `--modes /dev/zero` is refused as no modes file at all
    r = CliRunner().invoke(cli, ["profile", "start", "--workload", "resnet18", "--device", "d", "--modes", "/dev/zero",
                                 "--controller", UNREACHABLE])
    assert r.exit_code == 3 and "no such file" in r.output, r.output
    with pytest.raises(InvalidArgument, match="more than 1000 bytes"):
        read_bounded("/dev/zero", "trace", 1000)


def test_tls_config_and_metrics_auth_files_are_read_with_a_bound(fifo, tmp_path):
    from jetfleet.client.settings import read_config
    from jetfleet.shared.metrics_http import MetricsHttpConfig

    big = tmp_path / "ca.crt"
    with open(big, "wb") as f:
        f.truncate(64 << 30)   # 64 GiB, sparse: read whole, it would take the machine's memory
    with pytest.raises(InvalidArgument, match="TLS file .* more than"):
        TlsFiles(big).read()
    conf = fifo(b"# comment\n", 1 << 20)
    with pytest.raises(InvalidArgument, match="config file .* more than"):
        read_config(conf.path)
    auth = tmp_path / "auth"
    auth.write_text("prometheus:" + "p" * 5000 + "\n")
    with pytest.raises(InvalidArgument, match="metrics auth file .* more than"):
        MetricsHttpConfig(auth_file=str(auth)).credentials()


def test_dash_reads_a_trace_from_standard_input():
    r = CliRunner().invoke(cli, ["twin", "concurrent", "--board", "agx-orin", "--training", "resnet18", "--inference",
                                 "mobilenet_v3", "--trace", "-", "--latency-budget", "500ms", "--output", "json"],
                           input="".join(f"{i * 0.1:.1f}\n" for i in range(1, 200)))
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["served"] > 0


@pytest.fixture
def lab(tmp_path):
    lt = LabThread(str(tmp_path / "data"), ["orin-nano"]).start()
    yield lt
    lt.close()


def test_profiles_import_and_a_modes_file_from_standard_input_and_targets_into_a_new_folder(lab, tmp_path, monkeypatch):
    run = lambda *a, input=None: CliRunner().invoke(cli, [*a, "--controller", lab.address], input=input)  # noqa: E731
    rows = "".join(csv_text(twin_truth("orin-nano", "resnet18")).splitlines(keepends=True)[:21])   # header + 20
    r = run("profiles", "import", "-", "--output", "json", input=rows)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["rows"] == 20
    (device,) = [d.device_id for d in lab.lab.agents]
    r = run("profile", "start", "--workload", "resnet18", "--device", device, "--modes", "-", "--output", "json",
            input="# two modes\nMAXN\n2/499.2/306/665.6\n")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["total"] == 2 and json.loads(r.stdout)["modes"] == "file:stdin"
    # a folder that does not exist yet (Prometheus's file_sd targets/): created, not `internal error`
    monkeypatch.chdir(tmp_path)
    r = run("prometheus", "targets", "--out", "targets/agents.json")
    assert r.exit_code == 0, r.output
    assert isinstance(json.loads((tmp_path / "targets/agents.json").read_text()), list)
    assert "agents written to targets/agents.json" in r.output


@pytest.mark.parametrize("umask", [0o000, 0o022])
def test_the_pki_directory_is_private_whatever_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        pki = tmp_path / "lab" / "pki"
        init_ca(pki)
        assert stat.S_IMODE(pki.stat().st_mode) == 0o700   # it holds ca.key
        os.chmod(pki, 0o777)   # one an earlier release made: issuing closes it
        issue(pki, "agent", "agx-orin-0")
        assert stat.S_IMODE(pki.stat().st_mode) == 0o700
        assert stat.S_IMODE((pki / "ca.key").stat().st_mode) == 0o600
    finally:
        os.umask(old)


def test_an_exported_campaign_imported_back_adds_nothing(lab, tmp_path):
    run = lambda *a: CliRunner().invoke(cli, [*a, "--controller", lab.address])  # noqa: E731
    (device,) = [d.device_id for d in lab.lab.agents]
    r = run("profile", "start", "--workload", "lstm", "--device", device, "--modes", "random:4", "--minibatches", "5",
            "--wait", "--output", "json")
    assert r.exit_code == 0, r.output
    out = tmp_path / "campaign.csv"
    assert run("profiles", "export", "--device", device, "--workload", "lstm", "-o", str(out)).exit_code == 0
    for _ in range(2):   # the campaign's own rows, then the rows of the first import: one set
        r = run("profiles", "import", str(out), "--output", "json")
        assert r.exit_code == 0, r.output
        assert (json.loads(r.stdout)["rows"], json.loads(r.stdout)["already_stored"]) == (0, 4)
    assert "4 rows were stored before" in run("profiles", "import", str(out)).output
    lines = out.read_text().splitlines()
    cells = lines[1].split(",")
    cells[6] = f"{float(cells[6]) * 1.5:.6g}"   # one observation that differs: that one is new
    out.write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n")
    r = run("profiles", "import", str(out), "--output", "json")
    assert (json.loads(r.stdout)["rows"], json.loads(r.stdout)["already_stored"]) == (1, 3)
    r = run("profiles", "export", "--device", device, "--workload", "lstm")
    assert len(r.stdout.strip().splitlines()) == 1 + 5


def test_a_paused_campaign_shows_no_eta_and_a_roofline_plot_of_nothing_says_what_to_measure(lab, tmp_path):
    from jetfleet.client import OperatorClient

    (device,) = [d.device_id for d in lab.lab.agents]
    with OperatorClient(lab.address) as c:
        camp = c.create_campaign("lstm", device_id=device, modes="random:1000", minibatches=5, seed=3)
        lab.wait(lambda: c.get_campaign(camp.campaign_id).done >= 2, 60, "two modes measured (an ETA is known)")
        running = c.get_campaign(camp.campaign_id)
        c.pause_campaign(camp.campaign_id)
        paused = c.get_campaign(camp.campaign_id)
    assert running.eta_s is not None and running.status == "running"
    assert paused.status == "paused" and paused.done < paused.total and paused.eta_s is None
    r = CliRunner().invoke(cli, ["profile", "ls", "--controller", lab.address])
    row = next(ln for ln in r.output.splitlines() if ln.startswith(camp.campaign_id))
    assert row.split()[-1] == "-" and "paused" in row
    assert "ETA" not in CliRunner().invoke(cli, ["profile", "show", camp.campaign_id, "--controller", lab.address]).output
    # a roofline plot with nothing stored: what to measure, not `min() arg is an empty sequence`
    r = CliRunner().invoke(cli, ["roofline", "--board-model", "orin-nano", "--workload", "resnet18", "--phase",
                                 "inference", "--minibatch-size", "1", "--plot", str(tmp_path / "n.png"),
                                 "--controller", lab.address])
    assert r.exit_code == 7 and "nothing to plot" in r.output and "--measure" in r.output, r.output
    r = CliRunner().invoke(cli, ["roofline", "--board-model", "orin-nano", "--controller", lab.address])
    assert r.exit_code == 0 and "no roofline of orin-nano is stored yet" in r.output
