"""Run defaults and the protocol version, defined once for the agent, the twin and the controller.

The papers' protocol: minibatches of 16 samples, 4 data-loader workers, 40 minibatches kept per
mode after warm-up, power sampled every 100 ms."""

from __future__ import annotations

PROTOCOL_VERSION = 1            # the agent session's wire protocol; a hello with another one is refused

MINIBATCHES = 40                # kept per profiled mode, after warm-up and the steady state
MINIBATCH_SIZE = 16
WORKERS = 4                     # data-loader worker processes
SAMPLE_INTERVAL_S = 0.1         # power and telemetry sampling
