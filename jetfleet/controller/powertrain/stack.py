"""Many copies of PowerTrain's MLP trained in one pass: every layer's weights are stacked along a
leading model axis and applied with batched matmuls, so M independent networks (the folds of a
cross-validation, the repeats of an evaluation, a time and a power network) cost about what one
costs. Each copy draws its own minibatches from its own training rows, has its own dropout masks,
its own Adam state (Adam is elementwise) and keeps its own best checkpoint: training is the same
as M separate runs, only faster on a CPU where a tiny MLP's step is all overhead.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

Params = list[tuple[torch.Tensor, torch.Tensor]]   # per layer: W [M, in, out], b [M, 1, out]
# Called after every epoch with (epochs done, epochs asked, each copy's best check loss so far); it may raise to
# stop the fit (an operator cancelled the training): nothing of the fit is returned then.
EpochCallback = Callable[[int, int, np.ndarray], None]
_threads_lock = threading.Lock()
_threads_users = [0, 0]   # fits running, torch's thread count before the first


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """torch on one thread while fits run: a step of these tiny networks is all overhead, and extra
    threads spin-wait (on a loaded 2-core machine a reference fit took 3x longer with 2 threads)."""
    with _threads_lock:
        if _threads_users[0] == 0:
            _threads_users[1] = torch.get_num_threads()
            torch.set_num_threads(1)
        _threads_users[0] += 1
    try:
        yield
    finally:
        with _threads_lock:
            _threads_users[0] -= 1
            if _threads_users[0] == 0:
                torch.set_num_threads(_threads_users[1])


@dataclass
class FitResult:
    """What ``fit`` returns: the best parameters of every copy, its best check loss, and the epochs run."""

    params: Params
    best_loss: np.ndarray
    epochs_run: int


def fresh(m: int, layers: tuple[int, ...], gen: torch.Generator) -> Params:
    """M freshly initialised copies (nn.Linear's default: uniform in +-1/sqrt(fan_in))."""
    params: Params = []
    width = 4
    for h in (*layers, 1):
        params.append(_linear(m, width, h, gen))
        width = h
    return params


def _linear(m: int, fan_in: int, fan_out: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    bound = 1.0 / math.sqrt(fan_in)
    w = (torch.rand(m, fan_in, fan_out, generator=gen) * 2 - 1) * bound
    b = (torch.rand(m, 1, fan_out, generator=gen) * 2 - 1) * bound
    return w, b


def from_sequential(model: nn.Sequential, m: int, gen: torch.Generator, *, new_head: bool) -> Params:
    """M copies of a trained network's weights; with ``new_head`` each copy's last layer is re-initialised
    (PowerTrain's transfer: the reference's features, a fresh output layer)."""
    linears = [mod for mod in model if isinstance(mod, nn.Linear)]
    params: Params = []
    for i, lin in enumerate(linears):
        if new_head and i == len(linears) - 1:
            params.append(_linear(m, lin.in_features, lin.out_features, gen))
            continue
        w = lin.weight.detach().t().unsqueeze(0).repeat(m, 1, 1).contiguous()
        b = lin.bias.detach().view(1, 1, -1).repeat(m, 1, 1).contiguous()
        params.append((w, b))
    return params


def forward(params: Params, x: torch.Tensor, dropout: tuple[float, ...], train: bool) -> torch.Tensor:
    """Outputs [M, B] of the M copies on their rows x [M, B, 4]."""
    h = x
    last = len(params) - 1
    for i, (w, b) in enumerate(params):
        h = torch.baddbmm(b, h, w)
        if i < last:
            h = torch.relu(h)
            p = dropout[i] if i < len(dropout) else 0.0
            if train and p > 0:  # a uniform draw per unit: half the cost of nn.functional.dropout on a CPU
                h = h * (torch.rand_like(h) >= p) * (1.0 / (1.0 - p))
    return h.squeeze(-1)


def fit(params: Params, x: torch.Tensor, y: torch.Tensor, train_mask: torch.Tensor, *, epochs: int, lr: float,
        batch: int, dropout: tuple[float, ...], gen: torch.Generator, check_mask: torch.Tensor | None = None,
        patience: int | None = None, on_epoch: EpochCallback | None = None) -> FitResult:
    """Adam on MSE for every copy at once. x [M, n, 4] and y [M, n] are the copies' (standardised) rows;
    ``train_mask`` [M, n] says which rows each copy trains on, ``check_mask`` which it checkpoints on
    (its training rows when None). Each copy keeps the parameters of its lowest check loss. ``on_epoch`` hears
    of every epoch and may stop the fit by raising."""
    with one_thread():
        return _fit(params, x, y, train_mask, epochs=epochs, lr=lr, batch=batch, dropout=dropout, gen=gen,
                    check_mask=check_mask, patience=patience, on_epoch=on_epoch)


def _fit(params: Params, x: torch.Tensor, y: torch.Tensor, train_mask: torch.Tensor, *, epochs: int, lr: float,
         batch: int, dropout: tuple[float, ...], gen: torch.Generator, check_mask: torch.Tensor | None,
         patience: int | None, on_epoch: EpochCallback | None) -> FitResult:
    m, n = train_mask.shape
    counts = train_mask.sum(1)
    if int(counts.min()) < 1:
        raise ValueError("every copy needs at least one training row")
    check = train_mask if check_mask is None else check_mask
    check_counts = check.sum(1).clamp(min=1)
    live = [t.clone().requires_grad_(True) for pair in params for t in pair]
    opt = _adam(live, lr)
    best = [t.detach().clone() for t in live]
    best_loss = torch.full((m,), math.inf)
    best_epoch = torch.zeros(m, dtype=torch.long)
    steps = math.ceil(int(counts.max()) / batch)
    offsets = torch.arange(batch)
    ran = 0
    for epoch in range(epochs):
        ran = epoch + 1
        keys = torch.rand(m, n, generator=gen).masked_fill(~train_mask, 2.0)
        order = keys.argsort(dim=1)     # each copy's training rows first, shuffled
        for s in range(steps):
            pos = (s * batch + offsets).unsqueeze(0) % counts.unsqueeze(1)
            idx = order.gather(1, pos)
            xb = x.gather(1, idx.unsqueeze(-1).expand(-1, -1, x.shape[-1]))
            yb = y.gather(1, idx)
            opt.zero_grad(set_to_none=True)
            out = forward(_pairs(live), xb, dropout, True)
            ((out - yb) ** 2).mean(1).sum().backward()
            opt.step()
        with torch.no_grad():
            err = ((forward(_pairs(live), x, dropout, False) - y) ** 2 * check).sum(1) / check_counts
            better = err < best_loss
            if bool(better.any()):
                for keep, cur in zip(best, live, strict=True):
                    keep.copy_(torch.where(better.view(-1, *([1] * (cur.dim() - 1))), cur.detach(), keep))
                best_loss = torch.where(better, err, best_loss)
                best_epoch = torch.where(better, torch.full_like(best_epoch, epoch), best_epoch)
        if on_epoch is not None:
            on_epoch(ran, epochs, best_loss.numpy().copy())
        if patience is not None and int((epoch - best_epoch).min()) > patience:
            break
    return FitResult(_pairs(best), best_loss.numpy(), ran)


def _adam(params: list[torch.Tensor], lr: float) -> torch.optim.Optimizer:
    """Adam, fused where this torch has a fused CPU kernel (2.4+; ~10x faster on stacked weights)."""
    try:
        return torch.optim.Adam(params, lr=lr, fused=True)
    except (RuntimeError, TypeError):
        return torch.optim.Adam(params, lr=lr, foreach=True)


DEFAULT_LAYERS = (256, 128, 64)
PUBLISHED_DROPOUT = (0.4, 0.3, 0.0)   # PowerTrain's reference MLP


def mlp(layers: tuple[int, ...] = DEFAULT_LAYERS, dropout: tuple[float, ...] = PUBLISHED_DROPOUT) -> nn.Sequential:
    """4 -> 256 -> dropout 0.4 -> 128 -> dropout 0.3 -> 64 -> 1, ReLU (the published architecture; ``dropout``
    sets each hidden layer's rate, 0 for none)."""
    mods: list[nn.Module] = []
    width = 4
    for h, p in zip(layers, dropout, strict=True):
        mods += [nn.Linear(width, h), nn.ReLU()]
        if p > 0:
            mods.append(nn.Dropout(p))
        width = h
    mods.append(nn.Linear(width, 1))
    return nn.Sequential(*mods)


def _pairs(flat: list[torch.Tensor]) -> Params:
    return [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]


def to_sequential(params: Params, i: int, layers: tuple[int, ...], dropout: tuple[float, ...],
                  build: type[nn.Sequential] | None = None) -> nn.Sequential:
    """Copy ``i`` of a stack as a plain nn.Sequential with the published layout (what a model document stores)."""
    model = mlp(layers, dropout)
    linears = [mod for mod in model if isinstance(mod, nn.Linear)]
    with torch.no_grad():
        for lin, (w, b) in zip(linears, params, strict=True):
            lin.weight.copy_(w[i].t())
            lin.bias.copy_(b[i, 0])
    return model
