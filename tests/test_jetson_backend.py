"""The real backend on fixture trees laid out like real boards (sysfs route; nvpmodel in test_nvpmodel.py)."""

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from jetfleet.agent.device.jetson import JetsonBoard, JetsonOptions, detect_model
from jetfleet.shared.catalog import PowerMode, get_catalog
from jetfleet.shared.errors import DeviceError, InvalidArgument

from . import procs
from .jetson_trees import LAYOUTS, build_tree, install_tools, snapshot

pytestmark = pytest.mark.boards


@pytest.fixture(params=sorted(LAYOUTS))
def board(request, tmp_path):
    lay = build_tree(tmp_path, request.param)
    return JetsonBoard(tmp_path, JetsonOptions(command_path=install_tools(tmp_path))), lay, tmp_path


def test_describe_finds_model_software_and_the_gpu_node_by_its_table(board):
    b, lay, _ = board
    info = b.describe()
    assert info.model == lay.model and not info.emulated
    assert info.software["l4t"].startswith(lay.l4t[3:5])
    assert b.gpu.endswith(lay.gpu_node)  # discovered, not the decoy nvdec node
    # the fixture boards report the built-in tables, so the board's own catalog equals the model's
    assert info.catalog.size == get_catalog(lay.model).size and info.catalog.maxn == get_catalog(lay.model).maxn


EXPECTED_SOFTWARE = {  # (l4t, jetpack, cuda) per layout: JetPack from dpkg where the image has the package
    "orin-jp5": ("35.4.1", "5.1.2", "11.4.315"), "orin-jp6": ("36.3.0", "6.0", "12.2.140"),
    "xavier-jp4": ("32.7.1", "4.6.1", "10.2.300"), "xavier-jp5": ("35.4.1", "5.1.2", "11.4.315"),
    "orin-nano-jp6": ("36.3.0", "6.0", "12.2.140"), "xavier-nx-jp5": ("35.4.1", "5.1.2", "11.4.315")}


def test_describe_reports_l4t_jetpack_cuda_torch_and_jetfleet_versions(board):
    b, lay, root = board
    sw = b.describe().software
    assert (sw["l4t"], sw["jetpack"], sw["cuda"]) == EXPECTED_SOFTWARE[lay.name]
    assert sw["jetfleet"] and sw["kernel"].endswith("-tegra")
    try:
        import importlib.metadata as md
        assert sw.get("torch") == md.version("torch")
    except md.PackageNotFoundError:  # the boards' test venvs have no torch: the key is left out
        assert "torch" not in sw


def test_an_image_without_the_jetpack_package_or_cuda_reports_what_it_has(tmp_path):
    build_tree(tmp_path, "orin-jp5")
    (tmp_path / "var/lib/dpkg/status").unlink()
    (tmp_path / "usr/local/cuda/version.json").unlink()
    sw = JetsonBoard(tmp_path, JetsonOptions(command_path=install_tools(tmp_path))).describe().software
    assert sw["jetpack"] == "5.1.2" and "cuda" not in sw   # L4T 35.4.1 shipped with JetPack 5.1.2


def test_read_apply_and_confirm_writes_what_the_kernel_expects(board):
    b, lay, root = board
    cat = b.catalog
    target = PowerMode(2, cat.cpu_mhz[5], cat.gpu_mhz[2], cat.mem_mhz[0])
    assert b.apply_mode(target) == target
    assert b.read_mode() == target
    cpu = root / "sys/devices/system/cpu"
    khz = str(int(round(target.cpu_mhz * 1000)))
    for c in range(max(cat.cores)):
        online = c < 2
        if c:
            assert (cpu / f"cpu{c}/online").read_text().strip() == ("1" if online else "0")
        if online:
            assert (cpu / f"cpu{c}/cpufreq/scaling_min_freq").read_text().strip() == khz
            assert (cpu / f"cpu{c}/cpufreq/scaling_max_freq").read_text().strip() == khz
    df = root / "sys/class/devfreq" / lay.gpu_node
    hz = str(int(round(target.gpu_mhz * 1e6)))
    assert (df / "min_freq").read_text().strip() == (df / "max_freq").read_text().strip() == hz
    emc = root / "sys/kernel/debug/bpmp/debug/clk/emc"
    assert (emc / "rate").read_text().strip() == str(int(round(target.mem_mhz * 1e6)))
    assert (emc / "mrq_rate_locked").read_text().strip() == "1"
    assert (root / "sys/devices/platform/pwm-fan/hwmon/hwmon3/pwm1").read_text().strip() == "255"
    # and back up to MAXN: raising writes max before min, so min never exceeds max
    assert b.apply_mode(cat.maxn) == cat.maxn


def test_sample_reads_rails_in_watts_from_the_rail_map(board):
    b, lay, root = board
    s = b.sample()
    assert set(s.rails_w) == set(lay.rails)  # "sum of shunt voltages" is not a rail
    for label, (mv, ma) in lay.rails.items():
        assert s.rails_w[label] == pytest.approx(mv * ma / 1e6, rel=1e-3)
    expected_total = sum(s.rails_w[r.label] for r in b.catalog.rails if r.in_total)
    assert s.total_w == pytest.approx(expected_total)
    assert s.temps_c == {"cpu": 45.0, "gpu": 45.5, "soc0": 46.0, "tj": 46.5}  # off cv0 and the PMIC die left out
    assert s.gpu_util == pytest.approx(0.37)
    assert s.cores_online == 1 + sum((p / "online").read_text().strip() == "1" for p in root.glob("sys/devices/system/cpu/cpu*")
                                     if (p / "online").exists())


