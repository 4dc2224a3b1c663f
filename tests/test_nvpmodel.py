"""The nvpmodel route on fixture boards, with a fake nvpmodel program on PATH: the board's own presets,
the papers' custom block in a copy of the board's conf, NVIDIA's preset block for a preset asked by
name, and what happens when nvpmodel wants a reboot."""

from __future__ import annotations

import pytest

from jetfleet.agent.device.jetson import JetsonBoard, JetsonOptions
from jetfleet.agent.device.nvpmodel import custom_block, parse_conf, preset_mode
from jetfleet.shared.catalog import PowerMode
from jetfleet.shared.errors import DeviceError, InvalidArgument

from .jetson_trees import FIXTURES, WITH_NVPMODEL, build_tree, install_tools, snapshot, tool_calls

pytestmark = pytest.mark.boards

# What each board's nvpmodel.conf means by its presets, as (cores, CPU, GPU, EMC) with each clock at
# the highest table value not above the preset's cap.
PRESETS = {
    "agx-orin": {"MAXN": "12/2201.6/1300.5/3199", "MODE_15W": "4/1113.6/420.75/2133",
                 "MODE_30W": "8/1728/624.75/3199", "MODE_50W": "12/1497.6/828.75/3199"},
    "agx-xavier": {"MAXN": "8/2265.6/1377/2133", "MODE_10W": "2/1190.4/420.75/1065.6",
                   "MODE_15W": "4/1190.4/624.75/1331.2", "MODE_30W_ALL": "8/1190.4/828.75/1600",
                   "MODE_30W_6CORE": "6/1420.8/828.75/1600", "MODE_30W_4CORE": "4/1728/828.75/1600",
                   "MODE_30W_2CORE": "2/2035.2/828.75/1600"},
    "orin-nano": {"15W": "6/1510.4/624.75/2133", "7W": "4/960/408/2133"},
}


def switches(root):
    """The nvpmodel mode switches so far (queries left out)."""
    return [c for c in tool_calls(root) if c.startswith("nvpmodel -f")]


def open_board(root, layout, **options):
    build_tree(root, layout)
    return JetsonBoard(root, JetsonOptions(route="nvpmodel", command_path=install_tools(root), **options))


@pytest.mark.parametrize("model", sorted(PRESETS))
def test_presets_are_the_boards_own_names_and_values(model, tmp_path):
    layout = {"agx-orin": "orin-jp5", "agx-xavier": "xavier-jp5", "orin-nano": "orin-nano-jp6"}[model]
    b = open_board(tmp_path, layout)
    assert {k: str(v) for k, v in b.catalog.presets.items()} == PRESETS[model]
    assert b.catalog.parse_mode("mode_30w" if model == "agx-orin" else "maxn" if model != "orin-nano" else "7w")


def test_conf_parser_reads_knobs_clusters_models_and_default():
    conf = parse_conf((FIXTURES / "nvpmodel/agx-xavier.conf").read_text())
    assert conf.cpu_clusters() == [("CPU_DENVER_0", 0), ("CPU_DENVER_1", 2), ("CPU_DENVER_2", 4), ("CPU_DENVER_3", 6)]
    assert [m.name for m in conf.models][:3] == ["MAXN", "MODE_10W", "MODE_15W"] and conf.default_id == 2
    assert conf.model(1).value("TPC_POWER_GATING", "TPC_PG_MASK") == 5 and conf.free_id() == 14
    with pytest.raises(DeviceError, match="line 2: .*outside any section"):
        parse_conf("# a conf\nCPU_ONLINE CORE_0 1\n")
    with pytest.raises(DeviceError, match="line 2: 'fast' is not a number"):
        parse_conf("< POWER_MODEL ID=0 NAME=X >\nGPU MAX_FREQ fast\n")


