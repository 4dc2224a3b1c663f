"""The board-side API a training process imports: a session with its board's agent.

    from jetfleet.session import Session

    with Session("digits-mlp", power_budget_w=30, minibatches=2000) as s:
        for x, y in loader:
            loss = loss_fn(model(x), y); loss.backward(); opt.step(); opt.zero_grad()
            s.step()                       # once per optimiser step (or s.step(n) for n at once)
        s.begin("eval"); evaluate(model); w = s.end("eval")   # joules, seconds, mean W from the board's rails

Importable on the boards' Pythons (3.8, 3.10) without torch, gRPC or the controller. With no agent on the board
``Session`` raises ``NoAgentError``; ``strict=False`` lets training go on unmanaged, with a warning saying so."""

from jetfleet.session.client import EnergyWindow, NoAgentError, Session, SessionError, socket_path

__all__ = ["EnergyWindow", "NoAgentError", "Session", "SessionError", "socket_path"]
