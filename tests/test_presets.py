"""Issue 29: NVIDIA's preset names are accepted on every board model that has them, short forms too, and each
mode has one name everywhere (a catalog, `devices ls`, `modes`, the agent's metrics)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from jetfleet.cli.main import cli
from jetfleet.shared.catalog import builtin_catalogs, get_catalog
from jetfleet.shared.errors import InvalidArgument

from .harness import LabThread


@pytest.mark.parametrize("model", sorted(builtin_catalogs()))
def test_every_mode_has_one_name_and_every_spelling_of_it_names_it(model):
    cat = get_catalog(model)
    modes = list(cat.presets.values())
    assert len(set(modes)) == len(modes), f"{model}: two preset names for one mode"
    for name, mode in cat.presets.items():
        assert cat.preset_name(mode) == name
        short = name[len("MODE_"):] if name.startswith("MODE_") else name
        spellings = {name, name.lower(), short, short.lower(), "MODE_" + short, "mode_" + short.lower()}
        for s in spellings:
            if sum(1 for n in cat.presets if n.lower() in (s.lower(), "mode_" + s.lower())
                   or ("mode_" + n.lower()) == s.lower()) <= 1:
                assert cat.preset_named(s) == name and cat.parse_mode(s) == mode, (model, s)
    for alias, target in cat.preset_aliases.items():
        assert cat.preset_named(alias) == target and cat.parse_mode(alias) == cat.presets[target]


@pytest.mark.parametrize("model,text,name", [
    ("agx-orin", "MODE_30W", "MODE_30W"), ("agx-orin", "30W", "MODE_30W"), ("agx-orin", "30w", "MODE_30W"),
    ("agx-orin", "mode_50w", "MODE_50W"), ("agx-orin", "MAXN", "MAXN"),
    ("agx-xavier", "15W", "MODE_15W"), ("agx-xavier", "MODE_15W", "MODE_15W"),
    ("orin-nano", "MODE_15W", "15W"), ("orin-nano", "7W", "7W"), ("orin-nano", "MODE_7W", "7W"),
    ("orin-nano", "MAXN", "15W"),      # Orin Nano's maximum is NVIDIA's 15W: shown so, MAXN accepted for it
    ("nano", "10W", "MAXN"), ("nano", "MODE_5W", "5W"), ("xavier-nx", "MODE_10W_DESKTOP", "MODE_10W_4CORE"),
])
def test_nvidia_names_and_short_forms(model, text, name):
    assert get_catalog(model).preset_named(text) == name


def test_an_ambiguous_short_form_is_refused_naming_the_presets():
    with pytest.raises(InvalidArgument, match="MODE_30W_ALL"):
        get_catalog("agx-xavier").parse_mode("30W")   # MODE_30W_ALL, _6CORE, _4CORE or _2CORE?


@pytest.fixture
def lab(tmp_path):
    lt = LabThread(str(tmp_path / "data"), ["agx-orin", "orin-nano"]).start()
    yield lt
    lt.close()


def test_the_lab_takes_nvidia_names_and_shows_one_name_per_mode(lab):
    run = lambda *a: CliRunner().invoke(cli, [*a, "--controller", lab.address, "--output", "json"])  # noqa: E731
    for device, text, name in (("agx-orin-0", "MODE_30W", "MODE_30W"), ("agx-orin-0", "15w", "MODE_15W"),
                               ("orin-nano-1", "MODE_15W", "15W"), ("orin-nano-1", "MAXN", "15W")):
        r = run("mode", "set", device, text)
        assert r.exit_code == 0, r.output
        shown = {d["device_id"]: d for d in json.loads(run("devices", "ls").stdout)}
        assert shown[device]["current_mode_name"] == name, (text, shown[device])
    r = CliRunner().invoke(cli, ["modes", "agx-orin", "--grid", "presets", "--output", "json"])
    assert [m["preset"] for m in json.loads(r.stdout)["modes"]] == ["MAXN", "MODE_50W", "MODE_30W", "MODE_15W"]
