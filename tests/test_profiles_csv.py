"""The profile CSV schema: round trip, all-or-nothing import with line numbers, new board models,
and the real TX2 grid."""

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from jetfleet.cli.main import cli
from jetfleet.client import OperatorClient
from jetfleet.shared.errors import InvalidArgument

from .harness import LabThread

HEADER = "board_model,workload,cpu_cores,cpu_mhz,gpu_mhz,mem_mhz,minibatch_time_ms,power_w"


@pytest.fixture
def lab(store_spec):
    lt = LabThread(store_spec, ["agx-orin"]).start()
    yield lt
    lt.close()


def rows(lab):
    return lab.do(lambda: lab.lab.controller.store.query_profiles())


def test_import_export_round_trip_with_several_observations_per_mode(lab):
    text = "\n".join([HEADER + ",board_id,observed_at",
                      "agx-orin,resnet18,12,2201.6,1300.5,3199,55.1,48.2,orin-a,1700000000",
                      "agx-orin,resnet18,12,2201.6,1300.5,3199,55.9,47.9,orin-b,1700000001",
                      "agx-orin,resnet18,4,1113.6,420.75,2133,145,12.9,,"]) + "\n"
    with OperatorClient(lab.address) as c:
        r = c.import_profiles(text, "mine.csv")
        assert r.rows == 3 and r.source.startswith("import-") and not r.new_board_models
        out = c.export_profiles(board_model="agx-orin", workload="resnet18")
    assert out.rows == 3
    lines = out.csv.splitlines()
    assert lines[0] == HEADER + ",board_id,observed_at"
    assert "agx-orin,resnet18,12,2201.6,1300.5,3199,55.1,48.2,orin-a,1700000000.000" in lines
    assert sorted(r.observation for r in rows(lab) if r.mode == "12/2201.6/1300.5/3199") == [0, 1]


@pytest.mark.parametrize("text,needle", [
    ("", "empty file"),
    ("board_model,workload,cpu_cores\nagx-orin,resnet18,12\n", "missing ['cpu_mhz'"),
    (HEADER + ",colour\n", "unknown ['colour']"),
    (HEADER + "\nagx-orin,resnet18,12,2201.6,1300.5,3199,55\n", "line 2: 7 fields"),
    (HEADER + "\nagx-orin,resnet18,12,2201.6,1300.5,3199,55,48\nagx-orin,resnet18,12,fast,1300.5,3199,55,48\n",
     "line 3: cpu_mhz 'fast' is not a number"),
    (HEADER + "\nagx-orin,resnet18,12,2201.6,1300.5,3199,55,48\nagx-orin,resnet18,12,2201.6,1300.5,3199,-1,48\n",
     "line 3: minibatch_time_ms must be a positive"),
    (HEADER + "\nagx-orin,resnet18,12.5,2201.6,1300.5,3199,55,48\n", "cpu_cores must be a whole number"),
    (HEADER + "\nagx-orin,resnet18,12,2201.6,1300.5,3000,55,48\n", "line 2: mem_mhz=3000 is not a value of agx-orin"),
    (HEADER + "\n", "no data rows"),
    (HEADER + "\nagx orin,resnet18,12,2201.6,1300.5,3199,55,48\n", "board_model must match [a-z0-9][a-z0-9._-]{0,63}"),
])
def test_bad_or_partial_csv_is_refused_whole(lab, text, needle):
    good = "agx-orin,resnet18,2,268.8,114.75,204,400,9\n"
    body = text if "line 3" not in needle else text + good
    with OperatorClient(lab.address) as c:
        with pytest.raises(InvalidArgument) as e:
            c.import_profiles(body, "bad.csv")
    assert needle in e.value.message and ("nothing was imported" in e.value.message or "line" not in needle)
    assert rows(lab) == []


def test_a_board_model_without_a_catalog_gets_one_from_the_file(lab):
    text = HEADER + "\nnano-2gb,resnet18,4,1479,921.6,1600,300,7.5\nnano-2gb,resnet18,2,921.6,640,1600,500,5\n"
    with OperatorClient(lab.address) as c:
        r = c.import_profiles(text, "nano.csv", allow_new=["nano-2gb"])
        assert list(r.new_board_models) == ["nano-2gb"]
        camp = c.create_campaign(workload="resnet18", board_model="nano-2gb", modes="full")
        assert camp.total == 2 * 2 * 2 * 1  # the catalog is the product of the file's knob values
    cat = lab.do(lambda: lab.lab.controller.store.get_catalog("nano-2gb"))
    assert cat["cpu_mhz"] == [921.6, 1479.0]


def test_real_tx2_grid_imports(lab, shared_data, tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from convert_tx2 import convert

    files = convert(shared_data / "tx2-xception", tmp_path)
    assert [f.name for f in files] == [f"tx2-xception_{s}.csv" for s in ("200x200", "400x400", "600x600", "800x800")]
    args = ["profiles", "import", str(files[0]), "--controller", lab.address, "--output", "json"]
    refused = CliRunner().invoke(cli, args)   # a workload the controller has never seen: not without saying so
    assert refused.exit_code == 3 and "--new xception_200x200" in refused.output, refused.output
    r = CliRunner().invoke(cli, [*args, "--new", "xception_200x200"])   # as the README does it
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["rows"] == 768
    got = lab.do(lambda: lab.lab.controller.store.query_profiles(board_model="tx2", workload="xception_200x200"))
    assert len({g.mode for g in got}) == 768  # the full TX2 grid, every mode in the tx2 catalog
    first = next(g for g in got if g.mode == "1/1113.6/1300.5/1062.4")
    assert first.minibatch_time_ms == pytest.approx(181.07464578, rel=1e-5)
    assert first.power_w == pytest.approx(2.7332, rel=1e-4)
    # the 800x800 grid reads up to 43.6 W: the README's loop imports it too (refused while the TX2's limit was 40 W)
    big = ["profiles", "import", str(files[3]), "--controller", lab.address, "--output", "json", "--allow-new"]
    r = CliRunner().invoke(cli, big)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["rows"] == 768
