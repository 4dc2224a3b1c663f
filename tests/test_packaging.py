"""The wheel an agent or a controller is installed from carries every data file the package reads.

(The SSH rollout installs wheels, not the source tree: a data file missing from the package data makes an agent
fail at its first use of it on a real board, while every test on the source tree passes.)"""

from __future__ import annotations

import re
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

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
    # users' mypy sees the client's types (PEP 561), and the licence the metadata names travels with the wheel
    assert "jetfleet/py.typed" in names
    (licence,) = [n for n in names if n.endswith("/LICENSE") and ".dist-info/" in n]
    assert "Apache License" in zipfile.ZipFile(wheel).read(licence).decode()


def extras() -> dict[str, list[str]]:
    from jetfleet.shared.compat import toml_reader

    project = toml_reader.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == {"text": "Apache-2.0"} and "Apache License" in (REPO / "LICENSE").read_text()
    return {k: [re.split(r"[<>=;\[ ]", d, maxsplit=1)[0] for d in v] for k, v in project["optional-dependencies"].items()}


def test_only_the_plot_extra_pulls_in_matplotlib_and_no_unused_generator_pin():
    found = extras()
    assert found["plot"] == ["matplotlib"]
    assert [k for k, deps in found.items() if "matplotlib" in deps] == ["plot"]
    assert "grpcio-tools" not in found["dev"]   # the stubs' generator lives in .venv-proto (make proto)


def test_a_plot_without_matplotlib_names_the_extra(monkeypatch, tmp_path):
    from jetfleet.research.plots import plot_front
    from jetfleet.shared.errors import FailedPrecondition

    monkeypatch.setitem(sys.modules, "matplotlib", None)   # import matplotlib now raises ImportError
    with pytest.raises(FailedPrecondition, match=r"jetfleet\[plot\]"):
        plot_front([{"time_ms": 1.0, "power_w": 2.0, "pareto": True}], tmp_path / "f.png", "t")
    assert not (tmp_path / "f.png").exists()