def test_mode_outside_the_catalog_writes_nothing(board):
    b, _, root = board
    before = snapshot(root)
    with pytest.raises(InvalidArgument, match="gpu_mhz"):
        b.apply_mode(PowerMode(2, b.catalog.cpu_mhz[0], 1.0, b.catalog.mem_mhz[0]))
    assert snapshot(root) == before


def test_missing_node_is_named_and_nothing_is_written(tmp_path):
    build_tree(tmp_path, "orin-jp6")
    b = JetsonBoard(tmp_path, JetsonOptions(command_path=install_tools(tmp_path)))
    (tmp_path / "sys/kernel/debug/bpmp/debug/clk/emc/mrq_rate_locked").unlink()
    before = snapshot(tmp_path)
    with pytest.raises(DeviceError, match="mrq_rate_locked"):
        b.apply_mode(PowerMode(4, 1190.4, 624.75, 2133))
    assert snapshot(tmp_path) == before


def test_unknown_board_and_missing_gpu(tmp_path):
    build_tree(tmp_path, "orin-jp5")
    (tmp_path / "proc/device-tree/model").write_text("Raspberry Pi 5\0")
    with pytest.raises(DeviceError, match="not a known Jetson model"):
        JetsonBoard(tmp_path)
    build_tree(tmp_path / "b", "orin-jp5")
    for node in (tmp_path / "b/sys/class/devfreq").iterdir():
        node.unlink()
    with pytest.raises(DeviceError, match="no devfreq node"):
        JetsonBoard(tmp_path / "b")


@pytest.mark.parametrize("dt_model,model", [
    ("NVIDIA Jetson Nano Developer Kit", "nano"), ("NVIDIA Jetson Nano 2GB Developer Kit", "nano"),
    ("NVIDIA Jetson Orin Nano Developer Kit", "orin-nano"), ("NVIDIA Jetson Xavier NX Developer Kit", "xavier-nx"),
    ("Jetson-AGX", "agx-xavier"), ("NVIDIA Jetson AGX Orin Developer Kit", "agx-orin"),
    ("quill", "tx2")])
def test_every_board_model_is_detected_from_its_device_tree_model(dt_model, model):
    class Fs:
        def read(self, path):
            assert path == "proc/device-tree/model"
            return dt_model + "\0"

    assert detect_model(Fs()).model == model


PERMISSION_CHILD = """
import os, sys
from jetfleet.agent.device.jetson import JetsonBoard
from jetfleet.shared.catalog import PowerMode
from jetfleet.shared.errors import DeviceError
b = JetsonBoard(sys.argv[1])
try:
    b.apply_mode(PowerMode(4, 1190.4, 624.75, 2133))
except DeviceError as e:
    print("ERR", e)
"""


def test_permission_error_names_the_node_and_writes_nothing():
    """On a read-only tree, without the capability that lets root ignore file modes."""
    with tempfile.TemporaryDirectory() as d:
        root = Path(d) / "tree"
        build_tree(root, "orin-jp6")
        os.chmod(d, 0o755)
        for p in root.rglob("*"):
            if not p.is_symlink():
                os.chmod(p, 0o755 if p.is_dir() else 0o444)
        before = snapshot(root)
        cmd = [sys.executable, "-c", PERMISSION_CHILD, str(root)]
        if os.geteuid() == 0:
            if not shutil.which("setpriv"):
                pytest.skip("running as root without setpriv: cannot drop CAP_DAC_OVERRIDE")
            drop = "-dac_override,-dac_read_search"
            cmd = ["setpriv", f"--inh-caps={drop}", f"--bounding-set={drop}", *cmd]
        out = procs.run(cmd, timeout=60)
        assert "ERR permission denied writing" in out.stdout, out.stderr
        assert snapshot(root) == before


def test_a_sample_reads_the_files_it_resolved_once_and_sees_each_change(board):
    b, lay, root = board
    files = b.telemetry.files()
    assert files and all(Path(f).is_file() and f.startswith(str(root)) for f in files)
    label = next(iter(lay.rails))
    first = b.sample().rails_w[label]
    volt_file = root / b.telemetry.rails[label][0]   # the rail's voltage (hwmon) or power (iio) file
    assert str(volt_file) in files
    volt_file.write_text(f"{2 * int(volt_file.read_text().split()[0])}\n")
    assert b.sample().rails_w[label] == pytest.approx(2 * first, rel=1e-3)
    cpu = max(p for p in root.glob("sys/devices/system/cpu/cpu[0-9]*") if (p / "online").exists()
              and (p / "online").read_text().strip() == "1")
    before = b.sample().cores_online
    (cpu / "online").write_text("0\n")
    assert b.sample().cores_online == before - 1
    volt_file.unlink()   # a file gone since: the error names it, as before
    with pytest.raises(DeviceError, match="missing board node"):
        b.sample()