def test_custom_block_is_the_papers_block_with_the_boards_names():
    conf = parse_conf((FIXTURES / "nvpmodel/agx-orin.conf").read_text())
    block = custom_block(conf, PowerMode(6, 1497.6, 624.75, 2133), 14, 12, emc_hz=2133000000).splitlines()
    assert block[0] == "< POWER_MODEL ID=14 NAME=JETFLEET >"
    assert block[1:13] == [f"CPU_ONLINE CORE_{c} {1 if c < 6 else 0}" for c in range(12)]
    assert "TPC_POWER_GATING TPC_PG_MASK 0" in block and "GPU_POWER_CONTROL_ENABLE GPU_PWR_CNTL_EN on" in block
    # clusters 0 (cpu0-3) and 1 (cpu4-7) have online cores, cluster 2 (cpu8-11) none: min = max on the first two
    assert [ln for ln in block if ln.startswith("CPU_A78")] == [
        "CPU_A78_0 MIN_FREQ 1497600", "CPU_A78_0 MAX_FREQ 1497600", "CPU_A78_1 MIN_FREQ 1497600",
        "CPU_A78_1 MAX_FREQ 1497600"]
    assert "GPU MIN_FREQ 624750000" in block and "GPU MAX_FREQ 624750000" in block
    assert "EMC MAX_FREQ 2133000000" in block
    assert {"DLA0_CORE MAX_FREQ -1", "DLA1_CORE MAX_FREQ -1", "PVA0_VPS MAX_FREQ -1"} <= set(block)


@pytest.mark.parametrize("layout", WITH_NVPMODEL)
def test_a_mode_goes_through_a_custom_block_in_a_copy_then_the_clocks_are_pinned(layout, tmp_path):
    b = open_board(tmp_path, layout)
    board_conf = (tmp_path / "etc/nvpmodel.conf").read_text()
    cat = b.catalog
    target = PowerMode(2, cat.cpu_mhz[7], cat.gpu_mhz[1], cat.mem_mhz[1])
    assert b.apply_mode(target) == target
    copy = tmp_path / "var/lib/jetfleet/nvpmodel.conf"
    assert switches(tmp_path) == [f"nvpmodel -f {copy} -m 14"]
    assert (tmp_path / "etc/nvpmodel.conf").read_text() == board_conf   # the board's own file is never written
    assert "< POWER_MODEL ID=14 NAME=JETFLEET >" in copy.read_text()
    assert (tmp_path / "var/lib/nvpmodel/status").read_text().startswith("pmode:0014")
    if (tmp_path / "sys/devices/gpu.0/tpc_pg_mask").exists():
        assert (tmp_path / "sys/devices/gpu.0/tpc_pg_mask").read_text().strip() == "0"
    khz = str(int(round(target.cpu_mhz * 1000)))
    for c in (0, 1):
        d = tmp_path / f"sys/devices/system/cpu/cpu{c}/cpufreq"
        assert (d / "scaling_min_freq").read_text().strip() == (d / "scaling_max_freq").read_text().strip() == khz
    assert b.read_mode() == target


def test_a_preset_asked_by_name_enters_nvidias_own_block(tmp_path):
    b = open_board(tmp_path, "orin-jp5")
    mode = b.catalog.presets["MODE_15W"]
    assert b.apply_mode(mode, "MODE_15W") == mode
    assert switches(tmp_path) == [f"nvpmodel -f {tmp_path / 'etc/nvpmodel.conf'} -m 1"]
    assert (tmp_path / "sys/devices/gpu.0/tpc_pg_mask").read_text().strip() == "248"  # NVIDIA's gating, not 0
    # the same values without the name: the papers' custom block, TPC gating off
    assert b.apply_mode(mode) == mode
    assert switches(tmp_path)[-1].endswith("/var/lib/jetfleet/nvpmodel.conf -m 14")
    assert (tmp_path / "sys/devices/gpu.0/tpc_pg_mask").read_text().strip() == "0"


def test_a_preset_name_that_does_not_match_the_mode_is_refused_and_nothing_runs(tmp_path):
    b = open_board(tmp_path, "orin-jp5")
    before, calls = snapshot(tmp_path), len(tool_calls(tmp_path))
    with pytest.raises(InvalidArgument, match="preset 'MODE_15W' is not 8/1728/624.75/3199"):
        b.apply_mode(b.catalog.presets["MODE_30W"], "MODE_15W")
    assert snapshot(tmp_path) == before and len(tool_calls(tmp_path)) == calls


