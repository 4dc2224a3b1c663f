"""docs/client.md is a notebook that runs: its Python blocks, in order, against a lab shaped like `lab up`'s. And
the CLI keeps to the client (no protobuf built by a command, no `.call(`)."""

import re
from pathlib import Path

import pytest

from .harness import LabThread

ROOT = Path(__file__).resolve().parents[1]


def blocks():
    return re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "client.md").read_text(), flags=re.S)


def test_the_client_docs_run_as_a_notebook(tmp_path, monkeypatch, capsys):
    lt = LabThread(str(tmp_path / "data"), ["agx-orin", "agx-xavier", "orin-nano"]).start()
    try:
        monkeypatch.setenv("JETFLEET_CONTROLLER", lt.address)
        namespace: dict = {}
        code = blocks()
        assert len(code) >= 6
        for i, block in enumerate(code):
            exec(compile(block, f"docs/client.md block {i + 1}", "exec"), namespace)  # noqa: S102 - our own docs
        out = capsys.readouterr().out
        assert "orin-nano-2 orin-nano online" in out and "instant" in out
        assert "INVALID_ARGUMENT gpu_mhz gpu_mhz=999" in out and "device_id" in out
        assert "200/200" in out and "done 200 measured" in out
        assert namespace["job"].state == "done" and namespace["job"].minibatches_done == 2000
    finally:
        lt.close()


@pytest.mark.parametrize("path", sorted((ROOT / "jetfleet" / "cli").glob("*.py")), ids=lambda p: p.name)
def test_the_cli_uses_the_typed_client_only(path):
    text = path.read_text()
    assert ".call(" not in text and "operator_pb2" not in text and "_stub" not in text, path
