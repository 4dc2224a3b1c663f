"""Issue 29: a damaged SQLite store is found at start: the controller refuses to start on it, naming the file and
what to do, instead of "listening" and answering every call with an internal error."""

from __future__ import annotations

import os
import sys

import pytest

from jetfleet.controller.store.sqlite import SqliteStore
from jetfleet.shared.errors import StoreDamaged

from . import procs


def damaged_store(data_dir) -> str:
    store = SqliteStore(data_dir)
    for i in range(2000):
        store.put_doc("note", f"n{i}", {"text": "x" * 200})
    store._db.close()
    path = str(data_dir / "jetfleet.db")
    with open(path, "r+b") as f:   # a torn write in the middle of the file
        f.seek(os.path.getsize(path) // 2)
        f.write(b"\xff" * 8192)
    return path


@pytest.mark.parametrize("how", ["torn pages", "not a database"])
def test_a_damaged_store_is_refused_at_open_naming_the_file_and_the_way_out(tmp_path, how):
    if how == "torn pages":
        path = damaged_store(tmp_path)
    else:
        path = str(tmp_path / "jetfleet.db")
        with open(path, "wb") as f:
            f.write(b"a text editor saved this here\n" * 400)
    with pytest.raises(StoreDamaged) as e:
        SqliteStore(tmp_path)
    assert path in e.value.message and ".recover" in e.value.message and e.value.field == "store"


def test_the_controller_does_not_start_on_a_damaged_store(tmp_path):
    damaged_store(tmp_path / "data")
    out = procs.run([sys.executable, "-m", "jetfleet.cli", "controller", "serve", "--listen", "127.0.0.1:0", "--store",
                     str(tmp_path / "data")], timeout=120)
    assert out.returncode == 7, (out.returncode, out.stdout, out.stderr)   # failed precondition
    assert "is damaged" in out.stderr and "jetfleet.db" in out.stderr and "listening" not in out.stdout + out.stderr


def test_a_sound_store_opens_and_keeps_what_it_holds(tmp_path):
    store = SqliteStore(tmp_path)
    store.put_doc("note", "a", {"text": "kept"})
    store._db.close()
    assert SqliteStore(tmp_path).get_doc("note", "a") == {"text": "kept"}
