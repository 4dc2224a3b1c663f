"""The workloads an agent runs: the torch models (``models``), the real training loop
(``training``) and their off-board characterisation (``characterise``). The registry of names and
shapes is shared: ``jetfleet.shared.workloads``."""
