"""The agent's energy meter counts back to where a command's time begins: a command that adopts a training session
while the board paces one of its reports counts that report's board time from where its pacing began
(``agent/attach.py``), and its energy must cover the same span — else a short command's power is diluted, or 0 W
when its steps all fall in that report (an attached job's 10-step profile once stored 'power_w=0.0')."""

from __future__ import annotations

import pytest

from jetfleet.agent.energy import EnergyMeter
from jetfleet.twin import EmulatedBoard


def test_a_meter_extended_back_counts_the_energy_of_the_span_it_was_extended_over():
    board = EmulatedBoard("agx-xavier", 1)                       # infinite speed: board time moves with its work
    whole = EnergyMeter(board)
    t_begin = whole.start()
    for _ in range(20):
        board.step_training("resnet18")
    late = EnergyMeter(board)
    t_mid = late.start()
    for _ in range(20):
        board.step_training("resnet18")
    t_end = board.now_s()
    assert t_begin < t_mid < t_end
    assert late.energy_j(t_mid) == 0.0                                # nothing counted before its start ...
    late.extend_back(t_begin)
    energy_j = late.energy_j(t_end)
    assert energy_j == pytest.approx(whole.energy_j(t_end), rel=0.03)   # ... until it is extended back
    assert energy_j / (t_end - t_begin) > 5.0                           # the board's training power, not 0 W
    whole.stop()
    late.stop()
