"""Issue 29: the demo explains what it shows. A baseline beside the job's choice (the presets an operator would have
picked for the budget, and what they would have cost), and a word where a preset behaves unexpectedly (AGX Orin's
MODE_50W slower than MODE_30W for MobileNetV3), computed from the twin, not written in."""

from __future__ import annotations

from jetfleet.lab.demo import _twin_story, baseline_story
from jetfleet.lab.presets import budget_presets, inversions, preset_costs


def test_a_higher_power_preset_that_is_slower_is_explained_from_what_bounds_the_workload():
    costs = preset_costs("agx-orin", "mobilenet_v3", ["MAXN", "MODE_50W", "MODE_30W", "MODE_15W"])
    by = {c.name: c for c in costs}
    assert by["MODE_50W"].minibatch_ms > by["MODE_30W"].minibatch_ms   # the case the demo showed without a word
    (note,) = inversions("mobilenet_v3", costs)
    assert note.startswith("mobilenet_v3: MODE_50W is slower than MODE_30W") and by["MODE_50W"].bound in ("data", "launch")
    assert "1497.6 vs 1728 MHz CPU" in note and "the CPU clock" in note
    # ResNet-18 is bound by its GPU work in every preset: more power, more speed, and nothing to explain
    assert inversions("resnet18", preset_costs("agx-orin", "resnet18", ["MAXN", "MODE_50W", "MODE_30W", "MODE_15W"])) == []


def test_the_twin_step_prints_the_why():
    lines: list[str] = []
    _twin_story(lines.append)
    assert any(ln.startswith("   why: mobilenet_v3: MODE_50W is slower than MODE_30W") for ln in lines), lines
    assert sum("(bound by " in ln for ln in lines) == 8


def test_the_baseline_is_the_boards_presets_for_the_budget_beside_the_job():
    assert budget_presets("agx-xavier", 30.0) == ["MODE_30W_ALL", "MODE_30W_6CORE", "MODE_30W_4CORE", "MODE_30W_2CORE"]
    costs = preset_costs("agx-xavier", "mobilenet_v3", budget_presets("agx-xavier", 30.0), seed=1)
    best = min((c for c in costs if c.power_w <= 30), key=lambda c: c.minibatch_ms)
    lines: list[str] = []
    # a job that ran 4,000 minibatches at 250 ms and 27 W
    baseline_story(lines.append, 4000, 4000 * 0.25, 4000 * 0.25 * 27, budget_w=30.0, seed=1)
    text = "\n".join(lines)
    assert all(n in text for n in budget_presets("agx-xavier", 30.0)) and "the job" in text
    ratio = best.minibatch_ms / 250
    assert f"({best.name}), the job took {ratio:.2f}x less time per minibatch" in text, text
