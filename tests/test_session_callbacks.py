"""The training frameworks' callbacks (jetfleet.session.callbacks) with the real frameworks, against the agent's real
session socket on an emulated board: the Hugging Face ``Trainer`` and Lightning each tell the session of every
optimiser step and of nothing else (gradient accumulation: two batches, one step), and what the agent counted is
the framework's own ``global_step``. The frameworks are optional (not in the dev extra: together ~220 MB): each test
skips, saying so, where its framework is not installed. Importing the callbacks module imports neither framework,
and asking for one that is missing names the package to install."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from jetfleet.session import Session
from jetfleet.twin import EmulatedBoard

from . import procs
from .test_session import Agent

ROOT = Path(__file__).resolve().parents[1]
BATCHES = 8            # batches of the one epoch each test trains
ACCUMULATE = 2         # batches per optimiser step


@pytest.fixture
def agent(tmp_path):
    a = Agent(EmulatedBoard("agx-xavier", 1, speed=float("inf")), tmp_path / "jf" / "session.sock")
    a.call(a.server.start())
    yield a
    a.close()


def data():
    import torch

    g = torch.Generator().manual_seed(0)
    return torch.randn(BATCHES * 4, 8, generator=g), torch.randn(BATCHES * 4, 1, generator=g)


@pytest.mark.slow
def test_the_hugging_face_trainer_tells_the_session_each_optimiser_step(agent, tmp_path):
    pytest.importorskip("transformers", reason="optional: the Hugging Face Trainer (pip install transformers "
                                               "accelerate) is not installed")
    pytest.importorskip("accelerate", reason="optional: the Hugging Face Trainer needs accelerate")
    import torch
    from transformers import Trainer, TrainingArguments

    from jetfleet.session.callbacks import huggingface_callback

    x, y = data()

    class Regression(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(8, 1)

        def forward(self, x, labels=None):
            out = self.linear(x)
            return {"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}

    rows = [{"x": x[i], "labels": y[i]} for i in range(len(x))]
    args = TrainingArguments(output_dir=str(tmp_path / "hf"), per_device_train_batch_size=4,
                             gradient_accumulation_steps=ACCUMULATE, num_train_epochs=1, report_to=[],
                             save_strategy="no", logging_strategy="no", use_cpu=True, disable_tqdm=True)
    with Session("resnet18", path=str(agent.server.config.path)) as s:
        trainer = Trainer(model=Regression(), args=args, train_dataset=rows, callbacks=[huggingface_callback(s)])
        trainer.train()
    assert trainer.state.global_step == BATCHES // ACCUMULATE
    assert agent.session().steps == s.steps == BATCHES // ACCUMULATE      # what the board's agent counted


@pytest.mark.slow
def test_a_lightning_trainer_tells_the_session_each_optimiser_step_not_each_batch(agent, tmp_path):
    L = pytest.importorskip("lightning.pytorch", reason="optional: Lightning (pip install lightning) is not "  # noqa: N806
                                                        "installed")
    import torch

    from jetfleet.session.callbacks import lightning_callback

    x, y = data()

    class Regression(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(8, 1)

        def training_step(self, batch, batch_idx):
            xb, yb = batch
            return torch.nn.functional.mse_loss(self.linear(xb), yb)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=4)
    with Session("resnet18", path=str(agent.server.config.path)) as s:
        trainer = L.Trainer(max_epochs=1, accumulate_grad_batches=ACCUMULATE, accelerator="cpu", logger=False,
                            enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                            default_root_dir=str(tmp_path / "pl"), callbacks=[lightning_callback(s)])
        trainer.fit(Regression(), loader)
    assert trainer.global_step == BATCHES // ACCUMULATE
    assert agent.session().steps == s.steps == BATCHES // ACCUMULATE


def test_the_callbacks_module_imports_no_framework_and_a_missing_one_names_what_to_install():
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        sys.modules["transformers"] = None          # as if not installed: importing it raises ImportError
        import jetfleet.session, jetfleet.session.callbacks as cb
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("lightning", "pytorch_lightning")
                        or (m.startswith("transformers") and sys.modules[m] is not None))
        try:
            cb.huggingface_callback(None)
        except ImportError as e:
            print(loaded, e)
        try:
            cb.lightning_callback(None, package="keras")
        except ValueError as e:
            print(e)
    """)
    out = procs.run([sys.executable, "-c", code], timeout=60)
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.strip().splitlines()
    assert first == "[] this callback needs transformers, which is not installed here: pip install transformers"
    assert second == "package 'keras': expected one of lightning.pytorch, pytorch_lightning"
