from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


@pytest.fixture
def shared_data() -> Path:
    """../shared/data beside the checkout; tests that need it skip cleanly where it is absent."""
    data = SHARED / "data"
    if not data.is_dir():
        pytest.skip("../shared/data is not beside this checkout")
    return data


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    import shutil

    from .harness import RedisServer

    if not shutil.which("redis-server"):
        pytest.skip("redis-server is not installed (make test installs it with apt when run as root)")
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
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
