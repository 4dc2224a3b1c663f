"""A run's power samples as columns (issue 28, target 3): the twin builds a trace as one block, the profiler cuts
its window out of it and the agent sends that block as it is; every sample stays what the sensors would have
read, one by one."""

from __future__ import annotations

from dataclasses import replace

from jetfleet.agent.profiler import ProfileRequest, profile, profile_result_pb
from jetfleet.agent.trace import PowerTrace
from jetfleet.shared.columns import samples_from_columns
from jetfleet.shared.convert import sample_to_pb
from jetfleet.twin.board import EmulatedBoard


def _busy_board() -> EmulatedBoard:
    board = EmulatedBoard("agx-orin", 3)
    board.run_minibatches("resnet18", 60)
    return board


def test_the_twins_columns_are_the_samples_its_sensors_read_one_by_one():
    board = _busy_board()
    end = board.now_s()
    trace = board.trace_columns(end - 4.0, end, 0.1)
    samples = trace.samples()
    assert len(trace) == len(samples) == 41
    # sample_at computes one reading with scalars, independently of the arrays
    assert samples == [board.sample_at(s.t_s) for s in samples]
    assert board.trace(end - 4.0, end, 0.1) == samples


def test_a_window_keeps_the_samples_inside_it_and_goes_on_the_wire_unchanged():
    board = _busy_board()
    end = board.now_s()
    trace = board.trace_columns(end - 4.0, end, 0.1)
    every = trace.samples()
    t0, t1 = every[7].t_s, every[23].t_s   # both ends are samples: the window holds them
    window = trace.window(t0, t1)
    assert window.samples() == [s for s in every if t0 <= s.t_s <= t1] and len(window) == 17
    assert window.column("total_w") == [s.total_w for s in every[7:24]]
    wire = samples_from_columns(window.columns_pb())
    assert wire == [sample_to_pb(s) for s in every[7:24]]
    assert len(trace.window(end + 1.0, end + 2.0)) == 0


def test_samples_without_one_layout_stay_samples_and_go_one_message_each():
    board = _busy_board()
    end = board.now_s()
    every = board.trace(end - 1.0, end, 0.1)
    lost = dict(every[3].rails_w)
    lost.pop("VDD_CPU_CV")                  # a rail that vanished for one reading
    mixed = every[:3] + [replace(every[3], rails_w=lost)] + every[4:]
    trace = PowerTrace.from_samples(mixed)
    assert trace.columns_pb() is None
    assert trace.window(every[2].t_s, every[5].t_s).samples() == mixed[2:6]
    assert trace.column("total_w") == [s.total_w for s in mixed]
    same = PowerTrace.from_samples(every)    # one layout: columns, the same numbers
    assert same.columns_pb() is not None and same.samples() == every


def test_a_profile_window_goes_as_one_block_or_as_samples_with_the_same_numbers():
    board = EmulatedBoard("agx-orin", 4)
    p = profile(board, ProfileRequest("resnet18", board.catalog.maxn))
    block, each = profile_result_pb(p, columns=True), profile_result_pb(p, columns=False)
    assert block.power_columns.samples == len(p.power) >= 20 and not block.power
    assert not each.HasField("power_columns") and list(each.power) == samples_from_columns(block.power_columns)
    assert all(p.window_start_s <= s.t_s <= p.window_end_s for s in each.power)
