"""Fixture trees laid out like real Jetson boards' /sys, /proc, /etc and debugfs, for running the real
backend, plus the board's tools (nvpmodel, systemctl for nvfancontrol) as fake programs on PATH.

Layouts follow the boards' JetPack releases (node names, rail labels, units). ONLY ON PAPER, because
no board was at hand: the nvpmodel.conf and nvfancontrol.conf files (tests/fixtures/, each says where
its values come from), the dpkg and CUDA version files, and the initial state, which is the board's
default nvpmodel mode as the fake nvpmodel applies it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from jetfleet.shared.catalog import get_catalog

from .fakes import jetson_tools

FIXTURES = Path(__file__).parent / "fixtures"


@dataclass(frozen=True)
class Layout:
    name: str
    model: str
    dt_model: str
    l4t: str                      # contents of /etc/nv_tegra_release
    gpu_node: str                 # devfreq node name (differs by JetPack)
    rails: dict[str, tuple[int, int]]  # label -> (mV, mA) ; iio layouts use mW = mV*mA/1000
    iio: bool = False
    nvpmodel: str | None = None     # fixtures/nvpmodel/<name>.conf
    nvfancontrol: bool = False         # the fan daemon of JetPack 5 and 6
    jetpack_pkg: str | None = None  # version of the nvidia-jetpack package in dpkg's status
    cuda: str | None = None         # /usr/local/cuda version


ORIN_RAILS = ("VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO")
LAYOUTS = {
    "orin-jp5": Layout("orin-jp5", "agx-orin", "NVIDIA Jetson AGX Orin Developer Kit",
                       "# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64",
                       "17000000.ga10b", dict(zip(ORIN_RAILS, [(5000, 3000), (5000, 1000), (5000, 900), (5000, 400)])),
                       nvpmodel="agx-orin", nvfancontrol=True, jetpack_pkg="5.1.2-b104", cuda="11.4.315"),
    "orin-jp6": Layout("orin-jp6", "agx-orin", "NVIDIA Jetson AGX Orin Developer Kit",
                       "# R36 (release), REVISION: 3.0, GCID: 36923193, BOARD: generic, EABI: aarch64",
                       "17000000.gpu", dict(zip(ORIN_RAILS, [(4992, 2000), (4992, 800), (4992, 700), (4992, 300)])),
                       nvpmodel="agx-orin", nvfancontrol=True, cuda="12.2.140"),
    "xavier-jp4": Layout("xavier-jp4", "agx-xavier", "Jetson-AGX",
                         "# R32 (release), REVISION: 7.1, GCID: 29818004, BOARD: t186ref, EABI: aarch64",
                         "17000000.gv11b",
                         {"GPU": (1000, 2000), "CPU": (1000, 600), "SOC": (1000, 2600), "CV": (1000, 0),
                          "VDDRQ": (1000, 600), "SYS5V": (1000, 2700)}, iio=True, nvpmodel="agx-xavier", cuda="10.2.300"),
    "xavier-jp5": Layout("xavier-jp5", "agx-xavier", "Jetson-AGX",
                         "# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64",
                         "17000000.gv11b",
                         {"GPU": (1000, 2100), "CPU": (1000, 700), "SOC": (1000, 2500), "CV": (1000, 0),
                          "VDDRQ": (1000, 700), "SYS5V": (1000, 2600)}, nvpmodel="agx-xavier", nvfancontrol=True,
                         jetpack_pkg="5.1.2-b104", cuda="11.4.315"),
    "orin-nano-jp6": Layout("orin-nano-jp6", "orin-nano", "NVIDIA Jetson Orin Nano Developer Kit",
                            "# R36 (release), REVISION: 3.0, GCID: 36923193, BOARD: generic, EABI: aarch64",
                            "17000000.gpu", {"VDD_IN": (5000, 1400), "VDD_CPU_GPU_CV": (5000, 500),
                                             "VDD_SOC": (5000, 300)}, nvpmodel="orin-nano", nvfancontrol=True,
                            cuda="12.2.140"),
    # issue 16: Xavier NX on JetPack 5 (the sysfs route; no nvpmodel.conf fixture on paper for it yet).
    "xavier-nx-jp5": Layout("xavier-nx-jp5", "xavier-nx", "NVIDIA Jetson Xavier NX Developer Kit",
                            "# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64",
                            "17000000.gv11b", {"VDD_IN": (5000, 1500), "VDD_CPU_GPU_CV": (5000, 600),
                                               "VDD_SOC": (5000, 400)}, nvfancontrol=True, jetpack_pkg="5.1.2-b104",
                            cuda="11.4.315"),
}
WITH_NVPMODEL = sorted(k for k, v in LAYOUTS.items() if v.nvpmodel)
FAN_PWM = jetson_tools.FAN_PWM


def _w(path: Path, text: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{text}\n")


def build_tree(root: Path, layout_name: str) -> Layout:
    lay = LAYOUTS[layout_name]
    cat = get_catalog(lay.model)
    n = max(cat.cores)
    _w(root / "proc/device-tree/model", lay.dt_model + "\0")
    _w(root / "proc/device-tree/serial-number", f"1421{sum(map(ord, layout_name)):08d}\0")
    _w(root / "proc/sys/kernel/osrelease", "5.15.136-tegra" if "jp6" in lay.name else "5.10.120-tegra")
    _w(root / "etc/nv_tegra_release", lay.l4t)
    _w(root / "proc/stat", "cpu  0 0 0 0 0 0 0 0 0 0\n" + "".join(
        f"cpu{i} 100 0 100 800 0 0 0 0 0 0\n" for i in range(n)))
    if lay.jetpack_pkg:
        _w(root / "var/lib/dpkg/status", "Package: nvidia-l4t-core\nStatus: install ok installed\nVersion: 35.4.1\n\n"
           f"Package: nvidia-jetpack\nStatus: install ok installed\nVersion: {lay.jetpack_pkg}\n")
    if lay.cuda and lay.cuda.startswith("10."):
        _w(root / "usr/local/cuda/version.txt", f"CUDA Version {lay.cuda}")
    elif lay.cuda:
        _w(root / "usr/local/cuda/version.json", f'{{"cuda": {{"name": "CUDA SDK", "version": "{lay.cuda}"}}}}')
    cpu = root / "sys/devices/system/cpu"
    _w(cpu / "present", f"0-{n - 1}")
    table = " ".join(str(int(round(f * 1000))) for f in cat.cpu_mhz)
    for i in range(n):
        if i:
            _w(cpu / f"cpu{i}/online", 1)
        fq = cpu / f"cpu{i}/cpufreq"
        _w(fq / "scaling_available_frequencies", table)
        _w(fq / "scaling_min_freq", int(round(cat.cpu_mhz[0] * 1000)))
        _w(fq / "scaling_max_freq", int(round(cat.cpu_mhz[-1] * 1000)))
        _w(fq / "scaling_cur_freq", int(round(cat.cpu_mhz[-1] * 1000)))
        _w(fq / "scaling_governor", "schedutil")
    # The GPU's devfreq node lives under its platform device; /sys/class/devfreq links to it.
    dev = root / "sys/devices/platform/bus@0" / lay.gpu_node
    df = dev / "devfreq" / lay.gpu_node
    _w(df / "available_frequencies", " ".join(str(int(round(f * 1e6))) for f in cat.gpu_mhz))
    _w(df / "min_freq", int(round(cat.gpu_mhz[0] * 1e6)))
    _w(df / "max_freq", int(round(cat.gpu_mhz[-1] * 1e6)))
    _w(df / "cur_freq", int(round(cat.gpu_mhz[-1] * 1e6)))
    _w(df / "governor", "nvhost_podgov")
    _w(dev / "load", 370)
    os.symlink("../..", df / "device")
    (root / "sys/class/devfreq").mkdir(parents=True, exist_ok=True)
    os.symlink(os.path.relpath(df, root / "sys/class/devfreq"), root / "sys/class/devfreq" / lay.gpu_node)
    # A second devfreq node (another engine) that must not be mistaken for the GPU.
    nv = root / "sys/devices/platform/bus@0/15480000.nvdec/devfreq/15480000.nvdec"
    _w(nv / "available_frequencies", "115200000 345600000 691200000")
    os.symlink(os.path.relpath(nv, root / "sys/class/devfreq"), root / "sys/class/devfreq/15480000.nvdec")
    emc = root / "sys/kernel/debug/bpmp/debug/clk/emc"
    _w(emc / "rate", int(round(cat.mem_mhz[-1] * 1e6)))
    _w(emc / "mrq_rate_locked", 0)
    _w(emc / "max_rate", int(round(cat.mem_mhz[-1] * 1e6)))
    zones = ("cpu-thermal", "gpu-thermal", "soc0-thermal", "tj-thermal", "cv0-thermal", "PMIC-Die")
    temps = (45000, 45500, 46000, 46500, -256000, 100000)   # cv0 is switched off; the PMIC die is not a zone to show
    for i, (zone, t) in enumerate(zip(zones, temps)):
        _w(root / f"sys/class/thermal/thermal_zone{i}/type", zone)
        _w(root / f"sys/class/thermal/thermal_zone{i}/temp", t)
    _w(root / FAN_PWM, 80)
    rails = list(lay.rails.items())
    if lay.iio:
        d = root / "sys/bus/i2c/drivers/ina3221x/1-0040/iio:device0"
        for k, (label, (mv, ma)) in enumerate(rails):
            _w(d / f"rail_name_{k}", label)
            _w(d / f"in_power{k}_input", mv * ma // 1000)
    else:
        for chip in range(0, len(rails), 3):  # three channels per INA3221
            d = root / f"sys/bus/i2c/drivers/ina3221/1-004{chip // 3}/hwmon/hwmon{chip // 3 + 1}"
            for ch, (label, (mv, ma)) in enumerate(rails[chip:chip + 3], start=1):
                _w(d / f"in{ch}_label", label)
                _w(d / f"in{ch}_input", mv)
                _w(d / f"curr{ch}_input", ma)
            _w(d / "in7_label", "sum of shunt voltages")  # present on real chips, not a rail
    if lay.nvpmodel:
        _nvpmodel(root, lay)
    if lay.nvfancontrol:
        (root / "etc/nvfancontrol.conf").write_text((FIXTURES / "nvfancontrol/jetpack5.conf").read_text())
        jetson_tools.systemctl(str(root), ["start", "nvfancontrol"])
    return lay


def _nvpmodel(root: Path, lay: Layout) -> None:
    """The board's nvpmodel.conf and the files its PARAM sections name, in the board's default mode."""
    text = (FIXTURES / f"nvpmodel/{lay.nvpmodel}.conf").read_text().replace("@GPU@", lay.gpu_node)
    (root / "etc").mkdir(parents=True, exist_ok=True)
    (root / "etc/nvpmodel.conf").write_text(text)
    params, _, default = jetson_tools.parse(text)
    for name, files in params.items():
        for arg, path in files.items():
            target = root / path.lstrip("/")
            if arg != "FREQ_TABLE" and not target.exists() and not (name == "CPU_ONLINE" and arg == "CORE_0"):
                _w(target, 0)
    _w(root / "sys/kernel/debug/bpmp/debug/clk/emc/possible_rates",
       " ".join(str(int(round(m * 1e6))) for m in get_catalog(lay.model).mem_mhz))
    jetson_tools.apply_mode(str(root), text, default)


def install_tools(root: Path) -> str:
    """The fake nvpmodel, systemctl and nvfancontrol for ``root``; returns the PATH that finds them first."""
    return jetson_tools.install(str(root) + ".bin", str(root))


def tool_calls(root: Path) -> list:
    """Every fake tool call so far, one line each (``nvpmodel -f ... -m 14``)."""
    p = Path(jetson_tools.calls_log(str(root)))
    return p.read_text().splitlines() if p.exists() else []


def snapshot(root: Path) -> dict[str, str]:
    """Every regular file's contents without its trailing newline (sysfs adds one to every read, whatever was
    written), to prove that a refused request wrote nothing or that all was put back; the agent's own state
    directory is left out."""
    return {str(p.relative_to(root)): p.read_text().rstrip("\n") for p in root.rglob("*")
            if p.is_file() and not p.is_symlink() and "var/lib/jetfleet" not in str(p.relative_to(root))}
