"""Your own training under jetfleet: a plain PyTorch loop on scikit-learn's digits (1,797 8x8 images that ship
inside scikit-learn: nothing is downloaded), told to the board's agent once per optimiser step.

    python train.py [--epochs 20] [--socket /run/jetfleet/session.sock] [--unmanaged-ok]

Three lines are jetfleet's: the Session (with the model and one minibatch, so an emulated board's twin can time
it), ``s.step()`` after each ``opt.step()``, and an energy window around each epoch. Everything else is the
operator's own code."""

from __future__ import annotations

import argparse
import os

import torch
from sklearn.datasets import load_digits
from torch import nn

from jetfleet.session import Session


def data(batch: int, seed: int = 0):
    """The digits as a shuffled training loader and a held-out test set of 360."""
    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target, dtype=torch.long)
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(x), generator=g)
    test, train = order[:360], order[360:]
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x[train], y[train]), batch_size=batch,
                                         shuffle=True, generator=g, drop_last=True)
    return loader, x[test], y[test]


def mlp() -> nn.Module:
    """The model: a 64-128-10 MLP."""
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


def main() -> None:
    """Train, telling the board each step; print each epoch's accuracy and energy."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--socket", default=None, help="the agent's --session-socket (default: $JETFLEET_SESSION_SOCKET "
                                                   "or /run/jetfleet/session.sock)")
    ap.add_argument("--name", default=os.environ.get("JETFLEET_WORKLOAD", "digits-mlp"),
                    help="the workload's name (what `job submit --attach` names; a template's launch sets "
                         "$JETFLEET_WORKLOAD)")
    ap.add_argument("--unmanaged-ok", action="store_true", help="train on without an agent (a warning says so)")
    args = ap.parse_args()
    torch.manual_seed(0)
    loader, x_test, y_test = data(args.batch)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    example, _ = next(iter(loader))
    with Session(args.name, path=args.socket, model=model, example_input=example,
                 minibatches=args.epochs * len(loader), strict=not args.unmanaged_ok) as s:
        for epoch in range(args.epochs):
            s.begin("epoch")
            for xb, yb in loader:
                opt.zero_grad()
                loss_fn(model(xb), yb).backward()
                opt.step()
                s.step()
                if s.stop_requested:   # launched from a template: its job has trained its length
                    break
            w = s.end("epoch")
            with torch.no_grad():
                accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
            energy = f"{w.energy_j:.4g} J, mean {w.mean_w:.2f} W" if w.energy_j is not None else "energy unmeasured"
            print(f"epoch {epoch + 1}: test accuracy {accuracy:.3f}; board {w.seconds:.4g} s, {energy}", flush=True)
            if s.stop_requested:
                print("the agent asked to stop: the job has trained its length", flush=True)
                break
    print(f"{s.steps} steps; final test accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()
