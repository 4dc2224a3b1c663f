"""PowerTrain's prediction networks (torch): separate time and power MLPs on the four standardised
knobs; a reference trained on a full grid, transferred by replacing the last layer and fine-tuning
every layer on k profiled modes of a new workload or board; and the from-scratch baseline."""

from __future__ import annotations

import copy
import io
import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from jetfleet.shared.errors import InvalidArgument

DEFAULT_LAYERS = (256, 128, 64)
DEFAULT_DROPOUT = (0.4, 0.3, 0.0)
MIN_MODES = 5


def mlp(layers: tuple[int, ...] = DEFAULT_LAYERS, dropout: tuple[float, ...] = DEFAULT_DROPOUT) -> nn.Sequential:
    """4 -> 256 -> dropout 0.4 -> 128 -> dropout 0.3 -> 64 -> 1, ReLU (the published architecture)."""
    mods: list[nn.Module] = []
    width = 4
    for h, p in zip(layers, dropout, strict=True):
        mods += [nn.Linear(width, h), nn.ReLU()]
        if p > 0:
            mods.append(nn.Dropout(p))
        width = h
    mods.append(nn.Linear(width, 1))
    return nn.Sequential(*mods)


@dataclass
class Scaler:
    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def fit(cls, x: np.ndarray) -> Scaler:
        std = x.std(axis=0)
        return cls(x.mean(axis=0), np.where(std > 1e-9, std, 1.0))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        result: np.ndarray = (x - self.mean) / self.std
        return result

    def to_list(self) -> list[list[float]]:
        return [self.mean.tolist(), self.std.tolist()]

    @classmethod
    def from_list(cls, v: list[list[float]]) -> Scaler:
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

    def predict(self, x: np.ndarray, *, mc_samples: int = 0) -> np.ndarray:
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
        buf = io.BytesIO()
        torch.save(self.model.state_dict(), buf)
        return buf.getvalue()

    @classmethod
    def from_state(cls, data: bytes, x_scaler: Scaler, y_scaler: Scaler,
                   dropout: tuple[float, ...] = DEFAULT_DROPOUT) -> Net:
        model = mlp(dropout=dropout)
        model.load_state_dict(torch.load(io.BytesIO(data), weights_only=True))
        return cls(model, x_scaler, y_scaler)


def mape(pred: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean(np.abs(pred - truth) / np.abs(truth)) * 100.0)


def _check(x: np.ndarray, y: np.ndarray) -> None:
    if x.ndim != 2 or x.shape[1] != 4 or len(x) != len(y):
        raise InvalidArgument("training data must be N modes x 4 knobs with one target each", field="modes")
    if len(x) < MIN_MODES:
        raise InvalidArgument(f"{len(x)} profiled modes are too few to train on; at least {MIN_MODES} needed",
                              field="modes")
    if not np.all(np.isfinite(y)) or np.any(y <= 0):
        raise InvalidArgument("targets must be positive and finite", field="targets")


def _fit(model: nn.Sequential, xs: np.ndarray, ys: np.ndarray, *, epochs: int, lr: float, batch: int,
         val_fraction: float, rng: np.random.Generator, y_scaler: Scaler,
         patience: int | None = None) -> tuple[float, int]:
    """Adam on MSE; keeps the best validation checkpoint (training loss when there is no split)."""
    n = len(xs)
    idx = rng.permutation(n)
    n_val = int(round(n * val_fraction)) if n >= 20 else 0
    val, tr = idx[:n_val], idx[n_val:]
    xt = torch.as_tensor(xs, dtype=torch.float32)
    yt = torch.as_tensor(ys, dtype=torch.float32)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    best = (math.inf, copy.deepcopy(model.state_dict()), 0)
    gen = torch.Generator().manual_seed(int(rng.integers(2**31)))
    ran = 0
    for epoch in range(epochs):
        ran = epoch + 1
        model.train()
        order = torch.as_tensor(tr)[torch.randperm(len(tr), generator=gen)]
        for start in range(0, len(order), batch):
            b = order[start:start + batch]
            opt.zero_grad(set_to_none=True)
            loss = nn.functional.mse_loss(model(xt[b]).squeeze(-1), yt[b])
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            check = val if len(val) else tr
            err = float(nn.functional.mse_loss(model(xt[check]).squeeze(-1), yt[check]))
        if err < best[0]:
            best = (err, copy.deepcopy(model.state_dict()), epoch)
        elif patience is not None and epoch - best[2] > patience:
            break
    model.load_state_dict(best[1])
    if len(val):
        with torch.no_grad():
            pred = np.exp(model(xt[val]).squeeze(-1).numpy() * y_scaler.std[0] + y_scaler.mean[0])
        truth = np.exp(ys[val] * y_scaler.std[0] + y_scaler.mean[0])
        return mape(pred, truth), ran
    return float("nan"), ran


def _targets(y: np.ndarray) -> tuple[np.ndarray, Scaler]:
    logy = np.log(y)[:, None]
    ys = Scaler.fit(logy)
    return ys(logy)[:, 0], ys


def train_reference(x: np.ndarray, y: np.ndarray, *, epochs: int = 100, lr: float = 1e-3, batch: int = 64,
                    val_fraction: float = 0.1, seed: int = 0, dropout: tuple[float, ...] = DEFAULT_DROPOUT) -> Net:
    """The reference network on a full grid (10% held out to pick the best checkpoint)."""
    _check(x, y)
    torch.manual_seed(seed)
    xsc = Scaler.fit(x)
    yn, ysc = _targets(y)
    model = mlp(dropout=dropout)
    val, ran = _fit(model, xsc(x), yn, epochs=epochs, lr=lr, batch=batch, val_fraction=val_fraction,
                    rng=np.random.default_rng(seed), y_scaler=ysc)
    return Net(model, xsc, ysc, val, ran)


def transfer(reference: Net, x: np.ndarray, y: np.ndarray, *, epochs: int = 300, lr: float = 1e-3,
             seed: int = 0) -> Net:
    """Copy the reference, replace its last layer, fine-tune all layers on all k profiled modes (a
    held-out split of 50 modes cost 2-4 points of MAPE on the twin). The knob scaler stays the
    reference's (the learned features depend on it); the target scaler is
    fitted to the new modes."""
    _check(x, y)
    torch.manual_seed(seed)
    model = copy.deepcopy(reference.model)
    last = model[-1]
    assert isinstance(last, nn.Linear)
    model[-1] = nn.Linear(last.in_features, 1)
    yn, ysc = _targets(y)
    val, ran = _fit(model, reference.x_scaler(x), yn, epochs=epochs, lr=lr, batch=16, val_fraction=0.0,
                    rng=np.random.default_rng(seed), y_scaler=ysc)
    return Net(model, reference.x_scaler, ysc, val, ran)


def from_scratch(x: np.ndarray, y: np.ndarray, *, epochs: int = 300, lr: float = 1e-3, seed: int = 0) -> Net:
    """The baseline: the same network trained on the same k modes only."""
    _check(x, y)
    torch.manual_seed(seed)
    xsc = Scaler.fit(x)
    yn, ysc = _targets(y)
    model = mlp()
    val, ran = _fit(model, xsc(x), yn, epochs=epochs, lr=lr, batch=16, val_fraction=0.0,
                    rng=np.random.default_rng(seed), y_scaler=ysc)
    return Net(model, xsc, ysc, val, ran)
