"""The cost of one training step of the operator's own model, measured in the training process (which has torch
and the model) with the code that characterises the built-ins and plugins, and sent to the agent as numbers: the
agent never receives code, and checks every figure (``shared.session_wire.check_cost``)."""

from __future__ import annotations

from typing import Any

from jetfleet.shared.errors import InvalidArgument


def model_cost(model: Any, example_input: Any) -> dict[str, Any]:
    """The characterisation of ``model`` trained on minibatches like ``example_input`` (torch needed)."""
    try:
        from jetfleet.agent.workloads.characterise import characterise_module
    except ImportError as e:
        raise InvalidArgument(f"characterising a model needs torch ({e})", field="model") from None
    try:
        return characterise_module(model, example_input)
    except (TypeError, ValueError) as e:
        raise InvalidArgument(f"cannot characterise the model: {e}", field="model") from None
