"""What software a board runs, read from its files under the injected root: L4T, JetPack, CUDA, kernel,
and the Python packages of this agent (torch, jetfleet) without importing them.

- L4T: ``/etc/nv_tegra_release`` (``# R35 (release), REVISION: 4.1, ...`` -> ``35.4.1``)
- JetPack: the ``nvidia-jetpack`` package in dpkg's status file; without it (a minimal image), the
  JetPack that shipped that L4T release, from NVIDIA's release table below
- CUDA: ``/usr/local/cuda/version.json`` (CUDA 11+) or ``version.txt`` (CUDA 10)
"""

from __future__ import annotations

import json
import platform
import re
from typing import Callable

from jetfleet.agent.device.sysfs import Sysfs
from jetfleet.shared.errors import DeviceError

# L4T release -> JetPack (NVIDIA's JetPack archive). Only used when dpkg does not say.
L4T_TO_JETPACK: dict[str, str] = {
    "32.7.1": "4.6.1", "32.7.2": "4.6.2", "32.7.3": "4.6.3", "32.7.4": "4.6.4", "32.7.5": "4.6.5",
    "35.1.0": "5.0.2", "35.2.1": "5.1", "35.3.1": "5.1.1", "35.4.1": "5.1.2", "35.5.0": "5.1.3", "35.6.0": "5.1.4",
    "36.2.0": "6.0 DP", "36.3.0": "6.0", "36.4.0": "6.1", "36.4.3": "6.2", "36.4.4": "6.2.1",
}


def l4t_version(fs: Sysfs) -> str | None:
    """``35.4.1`` from ``/etc/nv_tegra_release``, or None where the file is missing or unreadable."""
    if not fs.exists("etc/nv_tegra_release"):
        return None
    m = re.search(r"R(\d+)\D.*?REVISION:\s*([\d.]+)", fs.read("etc/nv_tegra_release"))
    return f"{m.group(1)}.{m.group(2)}" if m else None


def _dpkg_version(fs: Sysfs, package: str) -> str | None:
    if not fs.exists("var/lib/dpkg/status"):
        return None
    block = re.search(rf"^Package: {re.escape(package)}\n(?:.+\n)*?Version: (\S+)", fs.read("var/lib/dpkg/status") + "\n",
                      re.MULTILINE)
    return block.group(1) if block else None


def jetpack_version(fs: Sysfs, l4t: str | None) -> str | None:
    """JetPack from the ``nvidia-jetpack`` package (``5.1.2-b104`` -> ``5.1.2``), else from the L4T release."""
    pkg = _dpkg_version(fs, "nvidia-jetpack")
    if pkg:
        return pkg.split("-")[0].split("+")[0]
    return L4T_TO_JETPACK.get(l4t or "")


def cuda_version(fs: Sysfs) -> str | None:
    """The CUDA toolkit under /usr/local/cuda (``11.4.315``), or None where none is installed."""
    if fs.exists("usr/local/cuda/version.json"):
        try:
            return str(json.loads(fs.read("usr/local/cuda/version.json"))["cuda"]["version"])
        except (ValueError, KeyError, TypeError):
            return None
    if fs.exists("usr/local/cuda/version.txt"):
        m = re.search(r"CUDA Version\s+([\d.]+)", fs.read("usr/local/cuda/version.txt"))
        return m.group(1) if m else None
    return None


def package_version(name: str) -> str | None:
    """The installed version of a Python distribution (torch, jetfleet), without importing it; None if absent."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def board_software(fs: Sysfs, packages: Callable[[str], str | None] = package_version) -> dict[str, str]:
    """kernel, l4t, jetpack, cuda, python, torch and jetfleet versions; a key is left out when the board does not
    have it."""
    sw = {"kernel": fs.read("proc/sys/kernel/osrelease"), "python": platform.python_version()}
    try:
        l4t = l4t_version(fs)
    except DeviceError:
        l4t = None
    found = {"l4t": l4t, "jetpack": jetpack_version(fs, l4t), "cuda": cuda_version(fs),
             "torch": packages("torch"), "jetfleet": packages("jetfleet")}
    sw.update({k: v for k, v in found.items() if v})
    return sw
