"""Results checked and stored in shared hops (issue 28, target 3, campaigns/batch.py): calls that arrive while a
hop runs go in the next one together; each still runs on its own, in order, and answers its own caller."""

from __future__ import annotations

import asyncio
import threading

import pytest

from jetfleet.controller.campaigns.batch import SharedHops
from jetfleet.shared.errors import StoreUnavailable


async def _until(pred, what: str) -> None:   # type: ignore[no-untyped-def]
    for _ in range(100_000):
        if pred():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never: {what}")


def test_calls_that_arrive_during_a_hop_share_the_next_and_each_gets_its_own_answer():
    async def main() -> None:
        hops, gate, order = SharedHops(), threading.Event(), []

        def first() -> str:
            gate.wait(10)
            order.append(0)
            return "a"

        def double(i: int) -> int:
            order.append(i)
            return 2 * i

        def down() -> None:
            order.append("down")
            raise StoreUnavailable("the store is down")

        head = asyncio.ensure_future(hops.run(first))
        await _until(lambda: hops.hops == 1, "the first hop started")
        rest = [asyncio.ensure_future(c) for c in (hops.run(double, 1), hops.run(double, 2), hops.run(down),
                                                     hops.run(double, 3))]
        await _until(lambda: hops.calls == 5, "every call waiting")
        gate.set()
        with pytest.raises(StoreUnavailable):   # only its own caller sees it
            await rest[2]
        got = await asyncio.gather(head, rest[0], rest[1], rest[3])
        assert got == ["a", 2, 4, 6]
        assert order == [0, 1, 2, "down", 3]
        assert (hops.calls, hops.hops) == (5, 2)
        await hops.close()

    asyncio.run(main())


def test_closing_cancels_the_callers_of_a_hop_that_will_not_answer():
    async def main() -> None:
        hops, gate = SharedHops(), threading.Event()
        head = asyncio.ensure_future(hops.run(gate.wait, 10))
        await _until(lambda: hops.hops == 1, "the first hop started")
        waiting = asyncio.ensure_future(hops.run(int, "7"))
        await _until(lambda: hops.calls == 2, "the second call waiting")
        await hops.close()
        gate.set()
        for fut in (head, waiting):
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(fut, 10)   # cancelled, not left waiting (TimeoutError)

    asyncio.run(main())
