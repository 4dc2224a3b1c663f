"""The Ansible roles for real: lint, syntax, and both roles run against localhost into a temporary
prefix (systemd units rendered, not started), twice — the second run changes nothing."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jetfleet.shared.tls import init_ca, issue

ANSIBLE = Path(__file__).resolve().parents[1] / "deploy" / "ansible"
REPO = Path(__file__).resolve().parents[1]


def need(tool: str) -> str:
    path = shutil.which(tool)
    if not path:
        pytest.skip(f"{tool} is not installed (the dev extra installs ansible-core and ansible-lint)")
    return path


def test_lint_and_syntax():
    out = subprocess.run([need("ansible-lint"), "site.yml", "roles"], cwd=ANSIBLE, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    out = subprocess.run([need("ansible-playbook"), "-i", "inventory/example.yml", "--syntax-check", "site.yml"],
                         cwd=ANSIBLE, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.slow
def test_roles_run_for_real_against_localhost_and_are_idempotent(tmp_path):
    playbook = need("ansible-playbook")
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(REPO)],
                   check=True, timeout=300)
    version = re.search(r"jetfleet-([^-]+)-", next(wheels.glob("jetfleet-*.whl")).name).group(1)
    pki = tmp_path / "pki"
    init_ca(pki)
    issue(pki, "agent", "lab-orin-1")
    issue(pki, "controller", "localhost")
    root = tmp_path / "root"
    extra = {}
    for role in ("agent", "controller"):
        p = f"jetfleet_{role}_"
        extra.update({p + "prefix": str(root / "opt/jetfleet"), p + "etc": str(root / "etc/jetfleet"),
                      p + "systemd_dir": str(root / "etc/systemd/system"), p + "render_only": True,
                      p + "python": sys.executable, p + "pip_extra_args": f"--find-links {wheels}",
                      p + "pki_dir": str(pki), p + "package": f"jetfleet[{role}]=={version}"})
    extra.update({"jetfleet_agent_device_id": "lab-orin-1", "jetfleet_controller_manage_packages": False,
                  "jetfleet_controller_data_dir": str(root / "var/lib/jetfleet"),
                  "jetfleet_controller_prometheus_dir": str(root / "etc/prometheus"),
                  "jetfleet_controller_grafana_dir": str(root / "etc/grafana"),
                  "jetfleet_controller_grafana_dashboards_dir": str(root / "var/lib/grafana/dashboards/jetfleet"),
                  "jetfleet_controller_cert_name": "localhost"})
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(json.dumps({"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                                                     "ansible_python_interpreter": sys.executable}},
                                             "children": {"controller": {"hosts": {"localhost": {}}},
                                                          "agents": {"hosts": {"localhost": {}}}}}}))
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_BECOME": "false"}

    def run() -> str:
        out = subprocess.run([playbook, "-i", str(inventory), "site.yml", "-e", json.dumps(extra), "-e",
                              '{"ansible_become": false}'], cwd=ANSIBLE, capture_output=True, text=True, env=env,
                             timeout=1200)
        assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
        assert "lab-orin-1.key" not in out.stdout or "censored" in out.stdout or "no_log" in out.stdout
        return out.stdout

    run()
    second = run()
    assert re.search(r"localhost\s*:\s*ok=\d+\s+changed=0\s", second), second[-1500:]
    venv_python = root / "opt/jetfleet/venv/bin/python"
    check = subprocess.run([str(venv_python), "-c", "import jetfleet.agent.link, jetfleet.controller.server; print('ok')"],
                           capture_output=True, text=True)
    assert check.stdout.strip() == "ok", check.stderr
    unit = (root / "etc/systemd/system/jetfleet-agent.service").read_text()
    assert "Restart=on-failure" in unit and "--tls-cert" not in unit and "EnvironmentFile=" in unit
    env_file = (root / "etc/jetfleet/agent.env").read_text()
    assert "JETFLEET_DEVICE_ID=lab-orin-1" in env_file and "lab-orin-1.crt" in env_file
    assert oct((root / "etc/jetfleet/pki/lab-orin-1.key").stat().st_mode & 0o777) == "0o600"
    assert (root / "etc/systemd/system/jetfleet-controller.service").exists()
    assert "appendfsync always" in (root / "etc/jetfleet/redis/jetfleet.conf").read_text()
    assert (root / "etc/prometheus/prometheus.yml").exists()
    assert len(list((root / "var/lib/grafana/dashboards/jetfleet").glob("*.json"))) == 4
