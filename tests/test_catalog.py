import pytest

from jetfleet.shared.catalog import PowerMode, builtin_catalogs, catalog_from_knobs, get_catalog
from jetfleet.shared.errors import InvalidArgument, NotFound


@pytest.mark.parametrize("model,full,powertrain", [
    ("agx-orin", 18_096, 4_368), ("agx-xavier", 29_232, 7_056), ("orin-nano", 1_800, 900), ("tx2", 768, 768)])
def test_grid_sizes(model, full, powertrain):
    cat = get_catalog(model)
    assert cat.size == full == len(cat.grid("full"))
    assert len(cat.grid("powertrain")) == powertrain
    assert len(set(cat.grid("full"))) == full


def test_orin_facts_from_the_brief():
    cat = get_catalog("agx-orin")
    assert len(cat.cpu_mhz) == 29 and len(cat.gpu_mhz) == 13 and cat.mem_mhz == (204.0, 665.6, 2133.0, 3199.0)
    assert str(cat.maxn) == "12/2201.6/1300.5/3199"
    assert set(cat.presets) >= {"MAXN", "MODE_15W", "MODE_30W", "MODE_50W"}
    assert cat.rail_labels() == ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"]
    x = get_catalog("agx-xavier")
    assert x.cpu_mhz[0] == 115.2 and x.cpu_mhz[-1] == 2265.6
    assert all(abs(b - a - 76.8) < 1e-6 for a, b in zip(x.cpu_mhz, x.cpu_mhz[1:], strict=False))


@pytest.mark.parametrize("model", sorted(builtin_catalogs()))
def test_every_preset_and_powertrain_mode_is_in_the_catalog(model):
    cat = get_catalog(model)
    for mode in cat.grid("presets") + cat.grid("powertrain")[:50]:
        assert cat.validate(mode) == mode


def test_parse_accepts_numbers_and_presets():
    cat = get_catalog("agx-orin")
    assert cat.parse_mode("12/2201.6/1300.5/3199") == cat.parse_mode("maxn") == cat.presets["MAXN"]
    assert cat.parse_mode(" 4/1113.6/420.75/2133 ") == PowerMode(4, 1113.6, 420.75, 2133.0)
    assert str(cat.parse_mode("30w")) == "8/1728/624.75/3199"


@pytest.mark.parametrize("text,knob,hint", [
    ("12/2200/1300.5/3199", "cpu_mhz", "2188.8, 2201.6"),
    ("13/2201.6/1300.5/3199", "cores", "11, 12"),
    ("12/2201.6/1300/3199", "gpu_mhz", "1236.75, 1300.5"),
    ("12/2201.6/1300.5/3000", "mem_mhz", "2133, 3199"),
    ("12/fast/1300.5/3199", "cpu_mhz", "not a number"),
    ("2.5/2201.6/1300.5/3199", "cores", "whole number"),
    ("turbo", "mode", "MAXN"),
])
def test_bad_modes_name_the_knob_and_what_is_allowed(text, knob, hint):
    with pytest.raises(InvalidArgument) as e:
        get_catalog("agx-orin").parse_mode(text)
    assert e.value.field == knob
    assert hint in str(e.value)


def test_unknown_board_and_grid():
    with pytest.raises(NotFound, match="agx-orin, agx-xavier, nano, orin-nano, tx2, xavier-nx"):
        get_catalog("jetson-tk1")
    with pytest.raises(InvalidArgument, match="full, inference, powertrain, presets"):
        get_catalog("agx-orin").grid("half")


def test_index_is_dense_and_unique():
    cat = get_catalog("orin-nano")
    assert sorted(cat.index_of(m) for m in cat.grid("full")) == list(range(cat.size))


def test_catalog_from_knobs_for_an_unknown_board():
    cat = catalog_from_knobs("tx2-custom", [1, 2], [345.6, 2035.2], [140.25], [1866],
                             presets={"TOP": "2/2035.2/140.25/1866"})
    assert cat.size == 4 and cat.presets["TOP"] == PowerMode(2, 2035.2, 140.25, 1866.0)
    with pytest.raises(InvalidArgument):
        catalog_from_knobs("x", [], [1.0], [1.0], [1.0])


@pytest.mark.parametrize("model", sorted(builtin_catalogs()))
def test_validate_gives_the_catalogs_own_values_whether_a_mode_comes_exact_or_off_by_a_rounding(model):
    """A mode as it came (one lookup a knob) and the same mode off by a rounding or with its cores as a float (the
    tolerant search) both come back as the catalog's own values: int cores, float clocks, equal modes."""
    cat = get_catalog(model)
    grid = cat.grid("full")
    for mode in grid[::max(1, len(grid) // 300)]:
        exact = cat.validate(mode)
        assert exact == mode and type(exact.cores) is int and type(exact.cpu_mhz) is float
        loose = cat.validate(PowerMode(float(mode.cores), mode.cpu_mhz + 1e-9, mode.gpu_mhz - 1e-9, mode.mem_mhz))
        assert loose == exact and type(loose.cores) is int
        floated = cat.validate(PowerMode(float(mode.cores), mode.cpu_mhz, mode.gpu_mhz, mode.mem_mhz))
        assert floated == exact and type(floated.cores) is int
    with pytest.raises(InvalidArgument, match="gpu_mhz=1 is not a value"):
        cat.validate(PowerMode(grid[0].cores, grid[0].cpu_mhz, 1.0, grid[0].mem_mhz))
