"""jetfleet.client: typed results (dataclasses, never protobuf), typed errors naming their field, and where the
client finds the controller (flag > env > config file > default)."""

import dataclasses
import math
from pathlib import Path

import pytest

from jetfleet.client import Campaign, Device, Job, Model, OperatorClient, Predictions, SetModeResult, connect, resolve
from jetfleet.client.errors import FailedPrecondition, InvalidArgument, NotFound, Unavailable
from jetfleet.client.settings import DEFAULT_CONTROLLER, config_path
from jetfleet.shared.address import with_default_port
from jetfleet.shared.catalog import PowerMode

from .harness import LabThread


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lt = LabThread(str(tmp_path_factory.mktemp("client")), ["orin-nano"]).start()
    yield lt
    lt.close()


def plain(x, path="result"):
    """Fail if anything in a result is not plain Python data (a protobuf message leaking out)."""
    if dataclasses.is_dataclass(x):
        for f in dataclasses.fields(x):
            plain(getattr(x, f.name), f"{path}.{f.name}")
    elif isinstance(x, dict):
        for k, v in x.items():
            assert isinstance(k, str), path
            plain(v, f"{path}[{k!r}]")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            plain(v, f"{path}[{i}]")
    else:
        assert x is None or isinstance(x, (str, int, float, bool)), f"{path} is a {type(x).__name__}"


def test_methods_return_plain_dataclasses(lab):
    with connect(lab.address) as c:
        [d] = c.list_devices()
        assert isinstance(d, Device) and isinstance(d.current_mode, PowerMode)
        assert (d.emulated, d.speed, d.speed_text) == (True, math.inf, "instant")
        shown = c.get_device("orin-nano-0")
        assert shown.catalog is not None and shown.catalog.modes == 1800 and "7W" in shown.catalog.presets
        r = c.set_mode("orin-nano-0", "7W")
        assert isinstance(r, SetModeResult) and r.confirmed == PowerMode(4, 960.0, 408.0, 2133.0)
        assert str(r.confirmed) == "4/960/408/2133" and r.to_dict()["confirmed"] == "4/960/408/2133"
        camp = c.create_campaign("lstm", device_id="orin-nano-0", modes="presets")
        seen = []
        final = c.wait_campaign(camp.campaign_id, on_update=seen.append, poll_s=0.02)
        assert isinstance(final, Campaign) and final.status == "done" and final.done == final.total == 2
        assert seen[-1] == final and not final.active and final.eta_s == 0
        samples = list(c.watch_telemetry("orin-nano-0", 2))
        assert len(samples) == 2 and samples[0].total_w > 0
        exported = c.export_profiles(campaign_id=camp.campaign_id)
        assert exported.rows == 2 and exported.csv.startswith("board_model,workload,")
        for x in (d, shown, r, final, samples[0], exported, *c.list_campaigns()):
            plain(x)


def test_errors_are_typed_and_name_their_field(lab):
    with connect(lab.address) as c:
        with pytest.raises(NotFound) as e:
            c.get_device("ghost")
        assert (e.value.code, e.value.field) == ("NOT_FOUND", "device_id") and "unknown device 'ghost'" in e.value.message
        with pytest.raises(InvalidArgument) as e:
            c.set_mode("orin-nano-0", "4/960/408/9999")
        assert e.value.field == "mem_mhz" and "mem_mhz=9999" in e.value.message
        with pytest.raises(FailedPrecondition) as e:
            c.forget_device("orin-nano-0")
        assert e.value.field == "device_id"
        with pytest.raises(NotFound) as e:
            c.train_reference("orin-nano", "bert_base", epochs=1)
    with OperatorClient("127.0.0.1:1", timeout_s=2) as c, pytest.raises(Unavailable) as e:
        c.list_devices()
    assert e.value.field == "controller" and "controller 127.0.0.1:1 is unreachable" in e.value.message


