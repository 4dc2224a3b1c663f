"""What NVIDIA's presets cost a workload on the twin, for the demo: the baseline an operator would have picked
(the preset named for the budget) beside the job's own choice, and why a higher-power preset can be the slower
one (AGX Orin's MODE_50W against MODE_30W for MobileNetV3: the explanation is computed from the twin's time
components, not written in)."""

from __future__ import annotations

from dataclasses import dataclass

from jetfleet.shared import defaults
from jetfleet.shared.catalog import PowerMode, get_catalog
from jetfleet.shared.workloads import get_workload
from jetfleet.twin.board import EmulatedBoard
from jetfleet.twin.measure import measure_on_twin
from jetfleet.twin.physics import steady_state

BOUND_WORDS = {"gpu": "the GPU's work (its clock and the memory's)",
               "launch": "launching its kernels from one CPU core (so the CPU clock sets its pace)",
               "data": "its data pipeline on the CPU cores (their number and clock)"}


@dataclass(frozen=True)
class PresetCost:
    """One preset measured on the twin: time and energy per minibatch, mean power, and what bounds the minibatch."""

    name: str
    mode: PowerMode
    minibatch_ms: float
    power_w: float
    energy_j: float
    bound: str          # gpu, launch or data: the longest of the twin's time components in this mode
    launch_ms: float
    gpu_ms: float
    data_ms: float


def preset_costs(model: str, workload: str, names: list[str], seed: int = 0) -> list[PresetCost]:
    """Each named preset of ``model`` measured on the twin (board ``seed``) running ``workload``."""
    cat = get_catalog(model)
    board = EmulatedBoard(model, seed)
    out = []
    for name in names:
        mode = cat.presets[name]
        s = measure_on_twin(board, workload, mode).summary
        st = steady_state(cat, get_workload(workload), mode)
        parts = {"gpu": st.gpu_s, "launch": st.launch_s, "data": st.data_s}
        out.append(PresetCost(name, mode, s.minibatch_time_median_ms, s.power_mean_w, s.energy_per_minibatch_j,
                              max(parts, key=lambda k: parts[k]), st.launch_s * 1e3, st.gpu_s * 1e3, st.data_s * 1e3))
    return out


def _knobs_apart(a: PowerMode, b: PowerMode) -> str:
    said = []
    for knob, unit in (("cores", " cores"), ("cpu_mhz", " MHz CPU"), ("gpu_mhz", " MHz GPU"), ("mem_mhz", " MHz EMC")):
        x, y = getattr(a, knob), getattr(b, knob)
        if x != y:
            said.append(f"{x:g} vs {y:g}{unit}")
    return ", ".join(said)


def inversions(workload: str, costs: list[PresetCost]) -> list[str]:
    """For each preset that is slower than a preset listed after it (presets listed from the most power to the
    least), a sentence saying so and why, from what bounds the workload's minibatch in the slower one."""
    notes = []
    for i, hi in enumerate(costs):
        for lo in costs[i + 1:]:
            if hi.minibatch_ms > lo.minibatch_ms * 1.02:
                why = BOUND_WORDS[hi.bound]
                detail = {"launch": f"kernel launches {hi.launch_ms:.0f} ms against {hi.gpu_ms:.0f} ms of GPU work per "
                                    "minibatch",
                          "data": f"data loading {hi.data_ms:.0f} ms against {hi.gpu_ms:.0f} ms of GPU work per minibatch, "
                                  f"by {defaults.WORKERS} loader workers: cores beyond {defaults.WORKERS + 1} add nothing, "
                                  "the CPU clock does",
                          "gpu": f"GPU work {hi.gpu_ms:.0f} ms per minibatch"}[hi.bound]
                notes.append(f"{workload}: {hi.name} is slower than {lo.name} ({hi.minibatch_ms:.0f} against "
                             f"{lo.minibatch_ms:.0f} ms) and draws {'less' if hi.power_w < lo.power_w else 'more'} "
                             f"({hi.power_w:.1f} against {lo.power_w:.1f} W): the minibatch is bound by {why} ({detail}), "
                             f"and the presets differ in {_knobs_apart(hi.mode, lo.mode)}. A preset's name is a power "
                             "cap, not a speed: which knobs it caps decides, workload by workload")
    return notes


def budget_presets(model: str, budget_w: float) -> list[str]:
    """The presets of ``model`` named for ``budget_w`` (MODE_30W_ALL, MODE_30W_6CORE, ... for 30 W)."""
    from jetfleet.research.powertrain.evaluate import preset_budget_w

    return [n for n in get_catalog(model).presets if preset_budget_w(n) == budget_w]
