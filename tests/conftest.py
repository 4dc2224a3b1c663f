import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from . import procs

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
# One torch thread per process: the models are small, and on a busy 2-core machine two spinning OpenMP
# threads make training ~20x slower (5 epochs of the reference MLP: 13.4 s with two, 0.7 s with one).
# Set before any test imports torch; subprocesses inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# No operator's config file (~/.config/jetfleet/config.toml) or controller address leaks into the tests: a client
# finds what a test gives it, and tests of the config file make their own.
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="jetfleet-test-config-")
atexit.register(shutil.rmtree, os.environ["XDG_CONFIG_HOME"], ignore_errors=True)
for _var in ("JETFLEET_CONFIG", "JETFLEET_CONTROLLER", "JETFLEET_TLS_CA", "JETFLEET_TLS_CERT", "JETFLEET_TLS_KEY",
             "JETFLEET_OUTPUT"):
    os.environ.pop(_var, None)
# The one kind of skip allowed in CI: a documented optional input that a checkout may lack (the
# third-party measurements in ../shared/data). A test skipped in CI for anything else, such as a tool
# the project installs, fails: a skipped test checks nothing.
OPTIONAL = "optional:"


def _ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped and _ci() and not hasattr(rep, "wasxfail"):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        if not (reason[len("Skipped: "):] if reason.startswith("Skipped: ") else reason).startswith(OPTIONAL):
            # (no str.removeprefix: this file also runs on the boards' Python 3.8)
            rep.outcome = "failed"
            rep.longrepr = (f"skipped in CI: {reason}\n(only skips whose reason starts with '{OPTIONAL}' are allowed "
                            "when CI=true; install what the test needs, as `make test` does)")


@pytest.fixture(autouse=True)
def _children_end_with_their_test():
    """Whatever a test started through tests/procs.py is ended when the test ends (passed, failed or errored), and
    a test during which this process forked fails: a fork with gRPC loaded runs gRPC's fork handlers, which can
    hang or abort the interpreter (grpc/grpc#37259); start children with tests/procs.py (spawned, never forked)."""
    forks = procs.forks()
    before = len(forks)
    yield
    for child in procs.live("test"):
        child.end()
    if len(forks) != before:
        pytest.fail(f"this test forked the test process {len(forks) - before} time(s) (subprocess on Python < 3.10, or "
                    "a preexec_fn): start child processes with tests/procs.py, which spawns them", pytrace=False)


def pytest_sessionfinish(session):
    for child in procs.live():   # the session-scoped fixtures' servers, and anything a test left registered
        child.end()


def pytest_sessionstart(session):
    # -q hides the report header, where pytest-randomly prints its seed: say it here too, on every run
    line = _seed_line(session.config)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if line and reporter is not None and session.config.getoption("verbose") < 0:
        reporter.write_line(line)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    line = _seed_line(config)
    if line:
        terminalreporter.write_line(line)


def _seed_line(config):
    seed = getattr(config.option, "randomly_seed", None)
    if seed is None or not getattr(config.option, "randomly_reorganize", True):
        return ""
    return f"random order: --randomly-seed={seed} (pass it to pytest to replay this order)"


@pytest.fixture
def shared_data() -> Path:
    """../shared/data beside the checkout; tests that need it skip cleanly where it is absent."""
    data = SHARED / "data"
    if not data.is_dir():
        pytest.skip(f"{OPTIONAL} ../shared/data (third-party Jetson measurements) is not beside this checkout")
    return data


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    import shutil

    from .harness import RedisServer

    if not shutil.which("redis-server"):
        pytest.skip("redis-server is not installed (make test installs it with apt when run as root)")
    server = RedisServer(tmp_path_factory.mktemp("redis"), scope="session").start()
    yield server
    server.kill()


@pytest.fixture(params=["sqlite", "redis"])
def store_spec(request, tmp_path):
    """A store URL for each backend: a data directory, or a clean Redis database."""
    if request.param == "sqlite":
        return str(tmp_path / "data")
    server = request.getfixturevalue("redis_server")
    server.flush()
    return server.url
