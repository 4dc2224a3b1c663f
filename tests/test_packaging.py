"""The wheel an agent or a controller is installed from carries every data file the package reads.

(The SSH rollout installs wheels, not the source tree: a data file missing from the package data makes an agent
fail at its first use of it on a real board, while every test on the source tree passes.)"""

from __future__ import annotations

import shutil
import sys
import zipfile
from pathlib import Path

from . import procs

REPO = Path(__file__).resolve().parents[1]


def test_the_wheel_holds_every_data_file_of_the_package(tmp_path):
    data = sorted(str(p.relative_to(REPO)) for p in (REPO / "jetfleet").rglob("*")
                  if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts)
    assert data, "the package has data files (board catalogs, workload characterisations)"
    src = tmp_path / "src"   # a copy: a build/ left in the checkout would hand back files from an earlier build
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".git", ".venv*", "build", "*.egg-info", "__pycache__",
                                                             ".*cache*", ".hypothesis", "eval-*", "examples"))
    out = procs.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                          "--wheel-dir", str(tmp_path / "dist"), str(src)], timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("jetfleet-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert [f for f in data if f not in names] == []
