"""Callbacks that tell a ``Session`` of each optimiser step from the training frameworks' own loops:

- the Hugging Face ``Trainer`` (``transformers.TrainerCallback``): ``on_step_end``, called once per optimiser step
  (after the gradient accumulation), is ``session.step()``;
- Lightning (``lightning.pytorch.Callback``, or the older ``pytorch_lightning.Callback``): ``on_train_batch_end``
  tells the session of the optimiser steps taken since it last did (``trainer.global_step`` counts them), so a
  batch that only accumulates gradients is not a step.

The frameworks are imported only when a callback is asked for: importing this module (or ``jetfleet.session``)
imports neither, on any Python the session supports (3.8+). Asking for a callback whose framework is not installed
raises ImportError naming the package to install.

    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[huggingface_callback(session)])
    trainer = L.Trainer(max_epochs=3, callbacks=[lightning_callback(session)])
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
from typing import Any

from jetfleet.session.client import Session

LIGHTNING_PACKAGES = ("lightning.pytorch", "pytorch_lightning")


def _framework(module: str, install: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"this callback needs {module}, which is not installed here: pip install {install}") from e


@functools.lru_cache(maxsize=None)
def _huggingface_class() -> type:
    base = _framework("transformers", "transformers").TrainerCallback

    class JetfleetTrainerCallback(base):  # type: ignore[misc, valid-type]
        """``session.step()`` at the end of each of the Hugging Face ``Trainer``'s optimiser steps."""

        def __init__(self, session: Session) -> None:
            super().__init__()
            self.session = session

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.session.step()

    return JetfleetTrainerCallback


def huggingface_callback(session: Session) -> Any:
    """A ``transformers.TrainerCallback`` telling ``session`` of each optimiser step of a ``Trainer``."""
    return _huggingface_class()(session)


@functools.lru_cache(maxsize=None)
def _lightning_class(package: str) -> type:
    base = _framework(package, "lightning").Callback

    class JetfleetLightningCallback(base):  # type: ignore[misc, valid-type]
        """The optimiser steps a Lightning ``Trainer`` took since the last batch, told to the session."""

        def __init__(self, session: Session) -> None:
            super().__init__()
            self.session = session
            self.told = 0      # trainer.global_step when the session was last told

        def on_train_start(self, trainer: Any, pl_module: Any) -> None:
            self.told = int(trainer.global_step)   # a resumed run's earlier steps are not this session's

        def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
            n = int(trainer.global_step) - self.told
            if n > 0:
                self.session.step(n)
                self.told += n

    return JetfleetLightningCallback


def lightning_callback(session: Session, package: str | None = None) -> Any:
    """A Lightning ``Callback`` telling ``session`` of each optimiser step. ``package``: ``lightning.pytorch`` or
    ``pytorch_lightning`` (a Trainer accepts only its own package's callbacks); by default the one the process has
    imported already, else ``lightning.pytorch`` if it is installed, else ``pytorch_lightning``."""
    if package is not None and package not in LIGHTNING_PACKAGES:
        raise ValueError(f"package {package!r}: expected one of {', '.join(LIGHTNING_PACKAGES)}")
    if package is None:
        loaded = [p for p in LIGHTNING_PACKAGES if p in sys.modules]
        installed = [p for p in LIGHTNING_PACKAGES if _installed(p)]
        package = (loaded or installed or [LIGHTNING_PACKAGES[0]])[0]
    return _lightning_class(package)(session)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:       # the parent package (``lightning``) is missing
        return False
