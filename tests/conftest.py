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
