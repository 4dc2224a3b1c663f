"""Every benchmark runs: each bench/ script at tiny sizes (seconds), so none rots again (bench/jobs.py once imported
names bench/fleet.py no longer had and read a port with a pattern that never matched). Each runs as `make bench`
runs it, in a process of its own (tests/procs.py), and must end well and print its figures; the figures themselves
are not judged here (speed targets live in bench/, never in timed assertions)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from . import procs

ROOT = Path(__file__).resolve().parents[1]

# script and its arguments at tiny sizes -> what its output must hold (a figure's line, with its limit and ratio
# where the script prints one)
SMOKE = {
    "boards": (["--calls", "20", "--every", "400"], ["real backend sample", "ratio to plain", "twin measures"]),
    "cli": (["1"], ["jetfleet --help", "limit 2.0x"]),
    "metrics": (["20", "--scrapes", "4"], ["agent /metrics", "controller /metrics with 20 boards"]),
    "powertrain": (["--epochs", "1", "--transfer-epochs", "2", "--repeat", "1"],
                   ["reference training, 4,368 modes, 1 epochs", "ratio", "Pareto front + choice"]),
    "lab": (["--small", "random:3", "--large", "random:6", "--speeds", "inf"], ["random:3", "random:6", "modes in"]),
    "campaign": (["--slow-modes", "3", "--fast-modes", "4", "--repeat", "1", "--backends", "sqlite"],
                 ["sqlite, slow fsync, 3 modes", "ratio", "limit", "minimal campaign over the same wire",
                  "twin profile with another core busy", "jetfleet's CPU a mode: agent process"]),
    "fleet": (["--agents", "12", "--big", "15", "--window", "0.3", "--rounds", "1", "--mode-sets", "3",
               "--load-procs", "1", "--controller-cpus", "0", "--load-cpus", "0", "--max-hellos", "4",
               "--connect-rate", "1000"],
              ["N=12, round 1", "ratio", "mode set at N=12",
               "N=15 (controller pinned to CPU 0, agents dialling at 1000 a second): 15/15 online", "turned away"]),
    "jobs": (["--jobs", "1", "--minibatches", "40", "--speed", "1000", "--epochs", "2", "--idle-s", "0.5"],
             ["1/1 done", "CPU s per job", "calibrated transfer"]),
    "operator": (["--streaming", "6", "--jobs", "1", "--seconds", "1", "--predicts", "1", "--epochs", "2",
                  "--speed", "1000"],
                 ["6 streaming + 1 job agents online", "devices ls", "job show", "model ls", "model predict", "ratio"]),
    "coverage": (["--workloads", "mobilenet_v3", "--epochs", "1"],
                 ["first 210 in grid order", "complete grid", "factor needed beyond a knob the fit saw move"]),
    "takeover": (["--kills", "1", "--lease-ttl", "1"],
                 ["lease taken by the standby: p50", "ratio", "operator change served again"]),
    "own_training": (["--modes", "10", "--minibatches", "800", "--reference-epochs", "1"],
                     ["online profiling: 200 of its own steps", "budget 12 W, k=10"]),
    "session": (["--calls", "500", "--repeat", "1"], ["step() with an agent", "limit 50 us, ratio", "% of it"]),
    "launch": (["--runs", "1", "--flood-lines", "2000"], ["launch -> first step", "process group gone", "lines kept"]),
    "scheduler": (["--jobs", "3,30", "--boards", "12", "--queue", "30", "--racks", "2", "--highs-max", "0"],
                  ["3 jobs", "exhaustive optimum", "30 jobs, 2 racks", "scheduling pass", "ratio"]),
}


def run_bench(name: str, args: list[str], tmp_path: Path) -> str:
    out = procs.run([sys.executable, str(ROOT / "bench" / f"{name}.py"), *args], timeout=240, cwd=tmp_path)
    assert out.returncode == 0, f"bench/{name}.py {' '.join(args)} failed:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}"
    return out.stdout


@pytest.mark.parametrize("name", sorted(SMOKE))
def test_each_benchmark_runs_at_tiny_sizes(name, tmp_path):
    args, expected = SMOKE[name]
    text = run_bench(name, args, tmp_path)
    missing = [e for e in expected if e not in text]
    assert not missing, f"bench/{name}.py printed none of {missing}:\n{text[-3000:]}"


def test_the_tx2_converter_runs_on_the_shared_measurements(shared_data, tmp_path):
    run_bench("convert_tx2", [str(shared_data / "tx2-xception"), str(tmp_path / "out")], tmp_path)
    made = sorted((tmp_path / "out").glob("tx2-xception_*.csv"))
    assert made and made[0].read_text().splitlines()[0].startswith("board_model,")


def test_every_bench_script_is_smoke_tested():
    """A new bench/ script gets its smoke run here (fleet_load.py is bench/fleet.py's load and campaign_minimal.py
    bench/campaign.py's minimal campaign, each run by its script)."""
    scripts = {p.stem for p in (ROOT / "bench").glob("*.py")} - {"__init__", "fleet_load", "campaign_minimal"}
    assert scripts == set(SMOKE) | {"convert_tx2", "gpu_check"}


def test_gpu_check_measures_on_cuda_or_says_there_is_none_and_exits_3(tmp_path):
    """`make gpu-check` (bench/gpu_check.py): on a machine without CUDA it measures nothing, says why and exits 3;
    with CUDA it prints the session's step times against CUDA events for each workload (tiny sizes here)."""
    import torch

    out = procs.run([sys.executable, str(ROOT / "bench" / "gpu_check.py"), "--steps", "10", "--warmup", "2",
                     "--workloads", "digits-mlp,lstm"], timeout=240, cwd=tmp_path)
    if not torch.cuda.is_available():
        assert out.returncode == 3, out.stderr[-2000:]
        assert "gpu-check: no CUDA device here" in out.stderr and "nothing was measured" in out.stderr
        assert out.stdout == ""
        return
    assert out.returncode == 0, out.stderr[-4000:]
    assert "CUDA ev." in out.stdout and "lstm" in out.stdout, out.stdout
