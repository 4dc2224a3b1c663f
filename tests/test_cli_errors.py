"""Errors a script can read: with --output json one JSON object on stderr (gRPC code, field, message), stdout
left for results, and a distinct exit code per kind, as docs/cli.md documents them."""

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from jetfleet.cli.common import EXIT_CODES, exit_code
from jetfleet.cli.main import cli
from jetfleet.controller.config import ControllerConfig

from .harness import FAST_CONTROLLER, LabThread

DOCS = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lt = LabThread(str(tmp_path_factory.mktemp("errors")), ["orin-nano"]).start()
    yield lt
    lt.close()


def run(lab, *args, env=None):
    return CliRunner().invoke(cli, list(args), env={"JETFLEET_CONTROLLER": lab.address, **(env or {})})


def json_error(r):
    """The error object of a failed command: the last line of stderr, which must be JSON like every line there."""
    lines = r.stderr.strip().splitlines()
    assert lines, "nothing on stderr"
    for line in lines:
        json.loads(line)
    return json.loads(lines[-1])["error"]


@pytest.mark.parametrize("args,code,field,needle", [
    (("devices", "show", "ghost"), "NOT_FOUND", "device_id", "unknown device 'ghost'"),
    (("mode", "set", "orin-nano-0", "4/960/408/9999"), "INVALID_ARGUMENT", "mem_mhz", "mem_mhz=9999"),
    (("devices", "forget", "orin-nano-0"), "FAILED_PRECONDITION", "device_id", "is online; stop its agent"),
    (("profile", "show", "nope"), "NOT_FOUND", "campaign_id", "unknown campaign 'nope'"),
    (("job", "submit", "--workload", "lstm", "--device", "orin-nano-0", "--deadline", "2", "--minibatches", "9"),
     "INVALID_ARGUMENT", "deadline", "'2' has no unit"),
    (("devices", "ls", "--colour", "red"), "USAGE", "colour", "--colour"),
    (("profile", "start", "--workload", "lstm", "--device", "orin-nano-0"), "USAGE", "modes", "Missing option '--modes'"),
    (("profile", "start", "--workload", "lstm", "--device", "orin-nano-0", "--modes", "presets", "--seed", "-1"),
     "USAGE", "seed", "'--seed': -1 is not in the range"),
])
def test_json_errors_carry_code_field_and_message_on_stderr(lab, args, code, field, needle):
    r = run(lab, *args, "--output", "json")
    err = json_error(r)
    assert (err["code"], err["field"], err["exit_code"], r.exit_code) == (code, field, exit_code(code), exit_code(code))
    assert needle in err["message"], err["message"]
    assert r.stdout == ""     # stdout is for results only


def test_text_errors_are_one_line_on_stderr(lab):
    r = run(lab, "devices", "show", "ghost")
    assert r.exit_code == 4 and r.stdout == ""
    assert r.stderr == "error: unknown device 'ghost' (known: orin-nano-0)\n"


def test_json_everywhere_from_the_environment(lab):
    r = run(lab, "devices", "show", "ghost", env={"JETFLEET_OUTPUT": "json"})
    assert json_error(r)["code"] == "NOT_FOUND"
    r = run(lab, "devices", "ls", env={"JETFLEET_OUTPUT": "json"})
    assert r.exit_code == 0 and [d["device_id"] for d in json.loads(r.stdout)] == ["orin-nano-0"]


def test_an_unreachable_controller_is_unavailable_naming_the_controller():
    r = CliRunner().invoke(cli, ["devices", "ls", "--controller", "127.0.0.1:1", "--output", "json"])
    err = json_error(r)
    assert r.exit_code == 5 and (err["code"], err["field"]) == ("UNAVAILABLE", "controller")
    assert "controller 127.0.0.1:1 is unreachable" in err["message"]


def test_a_certificate_without_the_operator_role_is_permission_denied(tmp_path):
    pki = tmp_path / "pki"
    for args in (["certs", "init"], ["certs", "issue", "controller", "ctl"], ["certs", "issue", "operator", "alice"],
                 ["certs", "issue", "agent", "orin-a"]):
        assert CliRunner().invoke(cli, [*args, "--dir", str(pki)]).exit_code == 0
    config = ControllerConfig(**{**FAST_CONTROLLER.__dict__, "tls_cert": str(pki / "ctl.crt"),
                                 "tls_key": str(pki / "ctl.key"), "tls_ca": str(pki / "ca.crt")})
    lt = LabThread(str(tmp_path / "data"), [], config=config).start()
    try:
        def as_(who, *extra):
            return CliRunner().invoke(cli, ["devices", "ls", "--controller", lt.address, "--tls-ca", str(pki / "ca.crt"),
                                            "--tls-cert", str(pki / f"{who}.crt"), "--tls-key", str(pki / f"{who}.key"),
                                            *extra])
        r = as_("orin-a", "--output", "json")
        err = json_error(r)
        assert r.exit_code == 6 and err["code"] == "PERMISSION_DENIED" and "needs 'operator'" in err["message"]
        r = as_("alice", "--output", "json")
        assert r.exit_code == 0 and json.loads(r.stdout) == []
        r = CliRunner().invoke(cli, ["devices", "ls", "--controller", lt.address, "--tls-ca", str(pki / "ca.crt"),
                                     "--output", "json"])
        err = json_error(r)
        assert r.exit_code == 3 and (err["code"], err["field"]) == ("INVALID_ARGUMENT", "tls") and "all three" in err["message"]
    finally:
        lt.close()


def test_the_documented_exit_codes_are_the_codes():
    """docs/cli.md's table is the contract: every row matches the code, and no two kinds share an exit status."""
    rows = re.findall(r"^\| (\d+) \| ([A-Z_]*) \|", DOCS.read_text(), flags=re.M)
    documented = {code: int(status) for status, code in rows if code}
    assert len(documented) >= 13
    for code, status in documented.items():
        assert exit_code(code) == status, code
    assert len(set(documented.values())) == len(documented)      # one meaning per exit status in the table
    assert {v for k, v in EXIT_CODES.items()} <= set(documented.values()) | {0}
