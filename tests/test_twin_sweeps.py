"""The twin's inference power held against real GPU-frequency sweeps of a Xavier NX and a Nano (issue 26)."""

import re
from pathlib import Path

import pytest

from jetfleet.research.twincheck.inception import forward_cost
from jetfleet.research.twincheck.sweeps import check_sweeps, markdown, read_sweeps
from jetfleet.shared.catalog import PowerMode, get_catalog
from jetfleet.shared.errors import InvalidArgument
from jetfleet.twin.governor import governed_mode
from jetfleet.twin.inference import GRAPH_EFFICIENCY, inference_state

DOC = Path(__file__).resolve().parents[1] / "docs" / "twin.md"
SWEEPS = "loudva-nx-nano/profiling-nx-nano.csv"


@pytest.fixture(scope="module")
def inception():
    return forward_cost(1)


def test_inception_v3_is_characterised_as_a_frozen_graph_serves_it(inception):
    cost = inception["by_batch"]["1"]
    assert cost["flops"] == pytest.approx(11.43e9, rel=0.01)        # 5.7 GMAC: Inception v3 at 299x299
    assert cost["param_bytes"] == pytest.approx(95.3e6, rel=0.01)   # 23.8 M parameters
    eager = forward_cost(1, fused=False)["by_batch"]["1"]
    assert eager["flops"] == pytest.approx(cost["flops"], rel=0.01) and eager["kernels"] > 2 * cost["kernels"]


def test_the_twin_agrees_with_the_real_nx_and_nano_sweeps_within_the_stated_tolerances(shared_data, inception):
    check = check_sweeps((shared_data / SWEEPS).read_text(), inception)
    assert check.failures() == []
    nx, nano = check.boards
    assert (nx.board_model, nano.board_model) == ("xavier-nx", "nano")
    assert nx.real_low_w == pytest.approx(3.38, abs=0.01) and nano.real_high_w == pytest.approx(6.22, abs=0.01)


def test_docs_show_the_table_the_twin_gives_today(shared_data, inception):
    """docs/twin.md §5d is the table ``markdown`` prints: a change of the twin's constants updates the page."""
    table = markdown(check_sweeps((shared_data / SWEEPS).read_text(), inception))
    doc = DOC.read_text()
    assert table in doc, "docs/twin.md §5d is stale: paste the table `jetfleet eval twin-sweeps` prints"


def test_a_pinned_gpu_stays_pinned_and_the_cpu_and_memory_follow_their_governors(inception):
    cat = get_catalog("xavier-nx")

    def state(m):
        return inference_state(cat, m, inception, 1, efficiency=GRAPH_EFFICIENCY)

    low, high = (governed_mode(cat, state, gpu_mhz=f) for f in (114.75, 1109.25))
    assert (low.gpu_mhz, high.gpu_mhz) == (114.75, 1109.25)
    assert low.mem_mhz < high.mem_mhz and low.cores == high.cores == max(cat.cores)
    free = governed_mode(cat, state)
    assert free == PowerMode(free.cores, free.cpu_mhz, free.gpu_mhz, free.mem_mhz) and free.gpu_mhz in cat.gpu_mhz


@pytest.mark.parametrize("text, needle", [
    ("Throughput,Energy,Latency\n1,2,3\n", "columns Batch Size, Frequency, Directory missing"),
    ("Throughput,Energy,Latency,Batch Size,Frequency,Directory\n1,x,0.1,1,1e9,NX\n", "line 2: Latency, Energy"),
    ("Throughput,Energy,Latency,Batch Size,Frequency,Directory\n1,0.5,0.1,1,1e9,NX\n", "both boards"),
    ("Throughput,Energy,Latency,Batch Size,Frequency,Directory\n1,-0.5,0.1,1,1e9,NX\n", "must be positive"),
])
def test_a_bad_sweep_file_is_refused_naming_what_is_wrong(text, needle):
    with pytest.raises(InvalidArgument) as e:
        read_sweeps(text, "s.csv")
    assert needle in str(e.value) and e.value.field == "sweeps" and re.match(r"s\.csv", str(e.value))