def test_nvpmodel_asking_for_a_reboot_is_an_error_and_nothing_is_pinned(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NVPMODEL_REBOOT", "14")
    b = open_board(tmp_path, "orin-jp6")
    cpu0 = tmp_path / "sys/devices/system/cpu/cpu0/cpufreq/scaling_min_freq"
    before = cpu0.read_text()
    with pytest.raises(DeviceError, match="nvpmodel needs a reboot to enter mode 14 and jetfleet never reboots"):
        b.apply_mode(PowerMode(4, 1190.4, 624.75, 2133))
    assert cpu0.read_text() == before


def test_the_route_needs_nvpmodel_and_its_conf(tmp_path):
    build_tree(tmp_path, "orin-jp6")
    (tmp_path / "etc/nvpmodel.conf").unlink()
    with pytest.raises(DeviceError, match="--route nvpmodel needs nvpmodel on PATH"):
        JetsonBoard(tmp_path, JetsonOptions(route="nvpmodel", command_path=install_tools(tmp_path)))
    with pytest.raises(InvalidArgument, match="route 'nvp': expected one of sysfs, nvpmodel"):
        JetsonBoard(tmp_path, JetsonOptions(route="nvp"))


def test_custom_id_moves_past_a_preset_that_uses_it(tmp_path):
    build_tree(tmp_path, "orin-jp5")
    conf = tmp_path / "etc/nvpmodel.conf"
    conf.write_text(conf.read_text().replace("ID=3 NAME=MODE_50W", "ID=14 NAME=MODE_50W"))
    b = JetsonBoard(tmp_path, JetsonOptions(route="nvpmodel", command_path=install_tools(tmp_path)))
    assert b.nvpmodel.custom_id == 15
    b.apply_mode(PowerMode(4, 1190.4, 624.75, 2133))
    assert switches(tmp_path)[-1].endswith("-m 15")


def test_presets_come_from_the_catalog_where_the_board_has_no_nvpmodel_conf(tmp_path):
    build_tree(tmp_path, "orin-jp6")
    (tmp_path / "etc/nvpmodel.conf").unlink()
    b = JetsonBoard(tmp_path, JetsonOptions(command_path=install_tools(tmp_path)))
    assert set(b.catalog.presets) == {"MAXN", "MODE_50W", "MODE_30W", "MODE_15W"}


def test_preset_mode_reads_caps_with_nvidias_special_values():
    conf = parse_conf("< PARAM TYPE=CLOCK NAME=CPU_X >\nMAX_FREQ /sys/devices/system/cpu/cpu0/cpufreq/scaling_max_freq\n"
                      "< POWER_MODEL ID=0 NAME=A >\nCPU_X MAX_FREQ -1\nGPU MAX_FREQ 2147483647\nEMC MAX_FREQ 0\n"
                      "< POWER_MODEL ID=1 NAME=B >\nCPU_ONLINE CORE_0 1\nCPU_ONLINE CORE_1 0\nCPU_X MAX_FREQ 1\n"
                      "GPU MAX_FREQ 700000000\nEMC MAX_FREQ 2000000000\n")
    from jetfleet.shared.catalog import get_catalog

    cat = get_catalog("agx-orin")
    assert str(preset_mode(conf.model(0), conf, cat)) == "12/2201.6/1300.5/3199"
    assert str(preset_mode(conf.model(1), conf, cat)) == "1/115.2/624.75/665.6"  # below every value: the lowest


def test_the_agent_refuses_a_preset_name_that_does_not_name_the_mode():
    import asyncio

    from jetfleet.agent.executor import CommandExecutor
    from jetfleet.shared.convert import mode_to_pb
    from jetfleet.shared.proto import agent_pb2
    from jetfleet.twin.board import EmulatedBoard

    board = EmulatedBoard("agx-orin", 1)
    cat = board.describe().catalog

    def cmd(mode, preset):
        return agent_pb2.Command(command_id="c1", set_mode=agent_pb2.SetMode(mode=mode_to_pb(mode), preset=preset))

    async def run():   # the executor is made on the loop that runs it (Python 3.8's asyncio.Lock takes the current one)
        ex = CommandExecutor(board)
        with pytest.raises(InvalidArgument, match="preset '30W' is not 12/2201.6/1300.5/3199") as e:
            ex.check(cmd(cat.maxn, "30W"))
        assert e.value.field == "set_mode.preset"
        return await ex.execute(cmd(cat.presets["MODE_30W"], "MODE_30W"))

    result = asyncio.run(run())
    assert result.ok and board.read_mode() == cat.presets["MODE_30W"]


@pytest.mark.parametrize("layout", ["xavier-jp4", "xavier-jp5"])
def test_a_board_found_in_a_preset_with_caps_between_table_values_reads_as_that_preset(layout, tmp_path):
    # AGX Xavier boots in MODE_15W: CPU min = max = 1200000 kHz and GPU up to 670 MHz, neither a table value
    b = open_board(tmp_path, layout)
    mode = b.read_mode()
    assert mode == b.catalog.presets["MODE_15W"] == b.catalog.validate(mode)
    assert b.catalog.preset_name(mode) == "MODE_15W"
