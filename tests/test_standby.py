"""More than one controller: one per SQLite data directory (a lock), one leader per Redis prefix (a lease with
fencing), standbys that refuse changes naming the leader and take over (docs/standby.md). Real processes."""

import json
import re
import sys

from jetfleet.controller.leader.dirlock import HOLDER_NAME

from . import procs

JETFLEET = [sys.executable, "-m", "jetfleet.cli"]


def start(args, **kw):
    return procs.spawn(JETFLEET + args, stdout=procs.PIPE, stderr=procs.STDOUT, **kw)


def listening(ctl) -> str:
    line = ctl.stdout.readline()
    m = re.search(r"listening on (127.0.0.1:\d+)", line)
    assert m, line + ctl.stdout.read()
    return m.group(1)


def test_a_second_controller_on_one_sqlite_data_directory_is_refused_naming_the_first(tmp_path):
    data = str(tmp_path / "data")
    first = start(["controller", "serve", "--listen", "127.0.0.1:0", "--store", data])
    try:
        address = listening(first)
        holder = json.loads((tmp_path / "data" / HOLDER_NAME).read_text())
        assert holder["pid"] == first.pid and holder["address"] == address
        second = start(["controller", "serve", "--listen", "127.0.0.1:0", "--store", data])
        out, _ = second.communicate(timeout=60)
        assert second.returncode != 0
        assert out.startswith("error: store ") and "another controller uses this data directory" in out, out
        assert f"{address} (pid {first.pid} on " in out, out
        assert first.poll() is None   # the first goes on
    finally:
        first.terminate()
        assert first.wait(15) == 0
    assert not (tmp_path / "data" / HOLDER_NAME).exists()
    # the lock went with the first: a controller starts on the directory again
    again = start(["controller", "serve", "--listen", "127.0.0.1:0", "--store", data])
    try:
        listening(again)
    finally:
        again.terminate()
        assert again.wait(15) == 0


def test_the_lock_goes_with_a_killed_controller(tmp_path):
    data = str(tmp_path / "data")
    first = start(["controller", "serve", "--listen", "127.0.0.1:0", "--store", data])
    listening(first)
    first.kill()
    first.wait(10)
    again = start(["controller", "serve", "--listen", "127.0.0.1:0", "--store", data])
    try:
        listening(again)   # the kernel dropped the dead one's lock; its stale controller.json is rewritten
        assert json.loads((tmp_path / "data" / HOLDER_NAME).read_text())["pid"] == again.pid
    finally:
        again.terminate()
        assert again.wait(15) == 0
