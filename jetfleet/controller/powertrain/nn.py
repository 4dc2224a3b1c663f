"""PowerTrain's prediction networks (torch): separate time and power MLPs on the four standardised
knobs; a reference trained on a full grid, transferred by replacing the last layer and fine-tuning
every layer on k profiled modes of a new workload or board; and the from-scratch baseline."""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from jetfleet.controller.powertrain import stack as S
from jetfleet.controller.powertrain.stack import DEFAULT_LAYERS, PUBLISHED_DROPOUT, mlp  # noqa: F401 - re-exported
from jetfleet.shared.errors import InvalidArgument

NO_DROPOUT = (0.0, 0.0, 0.0)
# The default: the published layers without dropout. On the twin the dropout-free reference fits power
# far better (validation MAPE 0.6% vs 4.3%) and transfers better (docs/jobs.md, `jetfleet eval choices`).
DEFAULT_DROPOUT = NO_DROPOUT
MIN_MODES = 5
# Networks trained per stacked pass: beyond ~8 the stacked weights leave the CPU's caches and a copy
# costs more, not less (measured on this project's 2-core machine: 0.50 CPU s per transfer at 8, 0.58 at 12).
STACK_CHUNK = 8


@dataclass
class Scaler:
    """Per-column standardisation, (x - mean) / std, fitted on training data and stored with a model."""

    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def fit(cls, x: np.ndarray) -> Scaler:
        """A scaler fitted to the columns of ``x``; a constant column keeps a std of 1."""
        std = x.std(axis=0)
        return cls(x.mean(axis=0), np.where(std > 1e-9, std, 1.0))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """``x`` standardised with the fitted mean and std."""
        result: np.ndarray = (x - self.mean) / self.std
        return result

    def to_list(self) -> list[list[float]]:
        """[mean, std] as plain lists, for a model document."""
        return [self.mean.tolist(), self.std.tolist()]

    @classmethod
    def from_list(cls, v: list[list[float]]) -> Scaler:
        """The scaler ``to_list`` stored."""
        return cls(np.asarray(v[0], dtype=np.float64), np.asarray(v[1], dtype=np.float64))


@dataclass
class Net:
    """A trained network with its scalers. Targets are learned in log space (times span 100x
    across a grid), so the loss weighs every mode by its relative error, as MAPE does."""

    model: nn.Sequential
    x_scaler: Scaler
    y_scaler: Scaler
    val_mape: float = float("nan")
    epochs_run: int = 0
    val_log_residuals: tuple[float, ...] = ()   # log(observed / predicted) on the held-out validation modes

    def predict(self, x: np.ndarray, *, mc_samples: int = 0) -> np.ndarray:
        """Predicted targets (ms or W) of the knob rows ``x``; with ``mc_samples``, that many dropout draws per row."""
        xs = torch.as_tensor(self.x_scaler(x), dtype=torch.float32)
        if mc_samples:  # dropout left on: the spread is the model's uncertainty
            self.model.train()
            with torch.no_grad():
                out = torch.stack([self.model(xs).squeeze(-1) for _ in range(mc_samples)]).numpy()
            self.model.eval()
            return np.exp(out * self.y_scaler.std[0] + self.y_scaler.mean[0])
        self.model.eval()
        with torch.no_grad():
            y = self.model(xs).squeeze(-1).numpy()
        result: np.ndarray = np.exp(y * self.y_scaler.std[0] + self.y_scaler.mean[0])
        return result

    def state_bytes(self) -> bytes:
        """The network's weights as bytes (its state dict saved by torch)."""
        buf = io.BytesIO()
        torch.save(self.model.state_dict(), buf)
        return buf.getvalue()

    @classmethod
    def from_state(cls, data: bytes, x_scaler: Scaler, y_scaler: Scaler,
                   dropout: tuple[float, ...] = DEFAULT_DROPOUT) -> Net:
        """A network from ``state_bytes`` and its scalers; ``dropout`` must be the one it was trained with."""
        model = mlp(dropout=dropout)
        model.load_state_dict(torch.load(io.BytesIO(data), weights_only=True))
        return cls(model, x_scaler, y_scaler)


def penultimate(net: Net, x: np.ndarray) -> np.ndarray:
    """The activations of a network's last hidden layer for the knob rows ``x`` (its learned features)."""
    h = torch.as_tensor(net.x_scaler(x), dtype=torch.float32)
    net.model.eval()
    with torch.no_grad():
        for mod in list(net.model)[:-1]:
            h = mod(h)
    result: np.ndarray = h.numpy()
    return result


