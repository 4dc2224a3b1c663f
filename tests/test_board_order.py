"""The order a board runs a campaign's commands in, as the controller keeps it (campaigns/board_order.py): which
mode a vanished or stalled board was running, and which were only waiting behind it."""

from __future__ import annotations

from jetfleet.controller.campaigns.board_order import BoardOrder


def test_when_the_agent_dies_only_the_first_unfinished_command_was_running():
    o = BoardOrder()
    assert all(o.sent("nano-0", c, "agent-1") for c in ("a", "b", "c"))   # each new: last in line
    o.sent("nano-1", "x", "agent-9")                      # another board: its own line
    # the agent dies: every command fails; only the first was running
    assert [o.behind("nano-0", c) for c in ("a", "b", "c")] == [False, True, True]
    assert not o.behind("nano-1", "x")
    # it comes back as a new process: what the last one was sent is gone, a resend of b is first in line
    o.sent("nano-0", "b", "agent-2")
    o.sent("nano-0", "a", "agent-2")
    assert o.waiting("nano-0") == ["b", "a"] and not o.behind("nano-0", "b") and o.behind("nano-0", "a")


def test_a_result_finishes_what_was_sent_before_it_and_a_resend_keeps_its_place():
    o = BoardOrder()
    for c in ("a", "b", "c"):
        o.sent("nano-0", c, "agent-1")
    # a stalls: b and c time out behind it; sent again (same ids, same process) they keep their places
    assert not o.sent("nano-0", "b", "agent-1") and not o.sent("nano-0", "a", "agent-1")
    assert o.waiting("nano-0") == ["a", "b", "c"] and o.behind("nano-0", "b") and not o.behind("nano-0", "a")
    o.finished("nano-0", "b")                              # b's result: a, sent before it, is done too
    assert o.waiting("nano-0") == ["c"] and not o.behind("nano-0", "c")


def test_a_refusal_or_an_undelivered_command_frees_only_its_own_place():
    o = BoardOrder()
    for c in ("a", "b", "c"):
        o.sent("nano-0", c, "agent-1")
    o.dropped("nano-0", "b")            # refused at once (a check) while a still runs
    assert o.waiting("nano-0") == ["a", "c"] and o.behind("nano-0", "c")
    o.finished("nano-0", "unknown")     # an id it does not hold changes nothing
    assert o.waiting("nano-0") == ["a", "c"]
    o.clear()
    assert o.waiting("nano-0") == [] and not o.behind("nano-0", "c")
