"""The training code that runs on a board must work with the oldest torch a board has: NVIDIA's wheels go
down to torch 2.0 on JetPack 5 (the papers used 1.12). torch 2.0 cannot be installed here (only the
2.13 CPU wheel is at hand), so this checks the code against a list instead: every torch name and every
keyword argument the on-board modules use must be one the PyTorch 2.0 reference documents. A new one
fails here until someone has checked it there and added it. The characterisation
(``characterise.py``: ``torch.utils.flop_counter``, torch 2.1+) runs off-board and must stay out of
the on-board import graph."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.boards
WORKLOADS = Path(__file__).resolve().parents[1] / "jetfleet" / "agent" / "workloads"
ON_BOARD = ("training.py", "models.py", "__init__.py")

# name -> keyword arguments used, each present in the PyTorch 2.0 documentation.
TORCH_2_0 = {
    "torch.Generator": set(), "torch.Tensor": set(), "torch.arange": {"device"}, "torch.cat": {"dim"},
    "torch.cuda.is_available": set(), "torch.cuda.synchronize": set(), "torch.device": set(),
    "torch.manual_seed": set(), "torch.rand": {"generator"}, "torch.randint": {"dtype", "generator"},
    "torch.randn": {"generator"}, "torch.relu": set(), "torch.zeros": {"dtype", "device"}, "torch.uint8": set(),
    "torch.long": set(), "torch.float32": set(), "torch.no_grad": set(), "torch.sigmoid": set(),
    "torch.optim.SGD": {"lr", "momentum"},
    "torch.utils.data.DataLoader": {"batch_size", "num_workers", "drop_last", "persistent_workers",
                                    "prefetch_factor", "pin_memory", "shuffle", "generator", "worker_init_fn"},
    "torch.utils.data.Dataset": set(),
    "torch.nn.AdaptiveAvgPool2d": set(), "torch.nn.BatchNorm2d": set(), "torch.nn.Conv2d": {"bias", "groups"},
    "torch.nn.Dropout": set(), "torch.nn.Embedding": set(), "torch.nn.Flatten": set(),
    "torch.nn.Hardsigmoid": set(), "torch.nn.Hardswish": set(), "torch.nn.LSTM": {"batch_first", "dropout"},
    "torch.nn.LayerNorm": set(), "torch.nn.Linear": set(), "torch.nn.MaxPool2d": set(), "torch.nn.Module": set(),
    "torch.nn.ModuleList": set(), "torch.nn.ReLU": set(), "torch.nn.Sequential": set(), "torch.nn.SiLU": set(),
    "torch.nn.TransformerEncoder": {"enable_nested_tensor"},
    "torch.nn.TransformerEncoderLayer": {"dropout", "activation", "batch_first", "norm_first"},
    "torch.nn.Upsample": {"scale_factor", "mode"}, "torch.nn.functional.cross_entropy": set(),
}


def torch_uses(path: Path) -> dict[str, set[str]]:
    """Every dotted torch name the module uses (through its import aliases) -> keyword arguments passed to it."""
    tree = ast.parse(path.read_text())
    alias: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            alias.update({a.asname or a.name: a.name for a in node.names if a.name.startswith("torch")})
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torch"):
            alias.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})

    def dotted(node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return alias.get(node.id)
        if isinstance(node, ast.Attribute):
            base = dotted(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    uses: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and not isinstance(getattr(node, "ctx", None), ast.Store):
            name = dotted(node)
            if name:
                uses.setdefault(name, set())
        if isinstance(node, ast.Call):
            name = dotted(node.func)
            if name:
                uses.setdefault(name, set()).update(k.arg for k in node.keywords if k.arg)
    for name in alias.values():
        if name not in ("torch", "torch.nn"):
            uses.setdefault(name, set())
    # a.b.c counts as a use of a.b too: keep only the leaves
    return {n: k for n, k in uses.items() if not any(o.startswith(n + ".") for o in uses) and n not in ("torch",)}


@pytest.mark.parametrize("module", ON_BOARD)
def test_on_board_training_uses_only_torch_2_0_apis(module):
    uses = torch_uses(WORKLOADS / module)
    unknown = {n: sorted(k) for n, k in uses.items() if n not in TORCH_2_0}
    assert not unknown, f"{module} uses torch names not checked against torch 2.0: {unknown}"
    new_kwargs = {n: sorted(k - TORCH_2_0[n]) for n, k in uses.items() if k - TORCH_2_0[n]}
    assert not new_kwargs, f"{module} passes keyword arguments not checked against torch 2.0: {new_kwargs}"


def test_the_check_sees_a_newer_api(tmp_path):
    path = tmp_path / "probe.py"
    path.write_text("import torch\nfrom torch import nn\nx = nn.functional.rms_norm(t, (4,))\n"
                    "nn.TransformerEncoderLayer(4, 2, bias=False)\n")
    uses = torch_uses(path)
    assert "torch.nn.functional.rms_norm" in uses and "torch.nn.functional.rms_norm" not in TORCH_2_0  # torch 2.4
    assert uses["torch.nn.TransformerEncoderLayer"] - TORCH_2_0["torch.nn.TransformerEncoderLayer"] == {"bias"}  # 2.1


def test_the_characterisation_stays_off_the_on_board_import_graph():
    for module in ON_BOARD:
        tree = ast.parse((WORKLOADS / module).read_text())
        imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not any("characterise" in m or "flop_counter" in m for m in imported), module