def mape(pred: np.ndarray, truth: np.ndarray) -> float:
    """Mean absolute percentage error of ``pred`` against ``truth``, in percent."""
    return float(np.mean(np.abs(pred - truth) / np.abs(truth)) * 100.0)


def _check(x: np.ndarray, y: np.ndarray) -> None:
    if x.ndim != 2 or x.shape[1] != 4 or len(x) != len(y):
        raise InvalidArgument("training data must be N modes x 4 knobs with one target each", field="modes")
    if len(x) < MIN_MODES:
        raise InvalidArgument(f"{len(x)} profiled modes are too few to train on; at least {MIN_MODES} needed",
                              field="modes")
    if not np.all(np.isfinite(y)) or np.any(y <= 0):
        raise InvalidArgument("targets must be positive and finite", field="targets")


def _targets(y: np.ndarray) -> tuple[np.ndarray, Scaler]:
    logy = np.log(y)[:, None]
    ys = Scaler.fit(logy)
    return ys(logy)[:, 0], ys


def train_reference(x: np.ndarray, y: np.ndarray, *, epochs: int = 100, lr: float = 1e-3, batch: int = 64,
                    val_fraction: float = 0.1, seed: int = 0, dropout: tuple[float, ...] = DEFAULT_DROPOUT) -> Net:
    """The reference network on a full grid (10% held out to pick the best checkpoint)."""
    return train_references(x, [y], epochs=epochs, lr=lr, batch=batch, val_fraction=val_fraction, seed=seed,
                            dropout=dropout)[0]


def train_references(x: np.ndarray, targets: list[np.ndarray], *, epochs: int = 100, lr: float = 1e-3,
                     batch: int = 64, val_fraction: float = 0.1, seed: int = 0,
                     dropout: tuple[float, ...] = DEFAULT_DROPOUT, on_epoch: S.EpochCallback | None = None) -> list[Net]:
    """One reference network per target (e.g. time and power) on the same modes, trained together; the
    same 10% of the modes is held out of each to pick its best checkpoint and report its validation MAPE.
    ``on_epoch`` hears of every epoch (and may stop the training by raising)."""
    for y in targets:
        _check(x, y)
    n = len(x)
    gen = torch.Generator().manual_seed(seed)
    rng = np.random.default_rng(seed)
    n_val = int(round(n * val_fraction)) if n >= 20 else 0
    is_val = np.zeros(n, bool)
    is_val[rng.permutation(n)[:n_val]] = True
    xsc = Scaler.fit(x)
    scaled = [_targets(y) for y in targets]
    m = len(targets)
    xt = torch.as_tensor(xsc(x), dtype=torch.float32).unsqueeze(0).repeat(m, 1, 1)
    yt = torch.as_tensor(np.stack([yn for yn, _ in scaled]), dtype=torch.float32)
    train = torch.as_tensor(~is_val).unsqueeze(0).repeat(m, 1)
    check = torch.as_tensor(is_val).unsqueeze(0).repeat(m, 1) if n_val else None
    res = S.fit(S.fresh(m, DEFAULT_LAYERS, gen), xt, yt, train, epochs=epochs, lr=lr, batch=batch, dropout=dropout,
                gen=gen, check_mask=check, on_epoch=on_epoch)
    nets = []
    for i, (_, ysc) in enumerate(scaled):
        net = Net(S.to_sequential(res.params, i, DEFAULT_LAYERS, dropout), xsc, ysc, epochs_run=res.epochs_run)
        if n_val:
            pred = net.predict(x[is_val])
            net.val_mape = mape(pred, targets[i][is_val])
            net.val_log_residuals = tuple(np.sort(np.log(targets[i][is_val]) - np.log(pred)).tolist())
        nets.append(net)
    return nets


def transfer(reference: Net, x: np.ndarray, y: np.ndarray, *, epochs: int = 300, lr: float = 1e-3,
             seed: int = 0) -> Net:
    """Copy the reference, replace its last layer, fine-tune all layers on all k profiled modes (a
    held-out split of 50 modes cost 2-4 points of MAPE on the twin). The knob scaler stays the
    reference's (the learned features depend on it); the target scaler is fitted to the new modes."""
    return transfer_many(reference, [(x, y)], epochs=epochs, lr=lr, seed=seed)[0]


