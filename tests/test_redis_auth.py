"""Redis with a password (Ansible's jetfleet_controller_redis_password): the store URL carries it, and it
is never printed, logged or put in an error."""

from __future__ import annotations

import re
import shutil
import signal
import sys

import pytest

from jetfleet.controller.store import open_store
from jetfleet.shared.errors import PermissionDenied

from . import procs
from .harness import RedisServer

PASSWORD = "pw-7Rk2xQ9Lm"


@pytest.fixture
def redis_with_password(tmp_path):
    if not shutil.which("redis-server"):
        pytest.skip("redis-server is not installed (make test installs it with apt when run as root)")
    server = RedisServer(tmp_path, password=PASSWORD).start()
    yield server
    server.kill()


def test_the_store_uses_the_password_from_its_url_and_never_shows_it(redis_with_password, caplog):
    s = redis_with_password
    store = open_store(s.url)
    try:
        assert store.list_devices() == []
        assert PASSWORD not in store.url and store.url == f"redis://:***@127.0.0.1:{s.port}/0"
    finally:
        store.close()
    for url in (f"redis://:wrong-one@127.0.0.1:{s.port}/0", f"redis://127.0.0.1:{s.port}/0"):
        with pytest.raises(PermissionDenied, match="refused the store's credentials") as e:
            open_store(url)
        assert "wrong-one" not in e.value.message and e.value.field == "store"
    assert PASSWORD not in caplog.text and "wrong-one" not in caplog.text


def test_the_controller_process_never_prints_the_password(redis_with_password, tmp_path):
    proc = procs.spawn([sys.executable, "-m", "jetfleet.cli", "-vv", "controller", "serve", "--listen",
                        "127.0.0.1:0", "--store", redis_with_password.url], stdout=procs.PIPE, stderr=procs.STDOUT)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("controller listening on"):   # the start-up line (log lines come before it)
                break
    finally:
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=20)
    out = "".join(lines) + rest
    assert re.search(r"controller listening on 127.0.0.1:\d+ \(plaintext\), store redis://:\*\*\*@127.0.0.1", out), out
    assert PASSWORD not in out
