from collections import Counter

import pytest

from jetfleet.agent.device.tegrastats import parse_line
from jetfleet.shared.catalog import get_catalog
from jetfleet.shared.errors import InvalidArgument

pytestmark = pytest.mark.boards

ORIN_JP5 = ("RAM 2448/30536MB (lfb 6797x4MB) SWAP 0/15268MB (cached 0MB) CPU [2%@729,1%@729,0%@729,0%@729,"
            "off,off,off,off,off,off,off,off] EMC_FREQ 0%@2133 GR3D_FREQ 0%@[305,305] VIC_FREQ 729 APE 174 "
            "CV0@-256C CPU@45.5C Tboard@35C SOC2@42.0C Tdiode@37.25C SOC0@42.5C CV1@-256C GPU@-256C "
            "tj@45.5C SOC1@41.25C CV2@-256C VDD_GPU_SOC 2393mW/2393mW VDD_CPU_CV 399mW/399mW "
            "VIN_SYS_5V0 2626mW/2626mW VDDQ_VDD2_1V8AO 302mW/302mW")
NANO_JP6 = ("11-21-2026 10:00:00 RAM 1874/7620MB (lfb 2x4MB) SWAP 0/3810MB (cached 0MB) CPU [3%@1510,1%@1510,"
            "0%@1510,2%@1510,0%@1510,0%@1510] EMC_FREQ 0%@2133 GR3D_FREQ 45%@624 cpu@47.2C soc2@45.8C "
            "soc0@46.1C gpu@46.5C tj@47.2C soc1@46.2C VDD_IN 7015mW/6990mW VDD_CPU_GPU_CV 1877mW/1860mW "
            "VDD_SOC 1562mW/1550mW")


def test_shared_xavier_log_parses_every_line(shared_data):
    lines = (shared_data / "tegrastats/agx-xavier.log").read_text().splitlines()
    assert len(lines) == 1189
    cat = get_catalog("agx-xavier")
    emc = Counter()
    for line in lines:
        p = parse_line(line)
        assert len(p.cpu) == 8 and set(p.rails_mw) == set(cat.rail_labels())
        assert any(abs(p.emc_mhz - m) < 1 for m in cat.mem_mhz), p.emc_mhz  # tegrastats rounds to whole MHz
        emc[p.emc_mhz] += 1
        s = p.to_sample(cat, 0.0)
        assert 0.5 < s.total_w < 60
    assert emc == {2133: 1118, 1065: 69, 1866: 2}
    first = parse_line(lines[0])
    assert first.timestamp == "02-07-2025 22:31:04"
    assert first.rails_mw["SYS5V"] == (2243, 2243) and first.gpu_mhz == [114]
    assert first.cpu[2] == (77, 2266) and first.temps_c["Tdiode"] == 47.75


def test_orin_lines_with_offline_cores_and_per_gpc_gpu_clock():
    p = parse_line(ORIN_JP5)
    assert p.cpu[:4] == [(2, 729), (1, 729), (0, 729), (0, 729)] and p.cpu[4:] == [None] * 8
    assert p.gpu_mhz == [305, 305] and p.emc_mhz == 2133
    s = p.to_sample(get_catalog("agx-orin"), 1.0)
    assert s.cores_online == 4 and s.total_w == pytest.approx(2.393 + 0.399 + 2.626 + 0.302)
    # names as jtop shows them; the switched-off CV and GPU sensors (-256 C) are left out
    assert s.temps_c == {"cpu": 45.5, "tboard": 35.0, "soc2": 42.0, "tdiode": 37.25, "soc0": 42.5, "tj": 45.5,
                         "soc1": 41.25}
    nano = parse_line(NANO_JP6).to_sample(get_catalog("orin-nano"), 0.0)
    assert nano.total_w == pytest.approx(7.015)  # VDD_IN is the module total on its own
    assert nano.gpu_util == pytest.approx(0.45)


def test_garbage_is_rejected():
    with pytest.raises(InvalidArgument):
        parse_line("hello world")