def from_scratch(x: np.ndarray, y: np.ndarray, *, epochs: int = 300, lr: float = 1e-3, seed: int = 0) -> Net:
    """The baseline: the same network trained on the same k modes only."""
    return scratch_many([(x, y)], epochs=epochs, lr=lr, seed=seed)[0]


def transfer_many(reference: Net, sets: list[tuple[np.ndarray, np.ndarray]], *, epochs: int = 300,
                  lr: float = 1e-3, seed: int = 0, dropout: tuple[float, ...] | None = None,
                  on_epoch: S.EpochCallback | None = None) -> list[Net]:
    """``transfer`` of one reference to each (modes, targets) set, all trained in one pass (one pass per
    STACK_CHUNK sets, each reported to ``on_epoch``)."""
    drop = reference_dropout(reference) if dropout is None else dropout
    return _fit_sets(sets, reference, epochs=epochs, lr=lr, seed=seed, dropout=drop, on_epoch=on_epoch)


def scratch_many(sets: list[tuple[np.ndarray, np.ndarray]], *, epochs: int = 300, lr: float = 1e-3,
                 seed: int = 0, dropout: tuple[float, ...] = DEFAULT_DROPOUT,
                 on_epoch: S.EpochCallback | None = None) -> list[Net]:
    """``from_scratch`` on each (modes, targets) set, all trained in one pass."""
    return _fit_sets(sets, None, epochs=epochs, lr=lr, seed=seed, dropout=dropout, on_epoch=on_epoch)


def passes(sets: int) -> int:
    """How many stacked passes ``transfer_many``/``scratch_many`` make for ``sets`` sets (for progress reports)."""
    return -(-sets // STACK_CHUNK)


def reference_dropout(net: Net) -> tuple[float, ...]:
    """The dropout rates of a network's hidden layers, read from its modules (0 where it has none)."""
    rates: list[float] = []
    mods = list(net.model)
    for i, mod in enumerate(mods):
        if isinstance(mod, nn.Linear) and i + 1 < len(mods):
            nxt = mods[i + 2] if i + 2 < len(mods) else None
            rates.append(float(nxt.p) if isinstance(nxt, nn.Dropout) else 0.0)
    return tuple(rates)


def _fit_sets(sets: list[tuple[np.ndarray, np.ndarray]], reference: Net | None, *, epochs: int, lr: float,
              seed: int, dropout: tuple[float, ...], on_epoch: S.EpochCallback | None = None) -> list[Net]:
    for x, y in sets:
        _check(x, y)
    gen = torch.Generator().manual_seed(seed)
    out: list[Net] = []
    for lo in range(0, len(sets), STACK_CHUNK):
        out += _fit_chunk(sets[lo:lo + STACK_CHUNK], reference, epochs=epochs, lr=lr, gen=gen, dropout=dropout,
                          on_epoch=on_epoch)
    return out


def _fit_chunk(sets: list[tuple[np.ndarray, np.ndarray]], reference: Net | None, *, epochs: int, lr: float,
               gen: torch.Generator, dropout: tuple[float, ...], on_epoch: S.EpochCallback | None) -> list[Net]:
    m, n = len(sets), max(len(x) for x, _ in sets)
    xscs = [reference.x_scaler if reference is not None else Scaler.fit(x) for x, _ in sets]
    scaled = [_targets(y) for _, y in sets]
    xt = torch.zeros(m, n, 4)
    yt = torch.zeros(m, n)
    mask = torch.zeros(m, n, dtype=torch.bool)
    for i, ((x, _), xsc, (yn, _)) in enumerate(zip(sets, xscs, scaled, strict=True)):
        xt[i, :len(x)] = torch.as_tensor(xsc(x), dtype=torch.float32)
        yt[i, :len(x)] = torch.as_tensor(yn, dtype=torch.float32)
        mask[i, :len(x)] = True
    start = (S.fresh(m, DEFAULT_LAYERS, gen) if reference is None
             else S.from_sequential(reference.model, m, gen, new_head=True))
    res = S.fit(start, xt, yt, mask, epochs=epochs, lr=lr, batch=16, dropout=dropout, gen=gen, on_epoch=on_epoch)
    return [Net(S.to_sequential(res.params, i, DEFAULT_LAYERS, dropout), xscs[i], scaled[i][1],
                epochs_run=res.epochs_run) for i in range(m)]