def test_training_reports_its_epochs_and_returns_the_stored_model(lab):
    with connect(lab.address) as c:
        camp = c.create_campaign("resnet18", device_id="orin-nano-0", modes="random:40", seed=3)
        c.wait_campaign(camp.campaign_id, poll_s=0.05)
        progress = []
        m = c.train_reference("orin-nano", "resnet18", epochs=6, campaign_id=camp.campaign_id,
                              on_progress=progress.append)
        assert isinstance(m, Model) and m.kind == "reference" and m.training_modes == 40
        assert [p.epoch for p in progress][-1] == 6 and progress[-1].fraction == 1.0
        assert all(len(p.losses) == 2 and p.phase == "reference" for p in progress)
        assert c.get_model(m.model_id) == m
        pred = c.predict("orin-nano", "resnet18", grid="presets", confidence=0.75)  # 4 validation modes: at most 0.8
        assert isinstance(pred, Predictions) and pred.model_id == m.model_id and len(pred.predictions) == 2
        assert pred.front and all(p.pareto for p in pred.front)
        plain(pred)
        plain(m)


def test_a_job_is_a_dataclass_too(lab):
    with connect(lab.address) as c, pytest.raises(NotFound) as e:
        c.get_job("nope")
    assert e.value.field == "job_id"
    assert "minibatches_done" in {f.name for f in dataclasses.fields(Job)}


# --- where the client connects ----------------------------------------------------------------------------
def test_precedence_is_flag_then_env_then_config_file_then_default(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('controller = "cfg-host"\ntls_ca = "pki/ca.crt"\ntls_cert = "~/alice.crt"\n')
    env = {"JETFLEET_CONFIG": str(cfg)}
    s = resolve(env=env)
    assert (s.controller, s.sources["controller"]) == ("cfg-host:50051", str(cfg))
    assert s.tls_ca == str(tmp_path / "pki" / "ca.crt") and s.tls_cert == str(Path("~/alice.crt").expanduser())
    s = resolve(env={**env, "JETFLEET_CONTROLLER": "env-host:6000"})
    assert (s.controller, s.sources["controller"]) == ("env-host:6000", "JETFLEET_CONTROLLER")
    assert s.sources["tls_ca"] == str(cfg)     # what the environment does not say still comes from the file
    s = resolve("flag-host", env={**env, "JETFLEET_CONTROLLER": "env-host:6000"})
    assert (s.controller, s.sources["controller"]) == ("flag-host:50051", "flag")
    s = resolve(env={"XDG_CONFIG_HOME": str(tmp_path / "empty")})
    assert (s.controller, s.sources["controller"], s.tls_ca) == (DEFAULT_CONTROLLER, "default", "")
    assert config_path({"XDG_CONFIG_HOME": "/x"}) == Path("/x/jetfleet/config.toml")
    assert config_path({}) == Path.home() / ".config" / "jetfleet" / "config.toml"


@pytest.mark.parametrize("text,needle", [
    ('controler = "x"\n', "unknown key 'controler'"),
    ("controller = \n", "is not valid TOML"),
    ("controller = 50051\n", "controller must be a string"),
])
def test_a_bad_config_file_is_named_with_what_is_wrong(tmp_path, text, needle):
    cfg = tmp_path / "config.toml"
    cfg.write_text(text)
    with pytest.raises(InvalidArgument) as e:
        resolve(env={"JETFLEET_CONFIG": str(cfg)})
    assert needle in e.value.message and str(cfg) in e.value.message


def test_a_config_file_named_by_the_environment_must_exist(tmp_path):
    with pytest.raises(InvalidArgument, match="does not exist"):
        resolve(env={"JETFLEET_CONFIG": str(tmp_path / "nope.toml")})


@pytest.mark.parametrize("address,expected", [
    ("127.0.0.1", "127.0.0.1:50051"), ("ctl.lab", "ctl.lab:50051"), ("ctl.lab:7000", "ctl.lab:7000"),
    ("::1", "[::1]:50051"), ("[::1]", "[::1]:50051"), ("[fe80::1]:7", "[fe80::1]:7"), (" host:1 ", "host:1"),
    ("dns:///ctl.lab:50051", "dns:///ctl.lab:50051"), ("unix:/run/jetfleet.sock", "unix:/run/jetfleet.sock"),
])
def test_an_address_without_a_port_gets_50051(address, expected):
    assert with_default_port(address) == expected


@pytest.mark.parametrize("address", ["", "host:0", "host:65536", "host:http", ":50051", "[::1]x", "a b", "1::2::3"])
def test_a_bad_address_is_refused_naming_the_field(address):
    with pytest.raises(InvalidArgument) as e:
        with_default_port(address)
    assert e.value.field == "controller"
