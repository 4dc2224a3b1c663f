"""Model training an operator can follow and stop: the epochs of a training in a worker thread become
ModelProgress messages on the event loop (at most ten a second per phase, plus each phase's last epoch), and an
operator who stops listening (Ctrl-C on the CLI cancels the call) stops the training at its next epoch, before
anything is stored."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import numpy as np

from jetfleet.shared.errors import Cancelled
from jetfleet.shared.proto import operator_pb2

log = logging.getLogger(__name__)
MIN_INTERVAL_S = 0.1


class EpochReporter:
    """The epoch callback of a training made of stacked passes (one ``phases`` entry each): reports progress
    through ``send`` and raises Cancelled at the next epoch (or ``check``) once ``stop`` is set."""

    def __init__(self, phases: list[str], send: Callable[[operator_pb2.ModelProgress], None], *,
                 stop: threading.Event | None = None, clock: Callable[[], float] = time.monotonic,
                 min_interval_s: float = MIN_INTERVAL_S) -> None:
        self.phases, self.send = phases, send
        self.stop = stop or threading.Event()
        self.clock, self.min_interval_s = clock, min_interval_s
        self.start = clock()
        self._phase = 0          # index into phases of the pass under way
        self._last_epoch = 0
        self._last_sent = -float("inf")

    def check(self) -> None:
        """Cancelled if the operator stopped the training."""
        if self.stop.is_set():
            raise Cancelled("training cancelled by the operator; no model was stored")

    def __call__(self, epoch: int, epochs: int, losses: np.ndarray) -> None:
        """One epoch of the current pass is done (a new pass starts when the epoch count starts again)."""
        self.check()
        if epoch <= self._last_epoch:
            self._phase = min(self._phase + 1, len(self.phases) - 1)
        self._last_epoch = epoch
        now = self.clock()
        if epoch == epochs or now - self._last_sent >= self.min_interval_s:
            self._last_sent = now
            self.send(operator_pb2.ModelProgress(
                phase=self.phases[self._phase], epoch=epoch, epochs=epochs, phase_index=self._phase + 1,
                phases=len(self.phases), losses=[float(v) for v in losses], elapsed_s=now - self.start))


async def stream_training(work: Callable[[EpochReporter], Any], phases: list[str],
                          info: Callable[[Any], operator_pb2.ModelInfo],
                          on_running: Callable[[int], None] = lambda delta: None) -> AsyncIterator[operator_pb2.ModelProgress]:
    """Run ``work(reporter)`` in a worker thread and yield its progress, then a last message holding
    ``info(result)``. If the caller stops iterating (the client cancelled), the work is told to stop and raises
    Cancelled at its next epoch; ``on_running`` hears +1 when the work starts and -1 when its thread has ended."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[operator_pb2.ModelProgress] = asyncio.Queue()
    stop = threading.Event()
    def send(msg: operator_pb2.ModelProgress) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, msg)

    reporter = EpochReporter(phases, send, stop=stop)
    on_running(1)
    task = asyncio.ensure_future(asyncio.to_thread(work, reporter))

    def ended(t: asyncio.Future[Any]) -> None:
        on_running(-1)
        if not t.cancelled() and isinstance(t.exception(), Cancelled):
            log.info("training stopped: %s", t.exception())

    task.add_done_callback(ended)
    getter: asyncio.Future[Any] | None = None
    try:
        while True:
            if not queue.empty():
                yield queue.get_nowait()
                continue
            if task.done():
                break
            getter = asyncio.ensure_future(queue.get())
            await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                yield getter.result()
            else:
                getter.cancel()
        yield operator_pb2.ModelProgress(model=info(task.result()), phase=phases[-1], phase_index=len(phases),
                                         phases=len(phases), elapsed_s=reporter.clock() - reporter.start)
    finally:
        if getter is not None:
            getter.cancel()
        stop.set()   # a no-op when the work is done; otherwise it stops at its next epoch and stores nothing
